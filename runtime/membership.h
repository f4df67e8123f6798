#pragma once
// Elastic membership (DESIGN §4.1): the job is a sequence of epochs, and the coordinator alone decides who
// takes part in each. The agents the launcher started are numbered by their launch node rank (their
// "agent" index, fixed for the job's life); an epoch gives each live agent a seat: a node rank in that
// epoch's world, or none (a hot spare, which holds no workers).
//
//   resize  every live agent is in the world, in launch order; never fewer than min_nodes.
//   spares  the world has min_nodes seats; the first min_nodes agents take them, the rest wait as spares,
//           and a lost member's seat (its node rank) goes to the first spare, so the others keep theirs.
//
// A lost agent is lost for good: its requests are refused (fenced), whatever it says when it comes back.
// An agent that arrives after the start (a repaired or replacement node) is admitted with the next agent
// index while fewer than max_nodes live. Under spares it is one more spare. Under resize it waits, holding
// no seat, until the scale-up policy seats it: `never` only in a lost member's place (the world never
// grows), `next-restart` at the next epoch whatever begins it, `now` likewise, and the caller begins that
// epoch soon after the arrival.
// Pure bookkeeping; no clock, no I/O: CoordinationService drives it.

#include <optional>
#include <string>
#include <vector>

namespace distrun {

enum class ElasticPolicy { kResize, kSpares };
enum class ScaleUp { kNever, kNextRestart, kNow };

const char* ElasticPolicyName(ElasticPolicy policy);
const char* ScaleUpName(ScaleUp scale_up);

struct ElasticRange {
  int min_nodes = 1;
  int max_nodes = 1;
  ElasticPolicy policy = ElasticPolicy::kResize;
  ScaleUp scale_up = ScaleUp::kNextRestart;  // resize only: when an arrival joins the world
};

class Membership {
 public:
  // `agents` were started (every one of them joins the first epoch). Throws std::invalid_argument for a
  // range that `agents` do not fit.
  Membership(int agents, ElasticRange range);

  const ElasticRange& range() const { return range_; }
  int agents() const { return static_cast<int>(lost_.size()); }
  int epoch() const { return epoch_; }
  int live() const { return live_; }
  bool lost(int agent) const { return lost_[static_cast<size_t>(agent)]; }
  // Agents lost so far, in the order they were lost.
  const std::vector<int>& lost_agents() const { return lost_order_; }

  // The seat `agent` holds in the current epoch: its node rank, or nullopt for a spare or a lost agent.
  std::optional<int> seat(int agent) const { return seats_[static_cast<size_t>(agent)]; }
  // Node ranks of the current epoch's world, 0..world_nodes()-1.
  int world_nodes() const { return world_nodes_; }
  // The agent in seat `node_rank`.
  int agent_in_seat(int node_rank) const { return by_seat_[static_cast<size_t>(node_rank)]; }

  enum class Loss {
    kAlreadyLost,  // nothing changes
    kSpare,        // a spare was lost: the world goes on as it is
    kMemberLost,   // a member was lost: its seat is given again (resize: the world shrinks); the caller
                   // starts the next epoch (NextEpoch) unless the current one has not begun yet
    kTooFew,       // fewer than min_nodes live agents are left: the job cannot go on
  };
  // Records that `agent` is gone (its stream broke, its heartbeats stopped, its node check failed).
  Loss Lose(int agent);

  // Admits an agent that arrived after the start: its agent index, or nullopt when max_nodes agents live.
  std::optional<int> Admit();
  // Arrived under resize and not seated yet (see the top of this file).
  bool waiting(int agent) const { return waiting_[static_cast<size_t>(agent)]; }
  int waiting_count() const;

  // Starts the next epoch (after a loss, a restart after a failure, or an arrival). Under resize with
  // scale-up next-restart or now, the waiting arrivals take seats in it; otherwise the seats stay.
  void NextEpoch();
  // Seats the waiting arrivals now, as NextEpoch would (for an epoch still forming); false if none.
  bool SeatArrivals();

 private:
  void Seat();

  ElasticRange range_;
  int epoch_ = 0;
  int live_ = 0;
  std::vector<bool> lost_;
  std::vector<bool> waiting_;
  std::vector<int> lost_order_;
  std::vector<std::optional<int>> seats_;  // by agent
  std::vector<int> by_seat_;               // agent of each seat
  int world_nodes_ = 0;
};

}  // namespace distrun
