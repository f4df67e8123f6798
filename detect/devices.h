#pragma once
// Local accelerators: device tokens from the variables that narrow them, and the GPUs and TPU chips this
// node has.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "detect/cuda_driver.h"
#include "detect/environment.h"

namespace distrun {

// The devices a variable narrows this process to.
struct VisibleDevices {
  std::string variable;             // the variable the tokens come from
  std::vector<std::string> tokens;  // exactly as given: "0", "GPU-<uuid>", "MIG-<uuid>", "MIG-GPU-<uuid>/1/2"
  std::vector<std::string> ignored;  // entries after a negative index, which CUDA ignores (worth a warning)
};

// Reads CUDA_VISIBLE_DEVICES, else HIP_VISIBLE_DEVICES and ROCR_VISIBLE_DEVICES (see devices.cc for the
// order); nullopt when none is set. An empty value means "no GPU" and gives an empty list. Malformed
// lists are a UsageError. Workers must be narrowed through the same variable (`variable`).
std::optional<VisibleDevices> ReadVisibleDevices(const Environment& env);
// Parses the value of such a variable (the grammar is in devices.cc).
VisibleDevices ParseVisibleDevices(std::string_view variable, std::string_view value);

// A device list that distrun is given (--local-device-ids, SLURM_STEP_GPUS) as tokens, held to the
// grammar above; an empty list and a negative index are errors too. Errors name `what`.
std::vector<std::string> ParseDeviceTokens(std::string_view what, std::string_view value);

// GPUs on this node: the CUDA driver first (env.cuda_query), else /proc/driver/nvidia/gpus/*, else the
// /dev/nvidia[0-9]* device files, else AMD GPUs in the KFD topology, all under env.root.
// The driver's list is already narrowed by CUDA_VISIBLE_DEVICES and in its own order; the others list
// every GPU of the node, sorted in PCI bus order (see devices.cc). Ordinals are positions in the list.
struct DiscoveredGpus {
  std::vector<GpuInfo> gpus;
  std::string source;    // "cuda-driver", "procfs", "devfs", "kfd" or "none"
  std::string searched;  // what was looked at, for messages: "CUDA driver (libcuda.so.1): not loaded, ..."
};
DiscoveredGpus DiscoverGpus(const Environment& env);

// A device token and the GPU it names on this node, as far as distrun can tell without starting a CUDA
// context. For a MIG device the GPU is its parent (the PCI bus id is what CPU binding needs).
struct ResolvedDevice {
  std::string token;
  std::optional<GpuInfo> gpu;  // nullopt: not known here, `problem` says why
  std::string problem;
};
struct DeviceResolution {
  std::vector<ResolvedDevice> devices;  // one per token, in order
  std::string source;                   // where the GPUs came from, as DiscoveredGpus::source
};

// Resolves the tokens of `variable` (CUDA_VISIBLE_DEVICES, HIP_/ROCR_VISIBLE_DEVICES, SLURM_STEP_GPUS,
// --local-device-ids) to this node's GPUs. The CUDA driver answers first: when it applied the same
// CUDA_VISIBLE_DEVICES itself, its k-th device is the k-th token (CUDA's own resolution, right under
// cgroup-constrained devices and for MIG); otherwise its list, or the /proc, /dev and KFD files (every GPU
// of the node, in PCI order), are matched with CUDA's rules (see MatchDeviceTokens).
DeviceResolution ResolveDevices(const Environment& env, const std::vector<std::string>& tokens,
                                std::string_view variable);

// CUDA's rules for CUDA_VISIBLE_DEVICES against `gpus`, every GPU the tokens may name in CUDA's index order:
// an index is a position; GPU-<prefix> names the one GPU whose UUID starts with it (case aside; a prefix
// that fits several GPUs is invalid); MIG-GPU-<uuid>/<gi>/<ci> names a MIG device of that GPU;
// MIG-<uuid> a GPU listed with that UUID (the driver lists MIG devices under their own UUID), else it is
// unknown here. With `ends_list` (the value of a *_VISIBLE_DEVICES variable) CUDA stops at the first
// invalid entry: that entry and every one after it name no GPU. `source` is named in problems.
std::vector<ResolvedDevice> MatchDeviceTokens(const std::vector<std::string>& tokens,
                                              const std::vector<GpuInfo>& gpus, std::string_view source,
                                              bool ends_list);

// The device tokens this process may hand out to its workers: the tokens of the variable that narrows
// it, else "0".."n-1" for the n discovered GPUs. Discovery runs only when no variable is set.
// tokens.size() is the number of GPUs this process may use (checks such as "SLURM_LOCALID beyond the
// visible GPUs" compare against it).
struct LocalDevices {
  std::vector<std::string> tokens;
  std::string source;                // the variable's name, or DiscoveredGpus::source
  std::vector<std::string> ignored;  // see VisibleDevices::ignored
};
LocalDevices FindLocalDevices(const Environment& env);
std::vector<std::string> LocalDeviceTokens(const Environment& env);

// TPU chips on this host: /dev/accel[0-9]* (TPU v2-v4), else /dev/vfio/[0-9]* groups (v5e and later)
// that hold a Google PCI device, under env.root.
int CountTpuChips(const Environment& env);

// "0000:3b:00.0": lower-case hex with a 4-digit domain where it fits (the driver says "0000:3B:00.0",
// nvidia-smi "00000000:3B:00.0", /proc and /sys "0000:3b:00.0"). Text it cannot read comes back lower-cased.
std::string NormalizePciBusId(std::string_view id);

}  // namespace distrun
