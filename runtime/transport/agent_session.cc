#include "runtime/transport/agent_session.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <utility>

#include "runtime/transport/proto_convert.h"

namespace distrun {
namespace {

void SendEventTo(const std::weak_ptr<AgentSession::Link>& link, int wire, const JobEvent& event) {
  auto l = link.lock();
  if (!l) return;  // the connection is gone
  v1::CoordinatorFrame frame;
  frame.set_node_rank(wire);
  ToProto(event, frame.mutable_event());
  l->Send(frame);
}

void SendResultTo(const std::weak_ptr<AgentSession::Link>& link, uint64_t id, const Status& status) {
  auto l = link.lock();
  if (!l) return;
  v1::CoordinatorFrame frame;
  frame.mutable_result()->set_id(id);
  ToProto(status, frame.mutable_result()->mutable_status());
  l->Send(frame);
}

}  // namespace

AgentSession::AgentSession(CoordinationService& service, std::weak_ptr<Link> link,
                           std::optional<int> credential_node, std::shared_ptr<spdlog::logger> log)
    : service_(service),
      link_(std::move(link)),
      credential_node_(credential_node),
      log_(log ? std::move(log) : spdlog::default_logger()) {}

bool AgentSession::Handle(const v1::AgentFrame& message) {
  switch (message.frame_case()) {
    case v1::AgentFrame::kLiveness:
      return Liveness(message.liveness());
    case v1::AgentFrame::kCall:
      Call(message.call());
      return true;
    case v1::AgentFrame::kHello:
      if (auto l = link_.lock()) l->Refuse({StatusCode::kInvalidArgument, "a second hello"});
      return false;
    default:
      return true;  // a frame of a newer minor version: nothing to do with it
  }
}

std::vector<uint64_t> AgentSession::TakeStreams() {
  std::vector<WireNode> nodes;
  {
    std::lock_guard lock(mu_);
    nodes = std::exchange(nodes_, {});
  }
  std::vector<uint64_t> streams;
  for (const WireNode& n : nodes) streams.push_back(n.stream);
  return streams;
}

void AgentSession::SendEvent(int wire, const JobEvent& event) { SendEventTo(link_, wire, event); }

void AgentSession::SendResult(uint64_t id, const Status& status) { SendResultTo(link_, id, status); }

// As the Liveness stream's messages (grpc_server.cc): a node's first attaches it and is answered at once;
// later ones without news are heartbeats.
bool AgentSession::Liveness(const v1::AgentHeartbeat& message) {
  auto link = link_.lock();
  if (!link) return false;
  // `wire` is the node rank the messages say; an arrival says -1 throughout, and `node` is the one the
  // coordinator gave it.
  const int wire = message.node_rank();
  int node = wire;
  std::optional<uint64_t> id;
  {
    std::lock_guard lock(mu_);
    for (const WireNode& n : nodes_) {
      if (n.wire == wire) {
        id = n.stream;
        node = n.node;
      }
    }
  }
  if (!id) {
    if (credential_node_ && *credential_node_ != wire) {
      link->RefuseAgent("its munge credential was made for node " + std::to_string(*credential_node_) +
                        ", not node " + std::to_string(wire));
      return false;
    }
    if (wire < 0 && message.has_join() && (message.join().arriving() || message.join().claims_seat())) {
      Status s = service_.Admit(FromProto(message.join()), &node);
      if (!s.ok()) {
        log_->warn("{}", s.message);
        link->Refuse(s);
        return false;
      }
      log_->info("node {} ({}) {}", node, message.join().host(),
                 message.join().claims_seat() ? "was given its node rank" : "arrived and was admitted");
    }
    uint64_t attached = 0;
    Status s = service_.AttachAgent(
        node, [weak = link_, wire](const JobEvent& e) { SendEventTo(weak, wire, e); }, &attached);
    if (!s.ok()) {
      link->Refuse(s);
      return false;
    }
    {
      std::lock_guard lock(mu_);
      nodes_.push_back({wire, node, attached});
    }
    SendEvent(wire, JobEvent{});
  } else if (!message.has_join() && !message.has_success()) {
    service_.Heartbeat(*id, std::chrono::milliseconds(message.unanswered_ms()),
                       link->Retransmits() + message.retransmitted(),
                       std::chrono::microseconds(message.round_trip_us()));
  }
  if (message.has_join()) {
    NodeJoin join = FromProto(message.join());
    if (join.node_rank != wire) {
      link->Refuse(
          {StatusCode::kInvalidArgument,
           "node " + std::to_string(wire) + "'s channel joined as node " + std::to_string(join.node_rank)});
      return false;
    }
    join.node_rank = node;
    service_.Join(join, [weak = link_, wire](const Status& status, const NodeAssignment& assignment) {
      JobEvent answer;
      answer.kind = JobEvent::Kind::kJoined;
      answer.join_status = status;
      answer.assignment = assignment;
      SendEventTo(weak, wire, answer);
    });
  }
  if (message.has_success()) {
    Status s = service_.ReportSuccess(node, message.success().restart_round());
    if (!s.ok()) log_->debug("node {}'s success report: {}", node, s.message);
  }
  if (message.has_progress()) service_.ReportProgress(node, FromProto(message.progress()));
  if (message.has_stacks()) service_.ReportStacks(node, FromProto(message.stacks()));
  if (message.has_standby() && id) {  // never a stream's first message
    service_.StandbyApplied(*id, message.standby().applied(), message.standby().needs_snapshot());
  }
  return true;
}

void AgentSession::Call(const v1::AgentCall& call) {
  const uint64_t id = call.id();
  switch (call.request_case()) {
    case v1::AgentCall::kFailure: {
      bool root = false;
      const FailedWorker failure = FromProto(call.failure().failure());
      Status s = service_.ReportFailure(call.failure().restart_round(), failure, &root);
      // The reporting node prints the failure summary and every other node names it: here only for -v.
      if (root) log_->debug("job failure: {}", DescribeFailure(failure));
      v1::CoordinatorFrame frame;
      frame.mutable_result()->set_id(id);
      ToProto(s, frame.mutable_result()->mutable_status());
      frame.mutable_result()->mutable_failure()->set_root_cause(root);
      if (auto l = link_.lock()) l->Send(frame);
      return;
    }
    case v1::AgentCall::kBarrier: {
      const auto& b = call.barrier();
      service_.Barrier(b.name(), b.process_id(), b.count(), std::chrono::milliseconds(b.timeout_ms()),
                       [weak = link_, id](const Status& s) { SendResultTo(weak, id, s); });
      return;
    }
    default:
      SendResult(id, {StatusCode::kInvalidArgument, "a call this coordinator does not know"});
      return;
  }
}

}  // namespace distrun
