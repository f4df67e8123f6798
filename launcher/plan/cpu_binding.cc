#include "launcher/cpu_binding.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <fstream>
#include <iterator>
#include <sstream>

#include "detect/parse.h"

namespace distrun {
namespace {

// Beyond any machine Linux runs on (NR_CPUS is at most 8192); keeps a corrupt file from sizing a mask.
constexpr int kMaxCpu = 1 << 16;

std::optional<std::string> ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::optional<int> ParseCpu(std::string_view s) {
  int n = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || n < 0 || n > kMaxCpu)
    return std::nullopt;
  return n;
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

std::optional<std::vector<int>> ParseCpuList(std::string_view text) {
  std::vector<int> cpus;
  std::string_view all = Trim(text);
  if (all.empty()) return cpus;
  for (const std::string& field : Split(all, ',')) {
    std::string_view range = Trim(field);
    size_t dash = range.find('-');
    std::optional<int> lo = ParseCpu(range.substr(0, dash));
    std::optional<int> hi = dash == std::string_view::npos ? lo : ParseCpu(range.substr(dash + 1));
    if (!lo || !hi || *hi < *lo) return std::nullopt;
    for (int cpu = *lo; cpu <= *hi; ++cpu) cpus.push_back(cpu);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

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
      std::optional<int> node = ParseCpu(value);
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

std::vector<unsigned long> CpuMaskWords(const std::vector<int>& cpus) {
  constexpr int kBits = static_cast<int>(8 * sizeof(unsigned long));
  std::vector<unsigned long> words;
  for (int cpu : cpus) {
    if (cpu < 0) continue;
    size_t word = static_cast<size_t>(cpu / kBits);
    if (words.size() <= word) words.resize(word + 1, 0);
    words[word] |= 1UL << (cpu % kBits);
  }
  return words;
}

int ApplyCpuMask(const std::vector<unsigned long>& words) {
  // glibc's cpu_set_t is this array of unsigned long, which is also the kernel's layout.
  if (::sched_setaffinity(0, words.size() * sizeof(unsigned long),
                          reinterpret_cast<const cpu_set_t*>(words.data())) != 0) {
    return errno;
  }
  return 0;
}

}  // namespace distrun
