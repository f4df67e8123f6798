#pragma once
// The sentinel: a small process forked by distrun that outlives a distrun killed with SIGKILL just long
// enough to kill what PR_SET_PDEATHSIG cannot reach. PDEATHSIG kills the workers, but a worker's own
// children, and those that left its process group with setsid(), are re-parented away from a dead distrun
// and would run on. The sentinel knows the job's processes by their environment: every process that
// started after distrun and whose initial environment holds all of a worker's identifying variables
// (run id, coordinator address, rank, ports) is killed. While distrun lives it only waits; distrun
// dismisses it before exiting, having torn the job down itself.

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "launcher/unique_fd.h"

namespace distrun {

class Sentinel {
 public:
  // Forks the sentinel. Call while distrun is single-threaded, after blocking the signals distrun handles
  // (the sentinel keeps them blocked and so survives a Ctrl-C), and before any worker starts.
  static Sentinel Start();

  Sentinel() = default;
  Sentinel(Sentinel&& other) noexcept;
  Sentinel& operator=(Sentinel&& other) noexcept;
  ~Sentinel();

  pid_t pid() const { return pid_; }
  // Processes whose environment holds every one of these NAME=value entries belong to the job.
  void AddFingerprint(const std::vector<std::string>& entries);
  // distrun cleaned up itself: the sentinel exits without killing anything; it is reaped here.
  void Dismiss();
  // distrun's waitpid(-1) reaped the sentinel (it died early).
  void SetReaped() { reaped_ = true; }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  UniqueFd to_sentinel_;
};

// The variables of a worker's environment that identify it: the fingerprint the sentinel matches.
std::vector<std::string> FingerprintOf(const std::vector<std::pair<std::string, std::string>>& worker_env);

// Whether a NUL-separated environment block (/proc/PID/environ) holds every entry.
bool EnvironHasAll(std::string_view environ_block, const std::vector<std::string>& entries);

}  // namespace distrun
