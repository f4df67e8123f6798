#include "detect/cuda_driver.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <utility>

#include "detect/devices.h"
#include "detect/directory.h"
#include "detect/sysfs_word.h"

namespace distrun {
namespace {

// The few driver entry points distrun needs, declared here so that the build never needs CUDA headers.
// CUresult is an int-sized enum and CUdevice an int; CUDAAPI is empty on Linux.
using CuResult = int;
using CuDevice = int;
struct CuUuid {
  std::array<unsigned char, 16> bytes;
};
using CuInitFn = CuResult (*)(unsigned int flags);
using CuDeviceGetCountFn = CuResult (*)(int* count);
using CuDeviceGetFn = CuResult (*)(CuDevice* device, int ordinal);
using CuDeviceGetNameFn = CuResult (*)(char* name, int len, CuDevice device);
using CuDeviceGetPciBusIdFn = CuResult (*)(char* pci_bus_id, int len, CuDevice device);
using CuDeviceGetUuidFn = CuResult (*)(CuUuid* uuid, CuDevice device);

constexpr CuResult kCudaSuccess = 0;
constexpr CuResult kCudaErrorNoDevice = 100;

constexpr char kNvidiaPciVendor[] = "0x10de";

struct DlCloser {
  void operator()(void* handle) const { dlclose(handle); }
};
using LibraryHandle = std::unique_ptr<void, DlCloser>;

template <typename Fn>
Fn Symbol(void* library, const char* name) {
  return reinterpret_cast<Fn>(dlsym(library, name));
}

// A NUL-terminated string the driver wrote into `buffer`, or "" when it failed.
template <size_t N>
std::string CString(CuResult result, const std::array<char, N>& buffer) {
  if (result != kCudaSuccess) return {};
  return std::string(buffer.data(), strnlen(buffer.data(), N));
}

}  // namespace

std::string FormatGpuUuid(const std::array<unsigned char, 16>& bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "GPU-";
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += kHex[bytes[i] >> 4];
    out += kHex[bytes[i] & 0xf];
  }
  return out;
}

std::string CudaDriverAbsence(const Environment& env) {
  if (const std::string* path = env.Get("LD_LIBRARY_PATH"); path != nullptr && !path->empty()) return "";
  for (const char* sign :
       {"/proc/driver/nvidia", "/dev/nvidiactl", "/dev/dxg", "/dev/nvmap", "/dev/nvhost-ctrl-gpu"}) {
    if (::access(env.Path(sign).c_str(), F_OK) == 0) return "";
  }
  const std::filesystem::path pci = env.Path("/sys/bus/pci/devices");
  for (const std::string& name : ListNames(pci)) {
    if (ReadFirstWord(pci / name / "vendor") == kNvidiaPciVendor) return "";
  }
  return "not asked: no NVIDIA kernel module, device node or PCI device here, and no LD_LIBRARY_PATH";
}

std::optional<std::vector<GpuInfo>> QueryCudaDriver() { return QueryCudaDriverLibrary("libcuda.so.1"); }

std::optional<std::vector<GpuInfo>> QueryCudaDriverLibrary(const std::string& library) {
  // RTLD_NODELETE: the driver keeps threads and state after cuInit and has no shutdown call, so unmapping
  // it on dlclose is unsafe; the handle is still released, the code stays mapped.
  LibraryHandle handle(dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE));
  if (!handle) return std::nullopt;
  auto cu_init = Symbol<CuInitFn>(handle.get(), "cuInit");
  auto cu_device_get_count = Symbol<CuDeviceGetCountFn>(handle.get(), "cuDeviceGetCount");
  auto cu_device_get = Symbol<CuDeviceGetFn>(handle.get(), "cuDeviceGet");
  auto cu_device_get_name = Symbol<CuDeviceGetNameFn>(handle.get(), "cuDeviceGetName");
  auto cu_device_get_pci_bus_id = Symbol<CuDeviceGetPciBusIdFn>(handle.get(), "cuDeviceGetPCIBusId");
  // _v2 (CUDA 11.4+) gives a MIG instance its own UUID; the original gives the UUID of the parent GPU.
  auto cu_device_get_uuid = Symbol<CuDeviceGetUuidFn>(handle.get(), "cuDeviceGetUuid_v2");
  if (cu_device_get_uuid == nullptr)
    cu_device_get_uuid = Symbol<CuDeviceGetUuidFn>(handle.get(), "cuDeviceGetUuid");
  if (cu_init == nullptr || cu_device_get_count == nullptr || cu_device_get == nullptr) return std::nullopt;

  CuResult init = cu_init(0);
  // No GPU (or CUDA_VISIBLE_DEVICES hides them all) is an answer; any other failure (driver/library
  // mismatch, no permission on /dev/nvidia*) means the driver cannot tell, and the caller falls back.
  if (init == kCudaErrorNoDevice) return std::vector<GpuInfo>{};
  if (init != kCudaSuccess) return std::nullopt;
  int count = 0;
  if (cu_device_get_count(&count) != kCudaSuccess || count < 0) return std::nullopt;

  std::vector<GpuInfo> gpus;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    GpuInfo gpu;
    gpu.ordinal = ordinal;
    CuDevice device = 0;
    if (cu_device_get(&device, ordinal) != kCudaSuccess) return std::nullopt;
    if (cu_device_get_name != nullptr) {
      std::array<char, 256> name{};
      gpu.name = CString(cu_device_get_name(name.data(), static_cast<int>(name.size()), device), name);
    }
    if (cu_device_get_pci_bus_id != nullptr) {
      std::array<char, 64> pci{};
      gpu.pci_bus_id = NormalizePciBusId(
          CString(cu_device_get_pci_bus_id(pci.data(), static_cast<int>(pci.size()), device), pci));
    }
    // A MIG instance's UUID comes back with the "GPU-" prefix too: these calls cannot tell it apart.
    CuUuid uuid{};
    if (cu_device_get_uuid != nullptr && cu_device_get_uuid(&uuid, device) == kCudaSuccess) {
      gpu.uuid = FormatGpuUuid(uuid.bytes);
    }
    gpus.push_back(std::move(gpu));
  }
  return gpus;
}

}  // namespace distrun
