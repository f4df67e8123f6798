#include "runtime/membership.h"

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

Membership::Membership(int agents, ElasticRange range)
    : range_(range),
      live_(agents),
      lost_(static_cast<size_t>(agents), false),
      waiting_(static_cast<size_t>(agents), false),
      seats_(static_cast<size_t>(agents)) {
  if (range.min_nodes < 1 || range.max_nodes < range.min_nodes) {
    throw std::invalid_argument("the node range " + std::to_string(range.min_nodes) + ".." +
                                std::to_string(range.max_nodes) + " is empty");
  }
  if (agents < range.min_nodes || agents > range.max_nodes) {
    throw std::invalid_argument(std::to_string(agents) + " nodes were started, outside the node range " +
                                std::to_string(range.min_nodes) + ".." + std::to_string(range.max_nodes));
  }
  Seat();
}

void Membership::Seat() {
  if (range_.policy == ElasticPolicy::kResize) {
    by_seat_.clear();
    for (int a = 0; a < agents(); ++a) {
      seats_[static_cast<size_t>(a)].reset();
      if (lost(a) || waiting(a)) continue;
      seats_[static_cast<size_t>(a)] = static_cast<int>(by_seat_.size());
      by_seat_.push_back(a);
    }
    world_nodes_ = static_cast<int>(by_seat_.size());
    return;
  }
  // Spares: members keep their seats; an empty seat goes to the first live agent without one.
  by_seat_.resize(static_cast<size_t>(range_.min_nodes), -1);
  int next_spare = 0;
  for (int s = 0; s < range_.min_nodes; ++s) {
    int& holder = by_seat_[static_cast<size_t>(s)];
    if (holder >= 0 && !lost(holder)) continue;
    if (holder >= 0) seats_[static_cast<size_t>(holder)].reset();
    while (next_spare < agents() && (lost(next_spare) || seats_[static_cast<size_t>(next_spare)]))
      ++next_spare;
    holder = next_spare;  // live_ >= min_nodes, so one is there
    seats_[static_cast<size_t>(holder)] = s;
    waiting_[static_cast<size_t>(holder)] = false;
  }
  world_nodes_ = range_.min_nodes;
}

Membership::Loss Membership::Lose(int agent) {
  if (lost(agent)) return Loss::kAlreadyLost;
  lost_[static_cast<size_t>(agent)] = true;
  lost_order_.push_back(agent);
  --live_;
  waiting_[static_cast<size_t>(agent)] = false;
  const bool member = seats_[static_cast<size_t>(agent)].has_value();
  if (live_ < range_.min_nodes) {
    seats_[static_cast<size_t>(agent)].reset();
    return Loss::kTooFew;
  }
  if (!member) return Loss::kSpare;
  if (range_.policy == ElasticPolicy::kResize && range_.scale_up == ScaleUp::kNever) {
    // The first waiting arrival takes the lost member's place: the world keeps its size.
    for (int a = 0; a < agents(); ++a) {
      if (waiting(a)) {
        waiting_[static_cast<size_t>(a)] = false;
        break;
      }
    }
  }
  Seat();
  return Loss::kMemberLost;
}

std::optional<int> Membership::Admit() {
  if (live_ >= range_.max_nodes) return std::nullopt;
  const int agent = agents();
  lost_.push_back(false);
  waiting_.push_back(range_.policy == ElasticPolicy::kResize);
  seats_.emplace_back();
  ++live_;
  Seat();  // spares: one more; resize: it waits
  return agent;
}

int Membership::waiting_count() const {
  int n = 0;
  for (int a = 0; a < agents(); ++a) n += waiting(a) ? 1 : 0;
  return n;
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
