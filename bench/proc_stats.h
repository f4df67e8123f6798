#pragma once
// What /proc says about a process (memory, CPU time), and the file-descriptor limit benchmarks raise.

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace distrun::bench {

struct MemoryStats {
  int64_t rss_kb = 0;   // VmRSS
  int64_t hwm_kb = 0;   // VmHWM: peak RSS
  int64_t anon_kb = 0;  // RssAnon: the process's own pages (heap, stacks)
  int64_t file_kb = 0;  // RssFile: mapped files, mostly shared libraries (shared with other processes)
  int64_t pss_kb = 0;   // Pss from smaps_rollup: shared pages divided among their users
  int threads = 0;
};

// Throws std::runtime_error when the process is gone.
MemoryStats ReadMemory(pid_t pid);

// utime + stime, seconds.
double ReadCpuSeconds(pid_t pid);

// Raises RLIMIT_NOFILE (soft, and hard where allowed) to at least `wanted`; returns the soft limit now.
uint64_t RaiseFdLimit(uint64_t wanted);

// This program's own path, for running its helper subcommands.
std::string SelfPath();

// Seconds on CLOCK_MONOTONIC (system-wide, so comparable across processes).
double MonotonicSeconds();
int64_t MonotonicNanos();

}  // namespace distrun::bench
