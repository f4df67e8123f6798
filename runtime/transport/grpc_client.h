#pragma once
// The client side of runtime/distrun.proto, for the agent (launcher) and the workers' client library.
// Blocking calls, each with a deadline; the job token goes with every call. gRPC types stay in
// grpc_client.cc.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/service/types.h"

namespace distrun {

struct GrpcClientConfig {
  std::string address;  // the coordinator, host:port
  std::string token;
  size_t max_message_bytes = 4 << 20;
  // Deadline of calls that do not wait on other processes; waits add their own timeout to it.
  std::chrono::milliseconds call_timeout{30'000};
  // The epoch of the worker that calls (DISTRUN_EPOCH), sent with every key-value and barrier call; -1: none
  // (a shell outside the job, an agent).
  int epoch = -1;
  // Calls wait for the channel to connect (a coordinator still starting), up to their deadline. false: a
  // refused connection fails the call at once, as a user's command outside the job wants.
  bool wait_for_ready = true;
  // Set: each call also carries what this returns, a fresh munge credential (client_identity.h), sent
  // when `token` is empty; an empty result sends none.
  std::function<std::string()> credential;
};

// One agent's liveness stream: heartbeats out, job events in. Events and the end of the stream are
// reported on the stream's own reader thread.
class LivenessStream {
 public:
  virtual ~LivenessStream() = default;
  // False once the stream has ended.
  virtual bool SendHeartbeat(const LinkNews& news) = 0;
  // Joins a round on the stream; the answer arrives as a kJoined event. Blocks until it is written (or the
  // stream ended: false).
  virtual bool SendJoin(const NodeJoin& join) = 0;
  // Every worker of this node exited 0 in `restart_round` (the ReportSuccess call's news, unanswered).
  virtual bool SendSuccess(int restart_round) = 0;
  // A heartbeat that carries this node's progress (skipped, as a heartbeat is, while a write is stuck).
  virtual bool SendProgress(const NodeProgress& progress, const LinkNews& news) = 0;
  // The answer to a kStacks event.
  virtual bool SendStacks(const StacksReply& reply) = 0;
  // The epoch's standby applied the coordinator's updates up to `applied` (CoordinationService::
  // StandbyApplied); `needs_snapshot`: it refused one and waits for the whole job.
  virtual bool SendStandbyApplied(uint64_t applied, bool needs_snapshot) = 0;
  // Ends the stream (and its thread) from this side; on_closed still runs once.
  virtual void Close() = 0;
};

// An agent's stream that also carries its failure reports: the agent channel, and node 0's stream in process.
class AgentStream : public LivenessStream {
 public:
  // As the ReportFailure call: blocks until the coordinator answers (or the stream ends, or a timeout).
  virtual Status ReportFailure(int restart_round, const FailedWorker& failure, bool* root_cause) = 0;
  // The coordinator's address this stream reached, where it was given several; empty: the one it was given.
  virtual std::string connected_address() const { return {}; }
};

class GrpcClient {
 public:
  // Does not block: the connection is made by the first call.
  explicit GrpcClient(GrpcClientConfig config);
  ~GrpcClient();
  GrpcClient(const GrpcClient&) = delete;
  GrpcClient& operator=(const GrpcClient&) = delete;

  const std::string& address() const;

  // Waits for rendezvous up to `timeout` (the service enforces its own initialization timeout too).
  Status Join(const NodeJoin& join, std::chrono::milliseconds timeout, NodeAssignment* assignment);
  Status ReportFailure(int restart_round, const FailedWorker& failure, bool* root_cause);
  Status ReportSuccess(int node_rank, int restart_round);

  Status KvSet(const std::string& key, const std::string& value);
  Status KvGet(const std::string& key, std::chrono::milliseconds timeout, std::string* value);
  Status KvTryGet(const std::string& key, std::optional<std::string>* value);
  Status KvAdd(const std::string& key, int64_t delta, int64_t* value);
  Status KvCompareAndSet(const std::string& key, const std::optional<std::string>& expected,
                         const std::string& desired, CasResult* result);
  Status KvDelete(const std::string& key, bool* deleted);
  Status KvList(const std::string& prefix, std::vector<std::pair<std::string, std::string>>* entries);
  Status Barrier(const std::string& name, int process_id, int count, std::chrono::milliseconds timeout);
  // `distrun stacks` and `distrun status` (runtime/service/service.h).
  Status Stacks(std::chrono::milliseconds timeout, StacksReply* reply);
  Status Describe(JobStatusView* status);

  // Opens node `node_rank`'s liveness stream (its first message says who it is, and joins round
  // `first_join->restart_round` when given). `on_event` and then, exactly once, `on_closed` run on the
  // stream's reader thread.
  std::unique_ptr<LivenessStream> OpenLiveness(int node_rank, std::function<void(const JobEvent&)> on_event,
                                               std::function<void(const Status&)> on_closed,
                                               const std::optional<NodeJoin>& first_join = std::nullopt);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace distrun
