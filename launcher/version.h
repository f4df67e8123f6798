#pragma once

#include <string>
#include <vector>

namespace distrun {

const char* Version();

// The optional features built in, in a fixed order: "cuda-driver" always (the driver is loaded at run time
// when present), "nccl" where the build found CUDA with NCCL and built the NCCL helper.
std::vector<std::string> Features();

// What `distrun --version` prints: "distrun 0.1.0 (features: cuda-driver, nccl)".
std::string VersionLine();

}  // namespace distrun
