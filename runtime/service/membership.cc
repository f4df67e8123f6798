#include "runtime/service/membership.h"

#include <algorithm>
#include <stdexcept>

namespace distrun {

const char* ElasticPolicyName(ElasticPolicy policy) {
  return policy == ElasticPolicy::kSpares ? "spares" : "resize";
}

const char* ScaleUpName(ScaleUp scale_up) {
  switch (scale_up) {
    case ScaleUp::kNever:
      return "never";
    case ScaleUp::kNextRestart:
      return "next-restart";
    case ScaleUp::kNow:
      return "now";
  }
  return "?";
}

Membership::Membership(int agents, ElasticRange range, bool grouped_later) : range_(range) {
  if (range.min_nodes < 1 || range.max_nodes < range.min_nodes) {
    throw std::invalid_argument("the node range " + std::to_string(range.min_nodes) + ".." +
                                std::to_string(range.max_nodes) + " is empty");
  }
  if (!grouped_later) CheckFits(agents, "nodes were started");
  std::vector<int> own(static_cast<size_t>(agents));
  for (int a = 0; a < agents; ++a) own[static_cast<size_t>(a)] = a;
  node_of_ = own;
  members_.clear();
  for (int a = 0; a < agents; ++a) members_.push_back({a});
  lost_.assign(members_.size(), false);
  waiting_.assign(members_.size(), false);
  seats_.assign(static_cast<size_t>(agents), std::nullopt);
  live_ = live_agents_ = agents;
  Seat();
}

void Membership::CheckFits(int n, const char* what) const {
  if (n < range_.min_nodes || n > range_.max_nodes) {
    throw std::invalid_argument(std::to_string(n) + " " + what + ", outside the node range " +
                                std::to_string(range_.min_nodes) + ".." + std::to_string(range_.max_nodes));
  }
}

void Membership::SetGroups(const std::vector<int>& node_of) {
  if (node_of.size() != node_of_.size()) throw std::invalid_argument("one node per agent");
  int count = 0;
  for (int n : node_of) {
    if (n < 0 || n > count) throw std::invalid_argument("nodes are numbered in order of first appearance");
    count = std::max(count, n + 1);
  }
  CheckFits(count, "hosts were started");
  node_of_ = node_of;
  members_.assign(static_cast<size_t>(count), {});
  for (int a = 0; a < agents(); ++a) members_[Node(a)].push_back(a);
  lost_.assign(members_.size(), false);
  waiting_.assign(members_.size(), false);
  seated_.clear();
  live_ = count;
  Seat();
}

void Membership::Seat() {
  if (range_.policy == ElasticPolicy::kResize) {
    seated_.clear();
    for (int n = 0; n < nodes(); ++n) {
      if (!lost_[static_cast<size_t>(n)] && !waiting_[static_cast<size_t>(n)]) seated_.push_back(n);
    }
  } else {
    // Spares: members keep their seats; an empty seat goes to the first live node without one.
    seated_.resize(static_cast<size_t>(range_.min_nodes), -1);
    std::vector<bool> has_seat(members_.size(), false);
    for (int holder : seated_) {
      if (holder >= 0 && !lost_[static_cast<size_t>(holder)]) has_seat[static_cast<size_t>(holder)] = true;
    }
    int next_spare = 0;
    for (int& holder : seated_) {
      if (holder >= 0 && !lost_[static_cast<size_t>(holder)]) continue;
      while (next_spare < nodes() &&
             (lost_[static_cast<size_t>(next_spare)] || has_seat[static_cast<size_t>(next_spare)]))
        ++next_spare;
      holder = next_spare;  // live_ >= min_nodes, so one is there
      has_seat[static_cast<size_t>(holder)] = true;
      waiting_[static_cast<size_t>(holder)] = false;
    }
  }
  PlaceAgents();
}

void Membership::PlaceAgents() {
  std::fill(seats_.begin(), seats_.end(), std::nullopt);
  by_seat_.clear();
  for (int n : seated_) {
    if (n < 0 || lost_[static_cast<size_t>(n)]) continue;  // a lost holder: the job ends (kTooFew)
    for (int a : members_[static_cast<size_t>(n)]) {
      seats_[static_cast<size_t>(a)] = static_cast<int>(by_seat_.size());
      by_seat_.push_back(a);
    }
  }
}

MembershipState Membership::State() const {
  return {range_, epoch_, node_of_, lost_, waiting_, seated_, lost_order_};
}

Membership Membership::FromState(const MembershipState& state) {
  auto refuse = [](const std::string& what) {
    throw std::invalid_argument("an inconsistent membership: " + what);
  };
  const ElasticRange& range = state.range;
  if (range.min_nodes < 1 || range.max_nodes < range.min_nodes) refuse("an empty node range");
  if (range.policy != ElasticPolicy::kResize && range.policy != ElasticPolicy::kSpares) refuse("a policy");
  if (range.scale_up != ScaleUp::kNever && range.scale_up != ScaleUp::kNextRestart &&
      range.scale_up != ScaleUp::kNow)
    refuse("a scale-up");
  if (state.epoch < 0) refuse("a negative epoch");
  Membership m;
  m.range_ = range;
  m.epoch_ = state.epoch;
  int nodes = 0;
  for (int n : state.node_of) {
    if (n < 0 || n > nodes) refuse("nodes are not numbered in order of first appearance");
    nodes = std::max(nodes, n + 1);
  }
  if (nodes == 0) refuse("no agents");
  if (state.lost.size() != static_cast<size_t>(nodes) || state.waiting.size() != static_cast<size_t>(nodes))
    refuse("lost or waiting flags for " + std::to_string(state.lost.size()) + " nodes, not " +
           std::to_string(nodes));
  m.node_of_ = state.node_of;
  m.members_.assign(static_cast<size_t>(nodes), {});
  for (int a = 0; a < m.agents(); ++a) m.members_[m.Node(a)].push_back(a);
  m.lost_ = state.lost;
  m.waiting_ = state.waiting;
  for (int n = 0; n < nodes; ++n) {
    if (m.lost_[static_cast<size_t>(n)]) continue;
    ++m.live_;
    m.live_agents_ += static_cast<int>(m.members_[static_cast<size_t>(n)].size());
  }
  if (m.live_ > range.max_nodes) refuse(std::to_string(m.live_) + " live nodes, above the range");
  std::vector<bool> seated(static_cast<size_t>(nodes), false);
  for (int n : state.seated) {
    if (n < -1 || n >= nodes)
      refuse("a seat held by node " + std::to_string(n) + " of " + std::to_string(nodes));
    if (n < 0) continue;
    if (seated[static_cast<size_t>(n)]) refuse("node " + std::to_string(n) + " holds two seats");
    seated[static_cast<size_t>(n)] = true;
  }
  if (range.policy == ElasticPolicy::kSpares && state.seated.size() != static_cast<size_t>(range.min_nodes))
    refuse(std::to_string(state.seated.size()) + " seats under spares, not " +
           std::to_string(range.min_nodes));
  std::vector<bool> counted(static_cast<size_t>(m.agents()), false);
  for (int a : state.lost_order) {
    if (a < 0 || a >= m.agents() || counted[static_cast<size_t>(a)] || !m.lost(a))
      refuse("agent " + std::to_string(a) + " in the order of losses");
    counted[static_cast<size_t>(a)] = true;
  }
  m.seated_ = state.seated;
  m.lost_order_ = state.lost_order;
  m.seats_.assign(static_cast<size_t>(m.agents()), std::nullopt);
  m.PlaceAgents();
  return m;
}

Membership::Loss Membership::Lose(int agent) {
  const size_t node = Node(agent);
  if (lost_[node]) return Loss::kAlreadyLost;
  lost_[node] = true;
  waiting_[node] = false;
  for (int a : members_[node]) lost_order_.push_back(a);
  --live_;
  live_agents_ -= static_cast<int>(members_[node].size());
  const bool member = seats_[static_cast<size_t>(agent)].has_value();
  if (live_ < range_.min_nodes) {
    for (int a : members_[node]) seats_[static_cast<size_t>(a)].reset();
    return Loss::kTooFew;
  }
  if (!member) return Loss::kSpare;
  if (range_.policy == ElasticPolicy::kResize && range_.scale_up == ScaleUp::kNever) {
    // The first waiting arrival takes the lost member's place: the world keeps its size.
    auto first = std::find(waiting_.begin(), waiting_.end(), true);
    if (first != waiting_.end()) *first = false;
  }
  Seat();
  return Loss::kMemberLost;
}

std::optional<int> Membership::Admit() {
  if (live_ >= range_.max_nodes) return std::nullopt;
  const int agent = agents();
  node_of_.push_back(nodes());
  members_.push_back({agent});
  lost_.push_back(false);
  waiting_.push_back(range_.policy == ElasticPolicy::kResize);
  seats_.emplace_back();
  ++live_;
  ++live_agents_;
  Seat();  // spares: one more; resize: it waits
  return agent;
}

std::vector<int> Membership::unseated_nodes() const {
  std::vector<int> out;
  for (int n = 0; n < nodes(); ++n) {
    if (!lost_[static_cast<size_t>(n)] && std::find(seated_.begin(), seated_.end(), n) == seated_.end())
      out.push_back(n);
  }
  return out;
}

int Membership::waiting_count() const {
  return static_cast<int>(std::count(waiting_.begin(), waiting_.end(), true));
}

void Membership::NextEpoch() {
  ++epoch_;
  SeatArrivals();
}

bool Membership::SeatArrivals() {
  if (range_.policy != ElasticPolicy::kResize || range_.scale_up == ScaleUp::kNever || waiting_count() == 0)
    return false;
  std::fill(waiting_.begin(), waiting_.end(), false);
  Seat();
  return true;
}

}  // namespace distrun
