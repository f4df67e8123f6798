#pragma once
// What the job keeps of each recovery (a generation begun after a lost node, a failed worker or an arrival):
// how it came about, how the world changed, and how long each phase took, for node 0's log line, `distrun
// status`, the metrics and the job's page. Nodes measure their own phases from the moment they heard of the
// change (NodeRecovery, sent with their progress); the service counts from its decision, so a node's phase
// lands one network delay late at most. Pure: the caller passes every time.

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/recovery/world_change.h"

namespace distrun {

// One node's phases of generation `generation`, in ms from its notice; -1: not (yet) reached.
struct NodeRecovery {
  int generation = -1;
  int64_t notified_ms = -1;    // every worker told
  int64_t ready_ms = -1;       // every worker torn down and waiting (the node joins then)
  int64_t world_ms = -1;       // the world handed out
  int64_t up_ms = -1;          // every worker's group formed
  int64_t first_step_ms = -1;  // every worker reported a step after it (the workers report progress)
  bool operator==(const NodeRecovery&) const = default;
};

// The job's phases, in ms from the decision (the loss or failure seen); -1: unknown.
struct RecoveryPhases {
  int64_t notified = -1;    // every node's workers told
  int64_t ready = -1;       // every node's workers ready
  int64_t agreed = -1;      // the world decided (the rendezvous complete)
  int64_t up = -1;          // every worker's group formed
  int64_t first_step = -1;  // every worker stepped
  bool operator==(const RecoveryPhases&) const = default;
};

struct RecoveryRecord {
  int generation = 0;
  bool in_place = false;   // --recovery in-process, else restart
  std::string cause;       // "node 2 (host-c) lost: its distrun disconnected", "rank 3 ... exit code 1"
  int64_t decided_ms = 0;  // since the service started
  WorldChange change;
  RecoveryPhases phases;
  bool complete = false;  // every node reported, or the wait for them ended
  bool operator==(const RecoveryRecord&) const = default;
};

// "generation 3 recovered in place in 0.412 s: node 2 (host-c) lost: ...; lost rank(s) 4-7, new processes
// at rank(s) 4-7, state from rank 0; decided → notified 2 ms → ready 35 ms → agreed 40 ms → group up 120 ms
// → first step 412 ms".
std::string DescribeRecovery(const RecoveryRecord& record);

class RecoveryLedger {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kKept = 64;  // records kept (the latest)

  explicit RecoveryLedger(Clock::time_point started) : started_(started) {}

  // The service begins generation `generation` after `cause`.
  void Began(int generation, bool in_place, std::string cause, Clock::time_point now);
  // Its world was agreed: how it changed, and the nodes (agents) whose reports complete it (none: it is
  // complete now).
  void Agreed(int generation, const WorldChange& change, std::set<int> nodes, Clock::time_point now);
  // A node's phases. Returns the record when this report completed it (the last node's, or the first step
  // every node saw).
  std::optional<RecoveryRecord> Reported(int node, const NodeRecovery& report);
  // Records agreed more than `wait` ago complete with what they have (workers that report no progress
  // have no first step; a node lost meanwhile never reports). Returns those it completed.
  std::vector<RecoveryRecord> Expire(Clock::time_point now, std::chrono::milliseconds wait);

  const std::deque<RecoveryRecord>& records() const { return records_; }
  uint64_t count(bool in_place) const { return in_place ? in_place_ : restarts_; }

 private:
  struct Pending {
    Clock::time_point agreed_at;
    std::set<int> nodes;
    std::map<int, NodeRecovery> reports;
  };
  RecoveryRecord* Find(int generation);
  void Merge(RecoveryRecord& record, const Pending& pending) const;
  bool Done(const Pending& pending) const;

  Clock::time_point started_;
  std::deque<RecoveryRecord> records_;
  std::map<int, Pending> pending_;  // by generation, until complete
  std::map<int, Clock::time_point> decided_;
  uint64_t in_place_ = 0;
  uint64_t restarts_ = 0;
};

}  // namespace distrun
