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
    : config_(std::move(config)),
      deadline_(start + config_.window),
      majority_deadline_(deadline_ + config_.window) {
  int size = 0;
  for (const std::vector<int>* group : {&config_.members, &config_.spares}) {
    for (int n : *group) {
      if (n < 0)
        throw std::invalid_argument("node " + std::to_string(n) + " of the last epoch is not a node");
      size = std::max(size, n + 1);
    }
  }
  role_.assign(static_cast<size_t>(size), Role::kNone);
  reached_.assign(role_.size(), 0);
  lost_.assign(role_.size(), 0);
  for (int n : config_.spares) role_[static_cast<size_t>(n)] = Role::kSpare;
  for (int n : config_.members) role_[static_cast<size_t>(n)] = Role::kMember;
  for (Role r : role_) spares_ += r == Role::kSpare;
  if (!IsMember(config_.lost_coordinator)) {
    throw std::invalid_argument("the lost coordinator (node " + std::to_string(config_.lost_coordinator) +
                                ") is not a member of the last epoch");
  }
  if (!IsMember(config_.standby) || config_.standby == config_.lost_coordinator) {
    throw std::invalid_argument("the standby (node " + std::to_string(config_.standby) +
                                ") must be a member of the last epoch other than the lost coordinator");
  }
  for (Role r : role_) voting_members_ += r == Role::kMember;
  --voting_members_;  // the lost coordinator never votes
  Reached(config_.standby);
}

Takeover::Role Takeover::RoleOf(int node) const {
  return node >= 0 && static_cast<size_t>(node) < role_.size() ? role_[static_cast<size_t>(node)]
                                                               : Role::kNone;
}

bool Takeover::IsReached(int node) const {
  return RoleOf(node) != Role::kNone && reached_[static_cast<size_t>(node)];
}

bool Takeover::IsLost(int node) const {
  return RoleOf(node) != Role::kNone && lost_[static_cast<size_t>(node)];
}

bool Takeover::Reached(int node) {
  const Role role = RoleOf(node);
  if (node == config_.lost_coordinator || role == Role::kNone || IsLost(node)) return false;
  if (!std::exchange(reached_[static_cast<size_t>(node)], 1)) {
    ++(role == Role::kMember ? reached_members_ : reached_spares_);
  }
  return true;
}

void Takeover::Lost(int node) {
  const Role role = RoleOf(node);
  if (node == config_.standby || node == config_.lost_coordinator || role == Role::kNone || IsLost(node))
    return;
  lost_[static_cast<size_t>(node)] = 1;
  ++(role == Role::kMember ? lost_members_ : lost_spares_);
  if (std::exchange(reached_[static_cast<size_t>(node)], 0)) {
    --(role == Role::kMember ? reached_members_ : reached_spares_);
  }
}

int Takeover::votes() const { return reached_members_; }

TakeoverDecision Takeover::Decide(std::chrono::steady_clock::time_point now) const {
  const int members = static_cast<int>(config_.members.size());
  const int votes = reached_members_;
  // Alive as far as the standby knows, and not heard yet.
  const int pending = voting_members_ - reached_members_ - lost_members_;
  const int pending_spares = spares_ - reached_spares_ - lost_spares_;
  const std::string majority = "a majority is " + std::to_string(members / 2 + 1);
  if (!IsMajority(votes + pending, members)) {
    return End("only " + std::to_string(votes + pending) + " of the last epoch's " + std::to_string(members) +
               " nodes are left to reach the standby (" + majority + ")");
  }
  if ((pending > 0 || pending_spares > 0) && now < deadline_) return {};
  if (!IsMajority(votes, members)) {
    // Some member may come yet (else no majority would be left): it may still hear the old coordinator,
    // whose bad link reaches each node at its own time.
    if (now < majority_deadline_) return {};
    return End("only " + std::to_string(votes) + " of the last epoch's " + std::to_string(members) +
               " nodes reached the standby within twice the heartbeat timeout (" + majority + ")");
  }

  TakeoverDecision d;
  std::vector<int> free_spares;
  for (int n : config_.spares) {
    if (IsReached(n)) free_spares.push_back(n);
  }
  size_t next_spare = 0;
  for (int n : config_.members) {
    if (n != config_.lost_coordinator && IsReached(n)) {
      d.world.push_back(n);
    } else if (config_.policy == ElasticPolicy::kSpares && next_spare < free_spares.size()) {
      d.world.push_back(free_spares[next_spare++]);  // the seat keeps its place in the world
    }
  }
  d.spares.assign(free_spares.begin() + static_cast<ptrdiff_t>(next_spare), free_spares.end());
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
      if (n != config_.lost_coordinator && !IsReached(n)) others.push_back(n);
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
