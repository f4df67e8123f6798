#pragma once
// The CUDA driver, asked at run time: distrun never links CUDA, so it runs where no driver is installed.

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "detect/environment.h"

namespace distrun {

// The GPUs the driver shows this process (it applies CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER itself),
// in its ordinal order. nullopt when libcuda.so.1 cannot be loaded or does not work (cuInit fails with
// anything but CUDA_ERROR_NO_DEVICE); an empty list when the driver works and shows no GPU.
std::optional<std::vector<GpuInfo>> QueryCudaDriver();
// "" when an NVIDIA driver may be on this machine, else why asking libcuda.so.1 would be in vain (so
// FromProcess leaves Environment::cuda_query empty). Where libcuda.so.1 is not installed, the loader's search
// for it is ~90 failed system calls under its lock at every start (3 % of `--detect`, bench/RESULTS.md).
// Any sign is enough to ask: the kernel module (/proc/driver/nvidia), a device node (/dev/nvidiactl; WSL's
// /dev/dxg; Jetson's /dev/nvmap or /dev/nvhost-ctrl-gpu), an NVIDIA PCI device whose module is not loaded
// yet (libcuda loads it through nvidia-modprobe), or LD_LIBRARY_PATH, which may lead to a driver elsewhere.
std::string CudaDriverAbsence(const Environment& env);
// The same with another library (a path or a name for the dynamic loader), so tests can load a fake.
std::optional<std::vector<GpuInfo>> QueryCudaDriverLibrary(const std::string& library);

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints a UUID.
std::string FormatGpuUuid(const std::array<unsigned char, 16>& bytes);

}  // namespace distrun
