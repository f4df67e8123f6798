// Cloud TPU VMs and GKE TPU pods. One distrun runs per TPU host (per-node), except when
// TPU_PROCESS_ADDRESSES lists several processes on one host: then the user started one distrun per
// process (per-task).
//
// Where the slice description comes from, in order:
//  1. TPU_PROCESS_ADDRESSES_PATH (a file holding the list, as current JAX reads it first) or
//     TPU_PROCESS_ADDRESSES, + CLOUD_TPU_TASK_ID (libtpu's multi-process form), or TPU_WORKER_HOSTNAMES +
//     TPU_WORKER_ID (what GKE's TPU webhook sets); MEGASCALE_* for multislice.
//  2. The GCE metadata server (agent-worker-number, worker-network-endpoints, tpu-env), but only on a
//     machine that shows a TPU and only when TPU_SKIP_MDS_QUERY does not forbid it, so that detection on
//     any other machine never touches the network.
#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>

#include "detect/coordinator_port.h"
#include "detect/detector.h"
#include "detect/detector_util.h"
#include "detect/directory.h"
#include "detect/errors.h"
#include "detect/gce_metadata.h"
#include "detect/parse.h"
#include "detect/sysfs_word.h"

namespace distrun {
namespace {

namespace fs = std::filesystem;

// PCI ids of TPU chips (vendor Google). Google's virtual NIC shares the vendor id, so the device id
// matters. /dev/vfio/N alone is not used as a sign: GPU-passthrough hosts have it too.
constexpr std::string_view kGooglePciVendor = "0x1ae0";
constexpr std::array<std::string_view, 7> kTpuPciDevices = {
    "0x0027",  // v2, v3
    "0x0056",  // (unnamed)
    "0x005e",  // v4
    "0x0062",  // v5p
    "0x0063",  // v5e
    "0x006f",  // v6e
    "0x0076",  // TPU7x
};

bool IsAccelDevice(std::string_view name) {
  if (!name.starts_with("accel") || name.size() == 5) return false;
  return name.substr(5).find_first_not_of("0123456789") == std::string_view::npos;
}

// Signs that this machine is a TPU VM (the only place a metadata query can help).
bool LooksLikeTpuVm(const Environment& env) {
  if (env.Has("TPU_ACCELERATOR_TYPE")) return true;
  for (const std::string& name : ListNames(env.Path("/dev"))) {
    if (IsAccelDevice(name)) return true;
  }
  const fs::path pci = env.Path("/sys/bus/pci/devices");
  for (const std::string& name : ListNames(pci)) {
    if (ReadFirstWord(pci / name / "vendor") != kGooglePciVendor) continue;
    std::string device = ReadFirstWord(pci / name / "device");
    if (std::find(kTpuPciDevices.begin(), kTpuPciDevices.end(), device) != kTpuPciDevices.end()) return true;
  }
  return false;
}

// libtpu treats any value as "skip"; "0" and "false" are read as the user meaning "do not skip".
bool MetadataForbidden(const Environment& env) {
  const std::string* skip = env.Get("TPU_SKIP_MDS_QUERY");
  if (skip == nullptr) return false;
  std::string v = *skip;
  std::transform(v.begin(), v.end(), v.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return v != "0" && v != "false";
}

bool MetadataAllowed(const Environment& env) {
  return env.http_get && !MetadataForbidden(env) && LooksLikeTpuVm(env);
}

constexpr std::string_view kAddressFileVariable = "TPU_PROCESS_ADDRESSES_PATH";

// Which variables describe the slice. TPU_PROCESS_ADDRESSES is paired with CLOUD_TPU_TASK_ID (process
// ids), TPU_WORKER_HOSTNAMES with TPU_WORKER_ID (host ids); each falls back to the other id. The address file
// wins over both lists, as in JAX; set to "", it is ignored.
struct SliceVars {
  std::string list;  // empty when no list is set
  std::string id;    // empty when no id is set
};

SliceVars FindSliceVars(const Environment& env) {
  bool hostnames = env.Has("TPU_WORKER_HOSTNAMES");
  bool addresses = env.Has("TPU_PROCESS_ADDRESSES");
  bool address_file = !env.GetOr(kAddressFileVariable, "").empty();
  bool worker_id = env.Has("TPU_WORKER_ID");
  bool task_id = env.Has("CLOUD_TPU_TASK_ID");
  const std::string process_id = task_id ? "CLOUD_TPU_TASK_ID" : worker_id ? "TPU_WORKER_ID" : "";
  if (address_file) return {std::string(kAddressFileVariable), process_id};
  if (addresses && (task_id || !hostnames)) return {"TPU_PROCESS_ADDRESSES", process_id};
  std::string id = worker_id ? "TPU_WORKER_ID" : task_id ? "CLOUD_TPU_TASK_ID" : "";
  return {hostnames ? "TPU_WORKER_HOSTNAMES" : "", id};
}

std::string Describe(const MetadataAttribute& a) {
  switch (a.outcome) {
    case MetadataAttribute::Outcome::kFound:
      return "found";
    case MetadataAttribute::Outcome::kNotFound:
      return "HTTP 404, not set on this VM";
    case MetadataAttribute::Outcome::kRefused:
      return "HTTP " + std::to_string(a.status);
    case MetadataAttribute::Outcome::kUnreachable:
      break;
  }
  return "no answer within " + std::to_string(kMetadataTimeout.count()) + " ms";
}

std::vector<std::string> Missing(const Environment& env) {
  SliceVars vars = FindSliceVars(env);
  if (!vars.list.empty() && !vars.id.empty()) return {};
  std::vector<std::string> missing;
  if (vars.list.empty()) {
    missing.emplace_back("TPU_WORKER_HOSTNAMES, TPU_PROCESS_ADDRESSES or TPU_PROCESS_ADDRESSES_PATH");
  }
  if (vars.id.empty()) missing.emplace_back("TPU_WORKER_ID or CLOUD_TPU_TASK_ID");
  if (!MetadataAllowed(env)) return missing;
  try {
    MetadataServer server = FindMetadataServer(env);
    MetadataAttribute id = GetInstanceAttribute(env, server, "agent-worker-number");
    if (id.outcome == MetadataAttribute::Outcome::kFound) return {};
    missing.push_back("agent-worker-number from the GCE metadata server at " + server.display + " (" +
                      Describe(id) + ")");
  } catch (const UsageError& e) {
    missing.emplace_back(e.what());
  }
  return missing;
}

// A value and how messages should name where it came from.
struct Sourced {
  std::string value;
  std::string origin;
};

// Reads the metadata server on demand, each attribute at most once.
class Metadata {
 public:
  explicit Metadata(const Environment& env) : env_(env), server_(FindMetadataServer(env)) {}

  Sourced Require(std::string_view key) {
    MetadataAttribute a = GetInstanceAttribute(env_, server_, key);
    if (a.outcome != MetadataAttribute::Outcome::kFound) {
      throw UsageError("the GCE metadata server at " + server_.display + " did not return " +
                       std::string(key) + " (" + Describe(a) +
                       "); describe the slice with TPU_WORKER_HOSTNAMES and TPU_WORKER_ID " +
                       "instead (and TPU_SKIP_MDS_QUERY=1 to stop asking the server)");
    }
    return {a.value, "GCE metadata " + std::string(key)};
  }

  // A line of the tpu-env attribute. A VM without tpu-env (404) simply has none of its keys.
  std::optional<Sourced> TpuEnv(std::string_view key) {
    if (!tpu_env_) {
      MetadataAttribute a = GetInstanceAttribute(env_, server_, "tpu-env");
      if (a.outcome != MetadataAttribute::Outcome::kFound &&
          a.outcome != MetadataAttribute::Outcome::kNotFound) {
        throw UsageError("the GCE metadata server at " + server_.display + " did not return tpu-env (" +
                         Describe(a) + "), which says whether this slice is part of a multislice job; set " +
                         "MEGASCALE_COORDINATOR_ADDRESS, MEGASCALE_NUM_SLICES and MEGASCALE_SLICE_ID (or " +
                         "MEGASCALE_NUM_SLICES=1) to say it");
      }
      tpu_env_ = ParseTpuEnv(a.value);
    }
    auto it = tpu_env_->find(key);
    if (it == tpu_env_->end()) return std::nullopt;
    return Sourced{it->second, std::string(key) + " in GCE metadata tpu-env"};
  }

 private:
  const Environment& env_;
  MetadataServer server_;
  std::optional<std::map<std::string, std::string, std::less<>>> tpu_env_;
};

// The processes of this slice, each named by its host, and this process's index among them.
struct Slice {
  std::vector<std::string> process_hosts;
  int id = 0;
  bool from_metadata = false;
  std::string list_origin;
  std::string id_origin;
};

std::vector<std::string> HostsFromVariable(const std::string& name, const std::string& value) {
  std::vector<std::string> hosts;
  for (const std::string& field : Split(value, ',')) {
    std::string_view entry = Trim(field);
    if (entry.empty()) {
      throw UsageError(name + "='" + ShownValue(value) +
                       "' has an empty entry; list every TPU worker, comma-separated " + "(\"host0,host1\")");
    }
    hosts.push_back(ParseHostPort(name, entry).host);
  }
  return hosts;
}

// The trimmed content of the file TPU_PROCESS_ADDRESSES_PATH names. Missing or empty is an error, never a
// reason to read the variables instead: they may describe another slice than the file.
std::string ReadAddressFile(const Environment& env) {
  const std::string& name = *env.Get(kAddressFileVariable);
  const fs::path path = fs::path(name).is_absolute() ? env.Path(name) : fs::path(name);
  const std::string shown = std::string(kAddressFileVariable) + "='" + ShownValue(name) + "'";
  std::ifstream in(path);
  if (!in) {
    throw UsageError(shown + " names a file that cannot be read (" + std::strerror(errno) +
                     "); give the path of the file that lists this slice's process addresses, or unset it");
  }
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string_view trimmed = Trim(content);
  if (trimmed.empty()) {
    throw UsageError(shown + " names an empty file; it must list this slice's process addresses, " +
                     "comma-separated (\"host0:8476,host1:8476\")");
  }
  return std::string(trimmed);
}

Slice ReadSlice(const Environment& env, std::optional<Metadata>& metadata) {
  SliceVars vars = FindSliceVars(env);
  Slice slice;
  if (vars.list == kAddressFileVariable) {
    slice.list_origin = std::string(kAddressFileVariable) + " file " + *env.Get(kAddressFileVariable);
    slice.process_hosts = HostsFromVariable(slice.list_origin, ReadAddressFile(env));
  } else if (!vars.list.empty()) {
    slice.list_origin = vars.list;
    slice.process_hosts = HostsFromVariable(vars.list, *env.Get(vars.list));
  } else {
    Sourced endpoints = metadata->Require("worker-network-endpoints");
    slice.list_origin = endpoints.origin;
    slice.process_hosts = ParseWorkerEndpoints(endpoints.origin, endpoints.value);
    slice.from_metadata = true;
  }
  Sourced id;
  if (!vars.id.empty()) {
    id = {*env.Get(vars.id), vars.id};
  } else {
    id = metadata->Require("agent-worker-number");
    slice.from_metadata = true;
  }
  slice.id_origin = id.origin;
  slice.id = ParseCount(id.origin, id.value);
  if (slice.id >= static_cast<int>(slice.process_hosts.size())) {
    throw UsageError(id.origin + "=" + std::to_string(slice.id) + " is not below the " +
                     std::to_string(slice.process_hosts.size()) + " entries of " + slice.list_origin +
                     "; the id counts from 0 within the slice, so one of the two is wrong for this host");
  }
  return slice;
}

// MEGASCALE_* from the environment, or (when the slice itself came from the metadata server) from tpu-env.
std::optional<Sourced> Megascale(const Environment& env, std::optional<Metadata>& metadata, bool use_metadata,
                                 std::string_view name) {
  if (const std::string* v = env.Get(name)) return Sourced{*v, std::string(name)};
  if (use_metadata) return metadata->TpuEnv(name);
  return std::nullopt;
}

// The host part of MEGASCALE_COORDINATOR_ADDRESS ("host", "host:port", "[v6]:port").
std::string HostOf(const Sourced& address) {
  std::string_view v = Trim(address.value);
  if (std::count(v.begin(), v.end(), ':') > 1 && v.front() != '[') return std::string(v);  // bare IPv6
  return ParseHostPort(address.origin, v).host;
}

std::string Join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += sep;
    out += item;
  }
  return out;
}

Topology Detect(const Environment& env) {
  std::optional<Metadata> metadata;
  SliceVars vars = FindSliceVars(env);
  if (vars.list.empty() || vars.id.empty()) metadata.emplace(env);
  Slice slice = ReadSlice(env, metadata);

  std::optional<Sourced> address =
      Megascale(env, metadata, slice.from_metadata, "MEGASCALE_COORDINATOR_ADDRESS");
  std::optional<Sourced> num_slices_value =
      Megascale(env, metadata, slice.from_metadata, "MEGASCALE_NUM_SLICES");
  std::optional<Sourced> slice_id_value = Megascale(env, metadata, slice.from_metadata, "MEGASCALE_SLICE_ID");
  int num_slices = num_slices_value ? ParseCount(num_slices_value->origin, num_slices_value->value) : 1;
  int slice_id = slice_id_value ? ParseCount(slice_id_value->origin, slice_id_value->value) : 0;
  if (num_slices_value && num_slices == 0) {
    throw UsageError(num_slices_value->origin +
                     "=0 is not a slice count; set it to the number of slices (1 or more)");
  }
  if (address) {
    if (!num_slices_value || !slice_id_value) {
      throw UsageError(
          address->origin + "='" + ShownValue(address->value) + "' marks a multislice job but " +
          (!num_slices_value ? "MEGASCALE_NUM_SLICES" : "MEGASCALE_SLICE_ID") +
          " is not set; set MEGASCALE_NUM_SLICES to the number of slices and MEGASCALE_SLICE_ID to "
          "this slice's index");
    }
  } else if (num_slices > 1 || slice_id > 0) {
    const Sourced& which = num_slices > 1 ? *num_slices_value : *slice_id_value;
    throw UsageError(which.origin + "=" + which.value + " says this is a multislice job but " +
                     "MEGASCALE_COORDINATOR_ADDRESS is not set; set it to the host of slice 0's worker 0");
  }
  if (slice_id >= num_slices) {
    throw UsageError(slice_id_value->origin + "=" + std::to_string(slice_id) + " is not below " +
                     num_slices_value->origin + "=" + std::to_string(num_slices) +
                     "; slice ids run from 0 to MEGASCALE_NUM_SLICES-1");
  }

  // Hosts in order of first appearance; several processes may share one (TPU_PROCESS_ADDRESSES).
  std::vector<std::string> hosts;
  for (const std::string& h : slice.process_hosts) {
    if (std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
  }
  const std::string& my_host = slice.process_hosts[slice.id];
  const int hosts_per_slice = static_cast<int>(hosts.size());
  const int processes_per_slice = static_cast<int>(slice.process_hosts.size());
  const int host_index = static_cast<int>(std::find(hosts.begin(), hosts.end(), my_host) - hosts.begin());

  Topology t;
  t.method = "tpu";
  t.num_nodes = hosts_per_slice * num_slices;
  t.node_rank = host_index + slice_id * hosts_per_slice;
  t.slice_index = slice_id;
  if (processes_per_slice == hosts_per_slice) {
    t.launch_mode = LaunchMode::kPerNode;
    t.num_tasks = t.num_nodes;
    t.task_id = t.node_rank;
  } else {
    t.launch_mode = LaunchMode::kPerTask;
    t.num_tasks = processes_per_slice * num_slices;
    t.task_id = slice.id + slice_id * processes_per_slice;
    t.local_task = static_cast<int>(
        std::count(slice.process_hosts.begin(), slice.process_hosts.begin() + slice.id, my_host));
    t.local_tasks =
        static_cast<int>(std::count(slice.process_hosts.begin(), slice.process_hosts.end(), my_host));
  }
  // Other slices' hosts are not listed anywhere this host can see.
  if (num_slices == 1) t.hosts = hosts;
  // MEGASCALE_COORDINATOR_ADDRESS names the host of process 0 on GCE (queued resources) and GKE (JobSet).
  t.coordinator_host = address ? HostOf(*address) : hosts.front();
  t.coordinator_port = HashedCoordinatorPort("tpu:" + (address ? t.coordinator_host : Join(hosts, ",")));
  return t;
}

}  // namespace

Detector TpuDetector() { return {"tpu", Missing, Detect}; }

}  // namespace distrun
