#pragma once
// A set of CPUs as the kernel writes it for people (the cpulist format of /proc and /sys) and as it takes
// it from a process (the affinity bitmap). The plan computes each worker's set (launcher/plan/cpu_binding.h);
// spawning applies it.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace distrun {

// One CPU (or NUMA node) number of a cpulist; nullopt for anything else or an absurdly large number.
std::optional<int> ParseCpuNumber(std::string_view text);

// The kernel's cpulist format, "0-3,8,10-11" (blanks and a trailing newline allowed; "" is no CPU), as
// sorted, unique CPU numbers; nullopt for text that is not one.
std::optional<std::vector<int>> ParseCpuList(std::string_view text);
// Sorted CPUs back to "0-3,8,10-11".
std::string FormatCpuList(const std::vector<int>& cpus);

// The child's side. CpuMaskWords builds the kernel's affinity bitmap for `cpus` before fork (it
// allocates); ApplyCpuMask installs it on the calling process with one system call, so it is safe
// between fork and exec. It returns 0 or the errno of sched_setaffinity.
std::vector<unsigned long> CpuMaskWords(const std::vector<int>& cpus);
int ApplyCpuMask(const std::vector<unsigned long>& words);

}  // namespace distrun
