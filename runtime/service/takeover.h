#pragma once
// The standby coordinator's rules (DESIGN §4.5): when the node that hosts the coordinator is lost, the
// standby takes over only with a majority of the last epoch's members, so that two sides of a partition
// never both go on. The old coordinator is counted in that epoch (it is one of the members that did not
// reach the standby): a majority of the members, on whichever side, is never on both sides at once.
//
// The standby counts the members that turned to it within the window (the heartbeat timeout: a member
// that lost the coordinator turns to the standby as soon as its own timeout or stream break says so); a
// member lost meanwhile (a second loss) is lost for good. It decides at once when every member that can
// still reach it did, or when the window ends:
//   - a majority reached it, and enough of them to make MIN nodes (with the spares that reached it under
//     spares): it takes over. The next epoch is the members that reached it (resize), or the seated ones
//     with the first spares in the seats left empty (spares); everyone else is fenced, the old
//     coordinator first;
//   - no majority yet, but one is still possible: it waits one more window (a gray failure of the old
//     coordinator's link: the others lose it up to a heartbeat timeout apart), then decides as above;
//   - otherwise the job ends, naming the lost nodes.
// Pure bookkeeping in node ranks; no clock of its own, no I/O.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/service/membership.h"

namespace distrun {

struct TakeoverConfig {
  std::vector<int> members;  // the last epoch's seated nodes, in seat order, the lost coordinator included
  std::vector<int> spares;   // the last epoch's live spares (no vote), in the order they take seats
  int lost_coordinator = 0;  // the node that hosted the coordinator
  int standby = 1;           // the node deciding (a member)
  int min_nodes = 1;
  ElasticPolicy policy = ElasticPolicy::kResize;
  std::chrono::steady_clock::duration window{};  // from the start of the takeover
};

struct TakeoverDecision {
  enum class Verdict { kWait, kTakeOver, kEnd } verdict = Verdict::kWait;
  std::vector<int> world;   // kTakeOver: the next epoch's seated nodes, in seat order
  std::vector<int> spares;  // kTakeOver: those that stay spares
  std::vector<int> fenced;  // kTakeOver and kEnd: the lost nodes, the old coordinator first, then by rank
  std::string why;          // kEnd: what was missing, without names (the caller names the nodes)
};

// True when `votes` nodes are a majority of an epoch of `members` nodes.
bool IsMajority(int votes, int members);

// The standby of the epoch `m` is in: the first seated node, in seat order, on another host than the
// service's (a host lost with the coordinator's would take the standby with it), else the first other
// seated node, else the first live node without a seat. Its first agent, or nullopt when the epoch has
// no live node but the service's host's. `host_of(agent)` names an agent's host ("" if unknown: then it
// counts as another host).
std::optional<int> ChooseStandby(const Membership& m, int host_agent,
                                 const std::function<std::string(int)>& host_of);

class Takeover {
 public:
  // Throws std::invalid_argument when the standby or the lost coordinator is not a member.
  Takeover(TakeoverConfig config, std::chrono::steady_clock::time_point start);

  // `node` turned to the standby (a member votes; a spare is counted for a seat). Unknown nodes, the lost
  // coordinator and nodes already lost change nothing; false for those.
  bool Reached(int node);
  // `node` was lost during the takeover: it neither votes nor takes a seat, whatever it says later.
  void Lost(int node);

  TakeoverDecision Decide(std::chrono::steady_clock::time_point now) const;

  int votes() const;
  const TakeoverConfig& config() const { return config_; }

 private:
  enum class Role : uint8_t { kNone, kMember, kSpare };
  Role RoleOf(int node) const;
  bool IsMember(int node) const { return RoleOf(node) == Role::kMember; }
  bool IsReached(int node) const;
  bool IsLost(int node) const;
  // The lost nodes: the old coordinator, then whoever else did not reach the standby, by rank.
  std::vector<int> Fenced() const;
  TakeoverDecision End(std::string why) const;

  TakeoverConfig config_;
  std::chrono::steady_clock::time_point deadline_;           // for every member that may come
  std::chrono::steady_clock::time_point majority_deadline_;  // a window more, while no majority came
  // By node: what it was in the last epoch, and whether it reached the standby or was lost since. Counted
  // as they change, so that a vote and a Decide that waits cost O(1) (a job of 10,000 nodes votes 10,000
  // times and Decide runs on every Tick).
  std::vector<Role> role_;
  std::vector<uint8_t> reached_, lost_;
  int voting_members_ = 0;  // members but the lost coordinator
  int reached_members_ = 0, lost_members_ = 0;
  int spares_ = 0, reached_spares_ = 0, lost_spares_ = 0;
};

}  // namespace distrun
