#pragma once
// The Python that distrun writes for its workers (launcher/supervise/python_site.h), carried in the program.
// The sources are real files in the tree, embedded at build time (cmake/embed_text.cmake).

#include <string_view>

namespace distrun::embedded {

extern const std::string_view kSitecustomizePy;  // launcher/supervise/python/sitecustomize.py
extern const std::string_view kDistrunJaxPy;     // python/distrun/jax.py

}  // namespace distrun::embedded
