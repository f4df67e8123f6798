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

// What the launcher's own MPI library says about the job (detect/mpi_probe.h asks it). Rank 0 chose the
// ports, the job id and the token, so every rank holds the same ones.
struct MpiProbeResult {
  std::string library;  // the library that answered and its MPI_Get_library_version, for messages
  std::string version;
  int rank = 0;
  int size = 1;
  int local_rank = 0;  // among the ranks that share this node's memory (MPI_COMM_TYPE_SHARED)
  int local_size = 1;
  int node_rank = 0;  // nodes are numbered by their lowest rank, so rank 0 is on node 0
  int num_nodes = 1;
  std::vector<std::string> hosts;  // each node's host name, in node order
  int coordinator_port = 0;        // three distinct ports that were free on rank 0's host
  int master_port = 0;
  int jax_port = 0;
  std::string job_id;  // random
  std::string token;   // random secret for the job's runtime; never printed
};

// The probe's answer, or a one-line reason why it has none (no MPI library loads, MPI failed).
struct MpiProbeOutcome {
  std::optional<MpiProbeResult> result;
  std::string error;
};

// Initialises MPI with the first of `libraries` (paths or names for the dynamic loader) that loads,
// learns the job's shape, and finalises. Every rank of the job must call it: MPI_Init is collective.
using MpiProbe = std::function<MpiProbeOutcome(const std::vector<std::string>& libraries)>;

struct Environment {
  std::map<std::string, std::string, std::less<>> vars;
  std::string hostname;
  std::filesystem::path root = "/";  // file-system root for /proc, /sys and /dev look-ups
  HttpGet http_get;                  // empty: no network access
  CudaQuery cuda_query;              // empty: no CUDA driver
  std::string cuda_not_asked;        // why cuda_query is empty, when there is a reason to say
  MpiProbe mpi_probe;                // empty: no MPI library can be used
  int cpu_count = 1;                 // CPUs this process may run on (its affinity mask)
  int parent_pid = 0;                // the process that started this one; 0: unknown
  std::string program;               // this distrun's executable, absolute (/proc/self/exe); "": unknown

  // Value of a variable, or nullptr when unset. An empty value counts as set.
  const std::string* Get(std::string_view name) const;
  bool Has(std::string_view name) const { return Get(name) != nullptr; }
  std::string GetOr(std::string_view name, std::string_view fallback) const;
  // The path `p` (absolute, e.g. "/proc/driver/nvidia") under root.
  std::filesystem::path Path(std::string_view p) const;

  // The real process environment, hostname, "/" root, a real HTTP client, the real CUDA driver and the
  // real MPI probe.
  static Environment FromProcess();
};

}  // namespace distrun
