#pragma once
// The agent's side of the agent channel (runtime/distrun.proto, top): a TCP connection to the coordinator
// with this node's liveness messages and its calls, without gRPC. A reader thread connects (trying a
// refused or unresolvable address again, 2, 4, 8 ... up to 100 ms apart, until closed: the agent's
// initialization and heartbeat timeouts bound the wait), sends what was queued meanwhile, then reads.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "runtime/io/tcp_retransmits.h"
#include "runtime/service/types.h"
#include "runtime/transport/grpc_client.h"

namespace distrun {
namespace v1 {
class AgentFrame;  // runtime/distrun.proto
}  // namespace v1

struct AgentChannelOptions {
  // The coordinator, host:port or [v6]:port; or several, comma-separated, tried in that order on each
  // attempt (an arrival that knows node 0's address and the standbys'): the first that accepts is it.
  std::string address;
  std::string token;
  // A munge credential for each connection's hello (each can be used once), made for the coordinator's
  // port; null or empty: none.
  std::function<std::string(int port)> credential;
  int node_rank = 0;
  std::optional<NodeJoin> first_join;  // joins with the first message
  size_t max_message_bytes = 4 << 20;
  std::chrono::milliseconds call_timeout{30'000};
};

class AgentChannel final : public AgentStream {
 public:
  // `on_event` and then, exactly once, `on_closed` run on the channel's reader thread.
  AgentChannel(AgentChannelOptions options, std::function<void(const JobEvent&)> on_event,
               std::function<void(const Status&)> on_closed);
  ~AgentChannel() override;
  AgentChannel(const AgentChannel&) = delete;
  AgentChannel& operator=(const AgentChannel&) = delete;

  bool SendHeartbeat(const LinkNews& news) override;
  bool SendJoin(const NodeJoin& join) override;
  bool SendSuccess(int restart_round) override;
  bool SendProgress(const NodeProgress& progress, const LinkNews& news) override;
  bool SendStacks(const StacksReply& reply) override;
  bool SendStandbyApplied(uint64_t applied, bool needs_snapshot) override;
  void Close() override;
  // The address of options.address it connected to; empty before.
  std::string connected_address() const override;

  // Blocks until the coordinator answers, the channel ends or the call timeout.
  Status ReportFailure(int restart_round, const FailedWorker& failure, bool* root_cause) override;

 private:
  struct Call {
    bool done = false;
    Status status;
    bool root_cause = false;
  };

  void Run();
  // Tries each address in turn; sets connected_ and port_ to the one that accepted.
  int ConnectOnce(std::string* why);
  int ConnectTo(const std::string& address, std::string* why, int* port);
  bool WaitBeforeRetry(std::chrono::milliseconds delay);
  Status ReadFrames(int fd);
  // Frames a message: skippable ones (heartbeats) are dropped while a write is in progress or before the
  // connection exists; the others wait for either.
  bool Send(const std::string& frame, bool skippable);
  // A heartbeat: who speaks, how long it heard nothing, and the connection's retransmissions since the
  // previous one.
  v1::AgentFrame Beat(const LinkNews& news);
  void EndCalls(const Status& status);

  AgentChannelOptions options_;
  std::function<void(const JobEvent&)> on_event_;
  std::function<void(const Status&)> on_closed_;
  int wake_fd_ = -1;  // interrupts a connect or a wait before retrying

  std::mutex write_mu_;  // one writer at a time, and the connection is not closed under one
  mutable std::mutex mu_;
  std::string connected_;  // under mu_
  int port_ = 0;           // the reader thread's: the connected address's port
  std::condition_variable cv_;
  int fd_ = -1;                    // once connected
  RetransmitCounter retransmits_;  // under mu_: what heartbeats report of the connection
  std::string pending_;            // frames sent before the connection existed
  bool closing_ = false;
  bool ended_ = false;
  uint64_t next_call_ = 1;
  std::map<uint64_t, Call> calls_;

  std::once_flag joined_;
  std::thread reader_;
};

}  // namespace distrun
