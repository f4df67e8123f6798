#pragma once
// Local accelerators: device tokens from the variables that narrow them, and the GPUs this node has.

#include <optional>
#include <string>
#include <vector>

#include "detect/environment.h"

namespace distrun {

// The devices a variable narrows this process to, as tokens exactly as given. Reads, in order,
// CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES. nullopt when none is set.
// An empty CUDA_VISIBLE_DEVICES means "no GPU" and gives an empty list.
struct VisibleDevices {
  std::string variable;
  std::vector<std::string> tokens;
};
std::optional<VisibleDevices> ReadVisibleDevices(const Environment& env);

// Splits a device list ("0,1", "GPU-ab…,GPU-cd…", "MIG-…") into tokens, rejecting empty tokens.
std::vector<std::string> ParseDeviceList(std::string_view what, std::string_view value);

// GPUs on this node: the CUDA driver first (env.cuda_query), else /proc/driver/nvidia/gpus/* and
// /dev/nvidia[0-9]* under env.root. Tokens are indices "0".."n-1" in the driver's order.
struct DiscoveredGpus {
  std::vector<GpuInfo> gpus;
  std::string source;  // "cuda-driver", "procfs", "devfs" or "none"
};
DiscoveredGpus DiscoverGpus(const Environment& env);

// The real CUDA driver query (dlopen("libcuda.so.1")), used by Environment::FromProcess.
std::optional<std::vector<GpuInfo>> QueryCudaDriver();

}  // namespace distrun
