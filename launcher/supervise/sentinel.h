#pragma once
// The sentinel: a small process forked by distrun that outlives a distrun killed with SIGKILL just long
// enough to kill what PR_SET_PDEATHSIG cannot reach. PDEATHSIG kills the workers, but a worker's own
// children, and those that left its process group with setsid(), are re-parented away from a dead distrun
// and would run on. The sentinel knows the job's processes by their environment: every process that
// started after distrun and whose initial environment holds all of a worker's identifying variables
// (run id, coordinator address, rank, ports) is killed. While distrun lives it only waits; distrun
// dismisses it before exiting, having torn the job down itself.

#include <sys/types.h>

#include <chrono>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/process/prompt_thread.h"
#include "launcher/process/unique_fd.h"

namespace distrun {

inline constexpr const char* kSentinelProgram = "distrun-sentinel";

class Sentinel {
 public:
  // Starts the sentinel: `program` (distrun-sentinel, FindSentinelProgram) when given and startable, else a
  // fork of distrun, which copies distrun's page tables and costs it copy-on-write faults afterwards.
  // Call while distrun is single-threaded, after blocking the signals distrun handles (the sentinel keeps
  // them blocked and so survives a Ctrl-C), and before any worker starts.
  // `fork_if_that_fails` false: a program that cannot be started is an error (std::runtime_error), for a
  // caller on a thread of its own, where forking is not safe.
  static Sentinel Start(const std::string& program = {}, bool fork_if_that_fails = true);

  Sentinel() = default;
  Sentinel(Sentinel&& other) noexcept;
  Sentinel& operator=(Sentinel&& other) noexcept;
  ~Sentinel();

  pid_t pid() const { return pid_; }
  // Processes whose environment holds every one of the NAME=value entries of one fingerprint belong to the
  // job.
  void AddFingerprints(const std::vector<std::vector<std::string>>& fingerprints);
  // A directory of distrun's own that the sentinel removes after it swept the job (distrun died without
  // dismissing it, so cannot remove it itself).
  void AddScratch(const std::string& dir);
  // From now on distrun pulses at least every `timeout` (0: stop watching). A sentinel that hears no pulse
  // for that long takes distrun for frozen: it kills the job's processes and distrun itself (a frozen node
  // of an elastic job fences itself; node 0 has gone on without it).
  void Watch(std::chrono::milliseconds timeout);
  void Pulse();
  // Every process of the job is gone, and distrun starts nothing more and removes its own directories: the
  // sentinel exits without killing anything (reaped by Dismiss or the destructor).
  void Release();
  // Release, then reap the sentinel.
  void Dismiss();
  bool released() const { return released_; }
  // distrun's waitpid(-1) reaped the sentinel (it died early).
  void SetReaped() { reaped_ = true; }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  bool released_ = false;
  UniqueFd to_sentinel_;
};

// distrun-sentinel (`program`, FindSentinelProgram) started on a thread of its own, so that its spawn (which
// waits for the program's exec) runs beside the caller's detection and planning rather than before the
// workers' start. Construct after blocking the signals distrun handles (the thread and the sentinel inherit
// the mask); standard descriptors are made sure of first, so that the sentinel's socket is never one of
// them. Shared by whoever must wait for it: a fork of this process (MPI's probe) calls Finish first, so that
// no fork copies a process whose other thread is inside a spawn or an allocator.
class SentinelStart {
 public:
  explicit SentinelStart(std::string program);
  ~SentinelStart();  // joins; a sentinel never taken is reaped (it sweeps nothing: no worker was named)
  SentinelStart(const SentinelStart&) = delete;
  SentinelStart& operator=(const SentinelStart&) = delete;

  // Waits until the thread has ended. Idempotent; from the thread that made this object.
  void Finish();
  // Finish, then the sentinel; throws std::runtime_error when the program could not be started. Once.
  Sentinel Take();

 private:
  PromptThread thread_;
  Sentinel sentinel_;
  std::exception_ptr error_;
};

// distrun-sentinel for the distrun program at `self`: beside it (a build tree) or in ../libexec/distrun (an
// installation); empty when neither is there.
std::string FindSentinelProgram(const std::string& self);

// The sentinel itself: closes every descriptor but stdio and `fd`, then reads fingerprints from `fd` until
// distrun dismisses it, or, when `fd` closes without that, kills every process started since `since` (clock
// ticks since boot) that matches one.
[[noreturn]] void RunSentinel(int fd, unsigned long long since);

// The variables of a worker's environment that identify it: the fingerprint the sentinel matches.
std::vector<std::string> FingerprintOf(const std::vector<std::pair<std::string, std::string>>& worker_env);

// Whether a NUL-separated environment block (/proc/PID/environ) holds every entry.
bool EnvironHasAll(std::string_view environ_block, const std::vector<std::string>& entries);

}  // namespace distrun
