#include "runtime/service/standby_coordinator.h"

#include <stdexcept>
#include <utility>
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

StandbyCoordinator::StandbyCoordinator(ServiceConfig config, ServiceSnapshot copy, int standby_agent,
                                       Clock::time_point start)
    : config_(std::move(config)),
      copy_(std::move(copy)),
      membership_(Membership::FromState(copy_.membership)),
      standby_agent_(standby_agent),
      takeover_(RulesFor(membership_, copy_, standby_agent, config_.heartbeat_timeout), start) {}

std::string StandbyCoordinator::NameOf(int node) const {
  const int agent = membership_.agents_of(node).front();
  const std::string host =
      static_cast<size_t>(agent) < copy_.hosts.size() ? copy_.hosts[static_cast<size_t>(agent)] : "";
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
  std::vector<std::string> lost;
  for (int node : decision_.fenced) lost.push_back(NameOf(node));
  if (decision_.verdict == TakeoverDecision::Verdict::kTakeOver) {
    ServiceConfig c = config_;
    c.resume = copy_;
    c.host_agent = standby_agent_;
    service_ = std::make_unique<CoordinationService>(c);
    const Status s = service_->TakeOver(decision_);
    if (s.ok()) {
      outcome_ = Outcome::kTookOver;
      return outcome_;
    }
    // The service itself refused to go on (fewer than MIN left): the same end, in its words.
    end_message_ = s.message;
    outcome_ = Outcome::kEnded;
    return outcome_;
  }
  end_message_ = NameOf(takeover_.config().lost_coordinator) +
                 ", which hosted the job's coordinator, was lost, and its standby " +
                 NameOf(takeover_.config().standby) + " cannot go on: " + decision_.why +
                 "; lost: " + JoinNames(lost);
  outcome_ = Outcome::kEnded;
  return outcome_;
}

std::unique_ptr<CoordinationService> StandbyCoordinator::TakeService() {
  return outcome_ == Outcome::kTookOver ? std::move(service_) : nullptr;
}

}  // namespace distrun
