#pragma once
// Listing a directory of /dev, /proc or /sys, which detection does on every distrun start.

#include <filesystem>
#include <string>
#include <vector>

namespace distrun {

// The names in `dir` ("." and ".." left out), sorted; none when it cannot be read. readdir, not
// std::filesystem: /dev holds a hundred entries or more, where a path object per entry and path-wise
// sorting cost 0.7 M instructions per listing (callgrind), a sixth of `distrun --detect`.
std::vector<std::string> ListNames(const std::filesystem::path& dir);

}  // namespace distrun
