#pragma once
// Node 0's own agent and the coordination service share a process: its liveness stream is a few function
// calls on the service, with no wire, no gRPC channel and no thread between them. It answers exactly as a
// stream over the agent channel or gRPC does (the same service calls, in the same order), so the agent
// cannot tell the difference; a local job's start and end no longer wait on gRPC (bench/RESULTS.md).

#include <functional>
#include <memory>
#include <optional>

#include "runtime/service/types.h"
#include "runtime/transport/grpc_client.h"

namespace distrun {

class CoordinationService;

class InProcessStream final : public AgentStream {
 public:
  // Attaches node `node_rank` at once and joins `first_join` (round 0) if given. `on_event` may run on any
  // thread that calls the service, while the service holds its lock: it must only queue. A refused attach
  // ends the stream before this returns (on_closed with the service's status).
  InProcessStream(CoordinationService& service, int node_rank, std::function<void(const JobEvent&)> on_event,
                  std::function<void(const Status&)> on_closed, const std::optional<NodeJoin>& first_join);
  ~InProcessStream() override;
  InProcessStream(const InProcessStream&) = delete;
  InProcessStream& operator=(const InProcessStream&) = delete;

  bool SendHeartbeat(const LinkNews& news) override;
  bool SendJoin(const NodeJoin& join) override;
  bool SendSuccess(int restart_round) override;
  bool SendProgress(const NodeProgress& progress, const LinkNews& news) override;
  bool SendStacks(const StacksReply& reply) override;
  bool SendStandbyApplied(uint64_t applied, bool needs_snapshot) override;
  void Close() override;

  Status ReportFailure(int restart_round, const FailedWorker& failure, bool* root_cause) override;

 private:
  struct Shared;
  bool Join(const NodeJoin& join);
  bool Attached() const;  // attached, and not closed since

  CoordinationService& service_;
  const int node_rank_;
  // What the service's callbacks reach: it outlives this stream while a join is still unanswered.
  std::shared_ptr<Shared> shared_;
  std::optional<uint64_t> stream_id_;  // set once, by the constructor: unset when the attach was refused
};

}  // namespace distrun
