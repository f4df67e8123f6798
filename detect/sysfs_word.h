#pragma once
// Reading a one-word file of /sys (a PCI device's vendor or device id), which detection does for every PCI
// device at every distrun start: an open and one read, not a stream per file.

#include <filesystem>
#include <string>

namespace distrun {

// The first whitespace-separated word of `file` ("0x10de" of "0x10de\n"), from its first 64 bytes; "" when
// it cannot be read.
std::string ReadFirstWord(const std::filesystem::path& file);

}  // namespace distrun
