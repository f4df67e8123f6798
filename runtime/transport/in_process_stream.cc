#include "runtime/transport/in_process_stream.h"

#include <mutex>
#include <string>
#include <utility>

#include "runtime/service/service.h"

namespace distrun {

// The service answers a join later than it was asked (rendezvous waits for the other nodes), possibly after
// the agent closed this stream: events reach the agent only while the stream is open, and Close waits for
// one being delivered.
struct InProcessStream::Shared {
  std::mutex mu;
  bool closed = false;
  std::function<void(const JobEvent&)> on_event;
  std::function<void(const Status&)> on_closed;

  void Deliver(const JobEvent& event) {
    std::lock_guard lock(mu);
    if (!closed) on_event(event);
  }
  // True for the caller that closed it.
  bool MarkClosed() {
    std::lock_guard lock(mu);
    return !std::exchange(closed, true);
  }
  bool open() {
    std::lock_guard lock(mu);
    return !closed;
  }
};

InProcessStream::InProcessStream(CoordinationService& service, int node_rank,
                                 std::function<void(const JobEvent&)> on_event,
                                 std::function<void(const Status&)> on_closed,
                                 const std::optional<NodeJoin>& first_join)
    : service_(service), node_rank_(node_rank), shared_(std::make_shared<Shared>()) {
  shared_->on_event = std::move(on_event);
  shared_->on_closed = std::move(on_closed);
  uint64_t id = 0;
  Status s = service_.AttachAgent(
      node_rank_, [shared = shared_](const JobEvent& e) { shared->Deliver(e); }, &id);
  if (!s.ok()) {
    if (shared_->MarkClosed()) shared_->on_closed(s);
    return;
  }
  stream_id_.emplace(id);
  // As the other transports: the attach is answered at once, the agent's first sign of a live coordinator.
  shared_->Deliver(JobEvent{});
  if (first_join) Join(*first_join);
}

InProcessStream::~InProcessStream() { Close(); }

bool InProcessStream::Join(const NodeJoin& join) {
  if (join.node_rank != node_rank_) {
    // The other transports close the stream on a join for another node.
    if (shared_->MarkClosed()) {
      service_.DetachAgent(*stream_id_);
      shared_->on_closed({StatusCode::kInvalidArgument, "node " + std::to_string(node_rank_) +
                                                            "'s liveness stream joined as node " +
                                                            std::to_string(join.node_rank)});
    }
    return false;
  }
  service_.Join(join, [shared = shared_](const Status& status, const NodeAssignment& assignment) {
    JobEvent answer;
    answer.kind = JobEvent::Kind::kJoined;
    answer.join_status = status;
    answer.assignment = assignment;
    shared->Deliver(answer);
  });
  return true;
}

bool InProcessStream::Attached() const { return stream_id_ && shared_->open(); }

bool InProcessStream::SendHeartbeat(const LinkNews& news) {
  if (!Attached()) return false;
  service_.Heartbeat(*stream_id_, news.unanswered, 0, news.round_trip);
  return true;
}

bool InProcessStream::SendJoin(const NodeJoin& join) {
  if (!Attached()) return false;
  return Join(join);
}

bool InProcessStream::SendSuccess(int restart_round) {
  if (!Attached()) return false;
  // Unanswered, as on the wire; the service's refusal (a round already over) changes nothing for the node.
  (void)service_.ReportSuccess(node_rank_, restart_round);
  return true;
}

bool InProcessStream::SendProgress(const NodeProgress& progress, const LinkNews& news) {
  if (!Attached()) return false;
  service_.Heartbeat(*stream_id_, news.unanswered, 0, news.round_trip);
  service_.ReportProgress(node_rank_, progress);
  return true;
}

bool InProcessStream::SendStacks(const StacksReply& reply) {
  if (!Attached()) return false;
  service_.Heartbeat(*stream_id_);
  service_.ReportStacks(node_rank_, reply);
  return true;
}

bool InProcessStream::SendStandbyApplied(uint64_t applied, bool needs_snapshot) {
  if (!Attached()) return false;
  service_.Heartbeat(*stream_id_);
  service_.StandbyApplied(*stream_id_, applied, needs_snapshot);
  return true;
}

void InProcessStream::Close() {
  // Closed first, detached after: the service calls the sink under its own lock, so the stream's lock is
  // never held while calling the service.
  if (!shared_->MarkClosed()) return;
  if (stream_id_) service_.DetachAgent(*stream_id_);
  shared_->on_closed({StatusCode::kCancelled, "the agent closed its liveness stream"});
}

Status InProcessStream::ReportFailure(int restart_round, const FailedWorker& failure, bool* root_cause) {
  if (!shared_->open()) return {StatusCode::kUnavailable, "the liveness stream has ended"};
  return service_.ReportFailure(restart_round, failure, root_cause);
}

}  // namespace distrun
