#include "runtime/service/standby_coordinator.h"

#include <stdexcept>
#include <vector>

#include "runtime/service/message_text.h"

namespace distrun {
namespace {

// takeover.h's view of the last epoch: its seated nodes vote, its other live nodes may take seats.
TakeoverConfig RulesFor(const Membership& m, const ServiceSnapshot& copy, int standby_agent,
                        std::chrono::milliseconds window) {
  if (copy.host_agent < 0 || copy.host_agent >= m.agents() || standby_agent < 0 ||
      standby_agent >= m.agents()) {
    throw std::invalid_argument("the standby's copy of the job does not know agent " +
                                std::to_string(standby_agent) + " or its coordinator's");
  }
  TakeoverConfig c;
  c.members = m.seated_nodes();
  c.spares = m.unseated_nodes();
  c.lost_coordinator = m.node_of(copy.host_agent);
  c.standby = m.node_of(standby_agent);
  c.min_nodes = m.range().min_nodes;
  c.policy = m.range().policy;
  c.window = window;
  return c;
}

}  // namespace

StandbyCoordinator::StandbyCoordinator(const ServiceSnapshot& copy, int standby_agent,
                                       std::chrono::milliseconds window, Clock::time_point start)
    : membership_(Membership::FromState(copy.membership)),
      hosts_(copy.hosts),
      takeover_(RulesFor(membership_, copy, standby_agent, window), start) {}

std::string StandbyCoordinator::NameOf(int node) const {
  const int agent = membership_.agents_of(node).front();
  const std::string host =
      static_cast<size_t>(agent) < hosts_.size() ? hosts_[static_cast<size_t>(agent)] : "";
  return "node " + std::to_string(agent) + (host.empty() ? "" : " (" + host + ")");
}

bool StandbyCoordinator::Reached(int agent) {
  if (outcome_ != Outcome::kWaiting || agent < 0 || agent >= membership_.agents() || membership_.lost(agent))
    return false;
  return takeover_.Reached(membership_.node_of(agent));
}

void StandbyCoordinator::Lost(int agent) {
  if (outcome_ != Outcome::kWaiting || agent < 0 || agent >= membership_.agents()) return;
  takeover_.Lost(membership_.node_of(agent));
}

StandbyCoordinator::Outcome StandbyCoordinator::Tick(Clock::time_point now) {
  if (outcome_ != Outcome::kWaiting) return outcome_;
  decision_ = takeover_.Decide(now);
  if (decision_.verdict == TakeoverDecision::Verdict::kWait) return outcome_;
  if (decision_.verdict == TakeoverDecision::Verdict::kTakeOver) {
    outcome_ = Outcome::kTakeOver;
    return outcome_;
  }
  std::vector<std::string> lost;
  for (int node : decision_.fenced) lost.push_back(NameOf(node));
  end_message_ = NameOf(takeover_.config().lost_coordinator) +
                 ", which hosted the job's coordinator, was lost, and its standby " +
                 NameOf(takeover_.config().standby) + " cannot go on: " + decision_.why +
                 "; lost: " + JoinNames(lost);
  outcome_ = Outcome::kEnd;
  return outcome_;
}

}  // namespace distrun
