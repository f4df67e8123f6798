#pragma once
// Files that come with the distrun program: distrun-sentinel and the runtime module. Beside the program in a
// build tree and in the Python wheel (the environment's bin), in ../libexec/distrun in an installation.

#include <string>
#include <string_view>

namespace distrun {

// `name` beside the program at `self`, else in ../libexec/distrun from it; empty when neither is there
// (or `self` is empty). `access_mode` is access(2)'s: X_OK for a program, R_OK for a library.
std::string FindCompanionFile(const std::string& self, std::string_view name, int access_mode);

}  // namespace distrun
