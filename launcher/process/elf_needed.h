#pragma once
// The shared libraries a program or library names in its dynamic section (DT_NEEDED), read from the file
// itself as the dynamic loader would, without loading it.

#include <string>
#include <vector>

namespace distrun {

// In the order the file lists them; empty for a file that is not a 64-bit little-endian ELF object with a
// dynamic section (a script, a static program), or that cannot be read.
std::vector<std::string> ElfNeededLibraries(const std::string& path);

}  // namespace distrun
