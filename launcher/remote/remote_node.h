#pragma once
// A host's side of a job started over ssh (launcher/remote/ssh_launch.h). The launcher's ssh runs
// `distrun --remote-node`, which answers the check before the launch (channel.h's hello), takes the start
// message and becomes (exec) an ordinary distrun of the job with `--launcher-channel` first: that distrun
// watches the channel (LauncherWatch) and stops its workers when the launcher says so or is gone.

#include <spdlog/logger.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "detect/environment.h"
#include "launcher/process/unique_fd.h"

namespace distrun {

// The first argument of each: what the launcher's ssh runs, and what the host's distrun is then exec'd with.
inline constexpr const char* kRemoteNodeFlag = "--remote-node";
inline constexpr const char* kLauncherChannelFlag = "--launcher-channel";

// `distrun --remote-node`: says hello (with `version`, this distrun's), reads the start message from stdin
// and execs it in the launcher's working directory. Returns an exit code when it does not exec: 0 when the
// launcher called the launch off (another host failed its check) or went away, 1 on a malformed message, 127
// when the exec failed.
int RunRemoteNode(const Environment& env, const std::string& version);

// In a host's distrun started by RunRemoteNode: the channel on stdin, read on a thread of its own (make it
// with the supervised signals blocked). It turns `term` into SIGTERM for this process (the supervisor's own
// stop, with --grace-period), `kill` into a second signal (which kills at once), and the launcher's end
// (the channel closed, or no word for `silence_limit_s`: a cut link) into SIGTERM.
class LauncherWatch {
 public:
  // The channel (stdin), taken at once, before anything is spawned: stdin becomes /dev/null, so that no
  // worker (rank 0 inherits stdin) and no helper holds or reads the launcher's words.
  static UniqueFd TakeChannel();

  LauncherWatch(UniqueFd channel, double silence_limit_s, std::shared_ptr<spdlog::logger> log);
  ~LauncherWatch();
  LauncherWatch(const LauncherWatch&) = delete;
  LauncherWatch& operator=(const LauncherWatch&) = delete;

  // Whether it stopped the workers because the launcher was gone or silent (not at its word).
  bool launcher_lost() const { return launcher_lost_; }

 private:
  void Run();

  UniqueFd channel_;
  UniqueFd wake_;  // an eventfd: the destructor's stop
  double silence_limit_s_;
  std::shared_ptr<spdlog::logger> log_;
  std::atomic<bool> launcher_lost_ = false;
  std::thread thread_;
};

}  // namespace distrun
