#pragma once
// --cpu-bind (DESIGN §3.2): the CPUs each worker is pinned to, from the PCI sysfs entries of its GPUs
// intersected with the CPUs distrun itself may use (the mask a spawned child applies:
// launcher/process/cpu_set.h).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "detect/devices.h"
#include "detect/environment.h"
#include "launcher/config/options.h"
#include "launcher/process/cpu_set.h"

namespace distrun {

// The CPUs this process may run on, as sched_getaffinity reports them: Cpus_allowed_list in
// /proc/self/status (the affinity mask, which taskset and Slurm's cpuset cgroup narrow) within
// /sys/devices/system/cpu/online, both under env.root. nullopt when the status file cannot be read.
std::optional<std::vector<int>> AllowedCpus(const Environment& env);

// The CPUs near the GPU on PCI bus `pci_bus_id` ("0000:3b:00.0"): gpu mode reads
// /sys/bus/pci/devices/<id>/local_cpulist; numa mode the cpulist of the device's NUMA node. `problem`
// says why `cpus` is empty.
struct GpuCpus {
  std::vector<int> cpus;
  std::string problem;
};
GpuCpus CpusNearGpu(const Environment& env, CpuBind mode, const std::string& pci_bus_id);

// Per local worker, the devices it uses (tokens resolved to GPUs) → the CPUs to pin it to: the union of
// its GPUs' CPUs within AllowedCpus. A worker whose GPUs cannot all be placed is not pinned (an empty
// list) and a warning says why; when its GPUs' CPUs lie wholly outside the allowed set it is pinned to
// the allowed set, with a warning. `local_ranks` name the workers in warnings.
struct CpuBinding {
  std::vector<std::vector<int>> worker_cpus;
  std::vector<std::string> warnings;
};
CpuBinding ComputeCpuBinding(const Environment& env, CpuBind mode,
                             const std::vector<std::vector<ResolvedDevice>>& worker_devices,
                             const std::vector<int>& local_ranks);

// "gpu", "numa" or "none".
const char* CpuBindName(CpuBind mode);

}  // namespace distrun
