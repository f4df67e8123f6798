#include "runtime/service/takeover.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace distrun {

bool IsMajority(int votes, int members) { return members > 0 && 2 * votes > members; }

std::optional<int> ChooseStandby(const Membership& m, int host_agent,
                                 const std::function<std::string(int)>& host_of) {
  const int host_node = m.node_of(host_agent);
  const std::string host = host_of(host_agent);
  std::optional<int> same_host;
  for (int node : m.seated_nodes()) {
    if (node < 0 || node == host_node || m.lost(m.agents_of(node).front())) continue;
    const int agent = m.agents_of(node).front();
    if (host.empty() || host_of(agent) != host) return agent;
    if (!same_host) same_host = agent;
  }
  if (same_host) return same_host;
  for (int node : m.unseated_nodes()) {
    if (node != host_node) return m.agents_of(node).front();
  }
  return std::nullopt;
}

Takeover::Takeover(TakeoverConfig config, std::chrono::steady_clock::time_point start)
    : config_(std::move(config)), deadline_(start + config_.window) {
  if (!IsMember(config_.lost_coordinator)) {
    throw std::invalid_argument("the lost coordinator (node " + std::to_string(config_.lost_coordinator) +
                                ") is not a member of the last epoch");
  }
  if (!IsMember(config_.standby) || config_.standby == config_.lost_coordinator) {
    throw std::invalid_argument("the standby (node " + std::to_string(config_.standby) +
                                ") must be a member of the last epoch other than the lost coordinator");
  }
  reached_.push_back(config_.standby);
}

bool Takeover::Has(const std::vector<int>& nodes, int node) const {
  return std::find(nodes.begin(), nodes.end(), node) != nodes.end();
}

bool Takeover::IsMember(int node) const { return Has(config_.members, node); }

bool Takeover::IsSpare(int node) const { return Has(config_.spares, node); }

bool Takeover::Reached(int node) {
  if (node == config_.lost_coordinator || Has(lost_, node) || (!IsMember(node) && !IsSpare(node)))
    return false;
  if (!Has(reached_, node)) reached_.push_back(node);
  return true;
}

void Takeover::Lost(int node) {
  if (node == config_.standby || Has(lost_, node)) return;
  lost_.push_back(node);
  std::erase(reached_, node);
}

int Takeover::votes() const {
  return static_cast<int>(
      std::count_if(reached_.begin(), reached_.end(), [this](int n) { return IsMember(n); }));
}

TakeoverDecision Takeover::Decide(std::chrono::steady_clock::time_point now) const {
  const int members = static_cast<int>(config_.members.size());
  const int votes = this->votes();
  int pending = 0;  // alive as far as the standby knows, and not heard yet
  for (int n : config_.members) {
    if (n != config_.lost_coordinator && !Has(reached_, n) && !Has(lost_, n)) ++pending;
  }
  int pending_spares = 0;
  for (int n : config_.spares) {
    if (!Has(reached_, n) && !Has(lost_, n)) ++pending_spares;
  }
  const std::string majority = "a majority is " + std::to_string(members / 2 + 1);
  if (!IsMajority(votes + pending, members)) {
    return End("only " + std::to_string(votes + pending) + " of the last epoch's " + std::to_string(members) +
               " nodes are left to reach the standby (" + majority + ")");
  }
  if ((pending > 0 || pending_spares > 0) && now < deadline_) return {};
  if (!IsMajority(votes, members)) {
    return End("only " + std::to_string(votes) + " of the last epoch's " + std::to_string(members) +
               " nodes reached the standby within the heartbeat timeout (" + majority + ")");
  }

  TakeoverDecision d;
  std::vector<int> free_spares;
  for (int n : config_.spares) {
    if (Has(reached_, n)) free_spares.push_back(n);
  }
  for (int n : config_.members) {
    if (n != config_.lost_coordinator && Has(reached_, n)) {
      d.world.push_back(n);
    } else if (config_.policy == ElasticPolicy::kSpares && !free_spares.empty()) {
      d.world.push_back(free_spares.front());  // the seat keeps its place in the world
      free_spares.erase(free_spares.begin());
    }
  }
  d.spares = free_spares;
  d.fenced = Fenced();
  if (static_cast<int>(d.world.size()) < config_.min_nodes) {
    return End(std::to_string(d.world.size()) + " node(s) left, fewer than the " +
               std::to_string(config_.min_nodes) + " the job needs (--nnodes)");
  }
  d.verdict = TakeoverDecision::Verdict::kTakeOver;
  return d;
}

std::vector<int> Takeover::Fenced() const {
  std::vector<int> others;
  for (const std::vector<int>* group : {&config_.members, &config_.spares}) {
    for (int n : *group) {
      if (n != config_.lost_coordinator && !Has(reached_, n)) others.push_back(n);
    }
  }
  std::sort(others.begin(), others.end());
  others.insert(others.begin(), config_.lost_coordinator);
  return others;
}

TakeoverDecision Takeover::End(std::string why) const {
  TakeoverDecision d;
  d.verdict = TakeoverDecision::Verdict::kEnd;
  d.why = std::move(why);
  d.fenced = Fenced();
  return d;
}

}  // namespace distrun
