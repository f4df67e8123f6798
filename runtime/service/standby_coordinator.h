#pragma once
// The standby between the loss of the coordinator and its decision (DESIGN §4.5): it counts the agents of
// the last epoch that turn to it, asks takeover.h's rules on every Tick, and, when they say so, rebuilds
// the coordination service from its copy of the job (service_snapshot.h) and takes over, or ends the job
// with one message naming the lost nodes. The agents it hears are agents; the rules count nodes (several
// agents of a per-task job are one node). Pure: the transport brings the agents and the clock.

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "runtime/service/service.h"
#include "runtime/service/takeover.h"

namespace distrun {

class StandbyCoordinator {
 public:
  using Clock = std::chrono::steady_clock;

  // `config`: the service this node would host (its job's settings; num_nodes, run_id and the elastic
  // range as the coordinator had them), `copy`: what the coordinator wrote through, `standby_agent`: this
  // node's agent, the epoch's standby. The window for the agents to turn to it is the heartbeat timeout,
  // from `start`. Throws std::invalid_argument when the copy does not fit (another job, or this agent is
  // not the standby a member of it could be).
  StandbyCoordinator(ServiceConfig config, ServiceSnapshot copy, int standby_agent, Clock::time_point start);

  // An agent of the job turned to the standby (its liveness stream reached it). False for an agent that
  // cannot vote or take a seat (unknown, the lost coordinator's, lost meanwhile) or after the decision.
  bool Reached(int agent);
  // An agent that had reached it was lost again before the decision.
  void Lost(int agent);

  enum class Outcome { kWaiting, kTookOver, kEnded };
  // Asks the rules; once decided, the outcome stays.
  Outcome Tick(Clock::time_point now);

  // kTookOver: the service of the next epoch, the old coordinator and the nodes that did not reach the
  // standby fenced. Once.
  std::unique_ptr<CoordinationService> TakeService();
  // kEnded: why the job ends, naming the lost nodes ("node 0 (host-a), which hosted the job's
  // coordinator, was lost; ... ; lost: node 0 (host-a), node 2 (host-c)").
  const std::string& end_message() const { return end_message_; }
  const TakeoverDecision& decision() const { return decision_; }

 private:
  std::string NameOf(int node) const;  // "node 2 (host-c)", by a node's first agent

  ServiceConfig config_;
  ServiceSnapshot copy_;
  Membership membership_;
  int standby_agent_ = 0;
  Takeover takeover_;
  Outcome outcome_ = Outcome::kWaiting;
  TakeoverDecision decision_;
  std::unique_ptr<CoordinationService> service_;
  std::string end_message_;
};

}  // namespace distrun
