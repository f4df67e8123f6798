#pragma once
// A worker's side of its node's worker channel (ARCHITECTURE.md, "Recovering in place"), for programs that
// are not Python (distrun.torch speaks the same bytes): connect to DISTRUN_RECOVERY_SOCKET and say hello,
// learn of changes, say ready and up, and take each world. No thread of its own: the caller waits in
// WaitWorld or WaitChange, or polls fd() and calls Poll.

#include <chrono>
#include <optional>
#include <string>

#include "runtime/recovery/worker_message.h"
#include "runtime/service/types.h"

namespace distrun {

class RecoveryClient {
 public:
  // Connects to `address` ("@name": abstract) and says hello. Throws std::runtime_error naming the address
  // and why.
  explicit RecoveryClient(const std::string& address);
  ~RecoveryClient();
  RecoveryClient(const RecoveryClient&) = delete;
  RecoveryClient& operator=(const RecoveryClient&) = delete;

  int fd() const { return fd_; }
  // Reads what distrun sent, without waiting. Not OK once the channel ended (distrun refused this worker,
  // or is gone).
  Status Poll();
  // Waits up to `timeout` (negative: no limit) for a world of `min_generation` or a later one.
  Status WaitWorld(int min_generation, std::chrono::milliseconds timeout, WorldMessage* world);
  // Waits up to `timeout` for a notice of a generation newer than `held`; *generation is the newest named.
  Status WaitChange(int held, std::chrono::milliseconds timeout, int* generation);
  Status Ready(int generation) { return Say(GenerationMessage("ready", generation)); }
  Status Up(int generation) { return Say(GenerationMessage("up", generation)); }

  // The newest generation a notice named (-1: none), and the newest world received.
  int changed() const { return changed_; }
  const std::optional<WorldMessage>& world() const { return world_; }

 private:
  Status Say(const WorkerMessage& message);
  // Reads until `done` holds, the deadline passes (DEADLINE_EXCEEDED) or the channel ends.
  template <typename Done>
  Status ReadUntil(Done done, std::chrono::milliseconds timeout);
  Status Take(const WorkerMessage& message);

  int fd_ = -1;
  FrameReader reader_;
  int changed_ = -1;
  std::optional<WorldMessage> world_;
  std::string ended_;  // why the channel ended
};

}  // namespace distrun
