#pragma once
// The standby between the loss of the coordinator and its decision (DESIGN §4.5): it counts the agents of
// the last epoch that turn to it, asks takeover.h's rules on every Tick, and says whether to take over
// (the decision the service's TakeOver carries out) or to end the job, with one message naming the lost
// nodes. The agents it hears are agents; the rules count nodes (several agents of a per-task job are one
// node). Pure: the service that a standby rebuilt from its copy owns it and brings the agents and the
// clock (service_standby.cc).

#include <chrono>
#include <string>

#include "runtime/service/membership.h"
#include "runtime/service/service_snapshot.h"
#include "runtime/service/takeover.h"

namespace distrun {

class StandbyCoordinator {
 public:
  using Clock = std::chrono::steady_clock;

  // `copy`: what the coordinator wrote through, `standby_agent`: this node's agent, the epoch's standby.
  // The agents have `window` (the heartbeat timeout) from `start` to turn to it. Throws
  // std::invalid_argument when the copy does not fit (this agent is not a standby a member of it could
  // be, or its membership is inconsistent).
  StandbyCoordinator(const ServiceSnapshot& copy, int standby_agent, std::chrono::milliseconds window,
                     Clock::time_point start);

  // An agent of the job turned to the standby (its liveness stream reached it). False for an agent that
  // cannot vote or take a seat (unknown, the lost coordinator's, lost meanwhile) or after the decision.
  bool Reached(int agent);
  // An agent that had reached it was lost again before the decision.
  void Lost(int agent);

  enum class Outcome { kWaiting, kTakeOver, kEnd };
  // Asks the rules; once decided, the outcome stays.
  Outcome Tick(Clock::time_point now);

  // kTakeOver: the next epoch's nodes and the fenced ones, for CoordinationService::TakeOver.
  const TakeoverDecision& decision() const { return decision_; }
  // kEnd: why the job ends, naming the lost nodes ("node 0 (host-a), which hosted the job's
  // coordinator, was lost, and its standby node 1 (host-b) cannot go on: ...; lost: node 0 (host-a),
  // node 2 (host-c)").
  const std::string& end_message() const { return end_message_; }

 private:
  std::string NameOf(int node) const;  // "node 2 (host-c)", by a node's first agent

  Membership membership_;
  std::vector<std::string> hosts_;  // by agent
  Takeover takeover_;
  Outcome outcome_ = Outcome::kWaiting;
  TakeoverDecision decision_;
  std::string end_message_;
};

}  // namespace distrun
