#pragma once
// One host of a job started over ssh, as the launcher holds it: its ssh (or, for this machine, its distrun)
// with the channel on stdin, its output cut into whole lines, and where it stands.

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "launcher/config/host_list.h"
#include "launcher/process/spawn.h"
#include "launcher/remote/channel.h"

namespace distrun {

class HostSession {
 public:
  using Clock = std::chrono::steady_clock;
  enum class State {
    kQueued,      // not started: beyond --ssh-concurrency for now
    kConnecting,  // started, no hello yet
    kChecked,     // said hello; waits for the start message
    kFailed,      // failed the check (outcome() says why)
    kRunning,     // started the job
    kEnded,       // its ssh (or distrun) has exited
  };

  HostSession(HostEntry entry, bool local) : entry_(std::move(entry)), local_(local) {}

  const HostEntry& entry() const { return entry_; }
  bool local() const { return local_; }
  State state() const { return state_; }
  const std::optional<Hello>& hello() const { return hello_; }
  const std::string& outcome() const { return outcome_; }
  Child& child() { return child_; }
  const Child& child() const { return child_; }
  Clock::time_point started() const { return started_; }

  // Spawns it and sends the working directory. A spawn that fails marks the host failed.
  void Start(const SpawnSpec& spec, const std::string& cwd);
  // Queues `text` for its stdin; sent as the pipe takes it (Flush). Dropped once the input is closed.
  void Send(const std::string& text);
  void Flush();
  bool WantsToWrite() { return !pending_.empty() && child_.stdin_pipe().valid(); }
  void CloseInput();

  // Reads what is there on stdout (is_stdout) or stderr; returns the whole lines read since, each with its
  // '\n'. At the end of the stream a last partial line is completed.
  std::vector<std::string> Read(bool is_stdout);
  bool OutputOpen() const;

  // Before the hello: a stdout line is the hello or a login script's chatter; stderr is kept for Fail's
  // reasons.
  void TakeLine(const std::string& line);
  void KeepSaid(const std::string& line);
  const std::string& said() const { return said_; }
  void Fail(std::string why);
  void MarkRunning() { state_ = State::kRunning; }

  // Its exit, once reaped: the code (or 128+signal, -1 when unknown) and whether the launcher had it killed.
  void Ended(int wait_status);
  int exit_code() const { return exit_code_; }
  // Its distrun exited by itself: not killed, and not ssh's own 255 (the connection or the host lost).
  bool EndedNormally() const { return child_.reaped() && !killed_ && exit_code_ >= 0 && exit_code_ != 255; }
  bool killed_by_signal() const { return killed_; }

 private:
  HostEntry entry_;
  bool local_;
  State state_ = State::kQueued;
  Child child_;
  Clock::time_point started_{};
  std::optional<Hello> hello_;
  std::string outcome_;
  std::string said_;     // stderr before the hello
  std::string pending_;  // for stdin
  std::string out_buffer_, err_buffer_;
  bool out_open_ = true, err_open_ = true;
  int exit_code_ = -1;
  bool killed_ = false;
};

}  // namespace distrun
