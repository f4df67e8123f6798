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
  std::fill(seats_.begin(), seats_.end(), std::nullopt);
  by_seat_.clear();
  for (int n : seated_) {
    for (int a : members_[static_cast<size_t>(n)]) {
      seats_[static_cast<size_t>(a)] = static_cast<int>(by_seat_.size());
      by_seat_.push_back(a);
    }
  }
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
