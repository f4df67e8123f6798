#pragma once
// Everything detection may learn about the world, injected so that detectors are pure functions and tests
// can feed recorded environments. Environment::FromProcess() is the only place that reads the real one.

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace distrun {

struct HttpResponse {
  int status = 0;
  std::string body;
};

struct HttpRequest {
  std::string host;  // name or IPv4/IPv6 literal (no brackets)
  int port = 80;
  std::string path;  // starts with '/'
  std::vector<std::pair<std::string, std::string>> headers;
  std::chrono::milliseconds timeout{1000};
};

// Returns nullopt when the server cannot be reached in time (not an error: the caller decides).
using HttpGet = std::function<std::optional<HttpResponse>(const HttpRequest&)>;

// One GPU as the CUDA driver reports it.
struct GpuInfo {
  int ordinal = 0;         // CUDA device ordinal, in the driver's (visible) order
  std::string uuid;        // "GPU-..." or "MIG-..."
  std::string pci_bus_id;  // "0000:3b:00.0"
  std::string name;
};

// Asks the CUDA driver for the devices this process can see; nullopt when no driver can be loaded.
using CudaQuery = std::function<std::optional<std::vector<GpuInfo>>()>;

struct Environment {
  std::map<std::string, std::string, std::less<>> vars;
  std::string hostname;
  std::filesystem::path root = "/";  // file-system root for /proc, /sys and /dev look-ups
  HttpGet http_get;                  // empty: no network access
  CudaQuery cuda_query;              // empty: no CUDA driver
  int cpu_count = 1;                 // CPUs this process may run on (its affinity mask)

  // Value of a variable, or nullptr when unset. An empty value counts as set.
  const std::string* Get(std::string_view name) const;
  bool Has(std::string_view name) const { return Get(name) != nullptr; }
  std::string GetOr(std::string_view name, std::string_view fallback) const;
  // The path `p` (absolute, e.g. "/proc/driver/nvidia") under root.
  std::filesystem::path Path(std::string_view p) const;

  // The real process environment, hostname, "/" root, a real HTTP client and the real CUDA driver.
  static Environment FromProcess();
};

}  // namespace distrun
