#pragma once
// The job's page (job_page.html, compiled in by runtime/CMakeLists.txt with cmake/embed_text.cmake): one
// self-contained HTML file with its style and script inline, which polls job.json by a relative URL, so
// that it works behind a proxy that serves it under a prefix.

#include <string_view>

namespace distrun::embedded {

extern const std::string_view kJobPageHtml;

}  // namespace distrun::embedded
