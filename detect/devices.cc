// Placeholder until device discovery lands.
#include "detect/devices.h"

namespace distrun {
std::optional<VisibleDevices> ReadVisibleDevices(const Environment&) { return std::nullopt; }
std::vector<std::string> ParseDeviceList(std::string_view, std::string_view) { return {}; }
DiscoveredGpus DiscoverGpus(const Environment&) { return {{}, "none"}; }
std::optional<std::vector<GpuInfo>> QueryCudaDriver() { return std::nullopt; }
}  // namespace distrun
