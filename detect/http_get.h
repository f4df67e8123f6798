#pragma once
// A small blocking HTTP/1.1 GET client for metadata servers (GCE), with a hard timeout.

#include <optional>

#include "detect/environment.h"

namespace distrun {

std::optional<HttpResponse> HttpGetBlocking(const HttpRequest& request);

}  // namespace distrun
