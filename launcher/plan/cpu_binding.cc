#include "launcher/plan/cpu_binding.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>

#include "detect/parse.h"

namespace distrun {
namespace {

std::optional<std::string> ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<int> Intersect(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> out;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

std::vector<int> Unite(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> out;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

std::string SysfsDevice(const std::string& pci_bus_id) { return "/sys/bus/pci/devices/" + pci_bus_id; }

// The cpulist in `path` (under env.root); `problem` set when it is missing or unreadable.
GpuCpus ReadCpuListFile(const Environment& env, const std::string& path) {
  std::optional<std::string> text = ReadFile(env.Path(path));
  if (!text) return {{}, "cannot read " + path};
  std::optional<std::vector<int>> cpus = ParseCpuList(*text);
  if (!cpus) return {{}, path + " holds '" + std::string(Trim(*text)) + "', not a CPU list"};
  if (cpus->empty()) return {{}, path + " lists no CPU"};
  return {std::move(*cpus), {}};
}

}  // namespace

std::optional<std::vector<int>> AllowedCpus(const Environment& env) {
  std::optional<std::string> status = ReadFile(env.Path("/proc/self/status"));
  if (!status) return std::nullopt;
  std::optional<std::vector<int>> allowed;
  for (const std::string& line : Split(*status, '\n')) {
    if (line.starts_with("Cpus_allowed_list:")) allowed = ParseCpuList(line.substr(line.find(':') + 1));
  }
  if (!allowed) return std::nullopt;
  // sched_getaffinity leaves out offline CPUs, which the mask itself may still hold.
  if (std::optional<std::string> online = ReadFile(env.Path("/sys/devices/system/cpu/online"))) {
    if (std::optional<std::vector<int>> up = ParseCpuList(*online); up && !up->empty()) {
      allowed = Intersect(*allowed, *up);
    }
  }
  return allowed;
}

GpuCpus CpusNearGpu(const Environment& env, CpuBind mode, const std::string& pci_bus_id) {
  const std::string device = SysfsDevice(pci_bus_id);
  if (mode == CpuBind::kNuma) {
    std::optional<std::string> text = ReadFile(env.Path(device + "/numa_node"));
    if (!text) return {{}, "cannot read " + device + "/numa_node"};
    std::string_view value = Trim(*text);
    // -1: the kernel knows no NUMA node for the device (one-node machines, many VMs); its local CPUs
    // are then the closest there are.
    if (value != "-1") {
      std::optional<int> node = ParseCpuNumber(value);
      if (!node) return {{}, device + "/numa_node holds '" + std::string(value) + "', not a NUMA node"};
      return ReadCpuListFile(env, "/sys/devices/system/node/node" + std::to_string(*node) + "/cpulist");
    }
  }
  return ReadCpuListFile(env, device + "/local_cpulist");
}

CpuBinding ComputeCpuBinding(const Environment& env, CpuBind mode,
                             const std::vector<std::vector<ResolvedDevice>>& worker_devices,
                             const std::vector<int>& local_ranks) {
  CpuBinding out;
  out.worker_cpus.resize(worker_devices.size());
  if (mode == CpuBind::kNone) return out;
  const std::string option = std::string("--cpu-bind=") + CpuBindName(mode);
  const std::optional<std::vector<int>> allowed = AllowedCpus(env);
  for (size_t w = 0; w < worker_devices.size(); ++w) {
    const std::string worker = "local rank " + std::to_string(w < local_ranks.size() ? local_ranks[w] : 0);
    std::vector<int> near;
    std::string problem;
    std::string gpus;
    if (worker_devices[w].empty()) problem = "it has no GPU";
    for (const ResolvedDevice& d : worker_devices[w]) {
      if (!d.gpu) {
        problem = "device '" + d.token + "' " + (d.problem.empty() ? "is not known here" : d.problem);
      } else if (d.gpu->pci_bus_id.empty()) {
        problem = "the PCI bus id of device '" + d.token + "' is not known here";
      } else {
        GpuCpus c = CpusNearGpu(env, mode, d.gpu->pci_bus_id);
        if (!c.problem.empty()) problem = "GPU " + d.gpu->pci_bus_id + ": " + c.problem;
        near = Unite(near, c.cpus);
        gpus += (gpus.empty() ? "" : ", ") + d.gpu->pci_bus_id;
      }
      if (!problem.empty()) break;
    }
    if (!problem.empty()) {
      out.warnings.push_back(option + ": " + worker + " is not pinned: " + problem);
      continue;
    }
    if (allowed && !allowed->empty()) {
      std::vector<int> both = Intersect(near, *allowed);
      if (both.empty()) {
        out.warnings.push_back(option + ": the CPUs near GPU " + gpus + " (" + FormatCpuList(near) +
                               ") are all outside the CPUs distrun may use (" + FormatCpuList(*allowed) +
                               ", narrowed by taskset or a Slurm cgroup): " + worker +
                               " is pinned to those instead; ask the scheduler for CPUs near the GPUs");
        both = *allowed;
      }
      near = std::move(both);
    }
    out.worker_cpus[w] = std::move(near);
  }
  return out;
}

const char* CpuBindName(CpuBind mode) {
  switch (mode) {
    case CpuBind::kGpu:
      return "gpu";
    case CpuBind::kNuma:
      return "numa";
    case CpuBind::kNone:
      return "none";
  }
  return "none";
}

}  // namespace distrun
