#pragma once
// Elastic membership (DESIGN §4.1): the job is a sequence of epochs, and the coordinator alone decides who
// takes part in each. The agents the launcher started are numbered by their launch node rank (their
// "agent" index, fixed for the job's life). Agents form nodes: one agent is one node, except in per-task
// jobs (one distrun per task), where the agents on one host are one node (SetGroups). The range, the seats
// and the losses count nodes. An epoch gives each live node a seat, its node rank in that epoch's world,
// or none (a hot spare, which holds no workers); the agents of seated nodes get agent seats in that order,
// which place their workers' ranks.
//
//   resize  every live node is in the world, in launch order; never fewer than min_nodes.
//   spares  the world has min_nodes seats; the first min_nodes nodes take them, the rest wait as spares,
//           and a lost member's seat (its node rank) goes to the first spare, so the others keep theirs.
//
// A lost node is lost for good, with all of its agents: their requests are refused (fenced), whatever
// they say when they come back. An agent that arrives after the start (a repaired or replacement node) is
// admitted as a node of its own while fewer than max_nodes live. Under spares it is one more spare. Under
// resize it waits, holding no seat, until the scale-up policy seats it: `never` only in a lost member's
// place (the world never grows), `next-restart` at the next epoch whatever begins it, `now` likewise, and
// the caller begins that epoch soon after the arrival.
// Pure bookkeeping; no clock, no I/O: CoordinationService drives it.

#include <optional>
#include <string>
#include <vector>

namespace distrun {

// Their values are the wire's (runtime/distrun.proto, MembershipState).
enum class ElasticPolicy { kResize = 0, kSpares = 1 };
enum class ScaleUp { kNever = 0, kNextRestart = 1, kNow = 2 };

const char* ElasticPolicyName(ElasticPolicy policy);
const char* ScaleUpName(ScaleUp scale_up);

struct ElasticRange {
  int min_nodes = 1;
  int max_nodes = 1;
  ElasticPolicy policy = ElasticPolicy::kResize;
  ScaleUp scale_up = ScaleUp::kNextRestart;  // resize only: when an arrival joins the world

  bool operator==(const ElasticRange&) const = default;
};

// A membership as a standby coordinator holds it (DESIGN §4.5): what cannot be derived, in plain values
// that a message carries.
struct MembershipState {
  ElasticRange range;
  int epoch = 0;
  std::vector<int> node_of;     // by agent: its node, numbered in order of first appearance
  std::vector<bool> lost;       // by node
  std::vector<bool> waiting;    // by node
  std::vector<int> seated;      // the node in each node seat
  std::vector<int> lost_order;  // agents, in the order they were lost

  bool operator==(const MembershipState&) const = default;
};

class Membership {
 public:
  // `agents` were started (every one of them joins the first epoch), each a node of its own until
  // SetGroups says otherwise. Throws std::invalid_argument for a range that the nodes do not fit, unless
  // `grouped_later` (SetGroups checks then).
  Membership(int agents, ElasticRange range, bool grouped_later = false);

  // The membership `state` describes, as State() gave it. Throws std::invalid_argument when the state is
  // not one a membership can be in (nodes out of order or of range, a seat held twice or by a lost node,
  // counts that disagree), so that a corrupt replica is refused rather than obeyed.
  static Membership FromState(const MembershipState& state);
  MembershipState State() const;

  // Per-task jobs: `node_of[agent]` (0..N-1, in order of first appearance) says which agents share a
  // node. Only before any loss or arrival. Throws std::invalid_argument when N does not fit the range.
  void SetGroups(const std::vector<int>& node_of);

  const ElasticRange& range() const { return range_; }
  int agents() const { return static_cast<int>(node_of_.size()); }
  int epoch() const { return epoch_; }
  int live() const { return live_; }  // nodes
  int live_agents() const { return live_agents_; }
  bool lost(int agent) const { return lost_[Node(agent)]; }
  // Agents lost so far, in the order they were lost (a node's agents together).
  const std::vector<int>& lost_agents() const { return lost_order_; }

  // The agent seat `agent` holds in the current epoch (its place in rank order), or nullopt for a spare
  // or a lost agent.
  std::optional<int> seat(int agent) const { return seats_[static_cast<size_t>(agent)]; }
  // Agent seats of the current epoch's world, 0..world_agents()-1, and the agent in each.
  int world_agents() const { return static_cast<int>(by_seat_.size()); }
  int agent_in_seat(int seat) const { return by_seat_[static_cast<size_t>(seat)]; }
  // Nodes in the current epoch's world: agent seats hold them in order, so a node's rank counts the
  // changes of node_of along the seats.
  int world_nodes() const { return static_cast<int>(seated_.size()); }
  int node_of(int agent) const { return static_cast<int>(Node(agent)); }
  int nodes() const { return static_cast<int>(members_.size()); }
  // A node's agents, in launch order.
  const std::vector<int>& agents_of(int node) const { return members_[static_cast<size_t>(node)]; }
  // Live nodes that hold no seat now (spares, and arrivals waiting under resize), by node number.
  std::vector<int> unseated_nodes() const;
  // The current epoch's seated nodes, in seat order.
  const std::vector<int>& seated_nodes() const { return seated_; }

  enum class Loss {
    kAlreadyLost,  // nothing changes
    kSpare,        // a spare was lost: the world goes on as it is
    kMemberLost,   // a member was lost: its seat is given again (resize: the world shrinks); the caller
                   // starts the next epoch (NextEpoch) unless the current one has not begun yet
    kTooFew,       // fewer than min_nodes live nodes are left: the job cannot go on
  };
  // Records that `agent` is gone (its stream broke, its heartbeats stopped, its node check failed), and
  // with it every agent of its node.
  Loss Lose(int agent);

  // Admits an agent that arrived after the start, as a node of its own: its agent index, or nullopt when
  // max_nodes nodes live.
  std::optional<int> Admit();
  // Arrived under resize and not seated yet (see the top of this file).
  bool waiting(int agent) const { return waiting_[Node(agent)]; }
  int waiting_count() const;  // nodes

  // Starts the next epoch (after a loss, a restart after a failure, or an arrival). Under resize with
  // scale-up next-restart or now, the waiting arrivals take seats in it; otherwise the seats stay.
  void NextEpoch();
  // Seats the waiting arrivals now, as NextEpoch would (for an epoch still forming); false if none.
  bool SeatArrivals();

 private:
  Membership() = default;  // FromState
  size_t Node(int agent) const { return static_cast<size_t>(node_of_[static_cast<size_t>(agent)]); }
  void CheckFits(int nodes, const char* what) const;
  void Seat();
  // Gives the agents of the seated nodes their agent seats, in node seat order.
  void PlaceAgents();

  ElasticRange range_;
  int epoch_ = 0;
  int live_ = 0;  // nodes
  int live_agents_ = 0;
  std::vector<int> node_of_;               // by agent
  std::vector<std::vector<int>> members_;  // by node: its agents in launch order
  std::vector<bool> lost_;                 // by node
  std::vector<bool> waiting_;              // by node
  std::vector<int> seated_;                // node in each node seat (spares: -1 before the first Seat)
  std::vector<std::optional<int>> seats_;  // agent seat, by agent
  std::vector<int> by_seat_;               // agent in each agent seat
  std::vector<int> lost_order_;
};

}  // namespace distrun
