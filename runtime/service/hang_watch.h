#pragma once
// The hang watch (DESIGN §4.2): node 0's judgement of the job's progress. Every node sends the progress of
// its ranks (the step each reported last, and how long ago it changed); the job is hung when its least
// advanced rank has not moved for the hang timeout. The timeout is --hang-timeout, or learned: several
// times the slowest recent step interval any rank showed, never below a floor. Ranks that never reported
// are not watched, so a job without progress reports never trips it; for those jobs the watch can only
// say that every worker has been quiet (no CPU time, no output) for a long time: stalled, a warning.
//
// Pure logic on an injected clock: the service feeds it and acts on its verdicts.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/service/types.h"

namespace distrun {

struct HangWatchConfig {
  bool off = false;                      // --hang-timeout off: progress is shown, never judged
  std::chrono::milliseconds timeout{0};  // --hang-timeout; 0: learned
  // How stale node 0's view of a rank may be (the nodes read their boards every 250 ms and send news of
  // progress at a bounded rate): a rank is hung only once it has not moved for the timeout plus this, so
  // that an advance still on its way never looks like a hang.
  std::chrono::milliseconds staleness{0};
  // A running node reports at every heartbeat. One silent for longer than this (its heartbeat interval
  // plus the margin of a board read) is overdue: its distrun, or node 0's, was not running (SIGSTOP, a
  // paused VM, a starved process), so its last report aged through time nobody looked. Its ranks are left
  // out of the verdict until it reports again, neither convicted nor covering others; liveness judges a
  // silent node.
  // 0: every report counts however old.
  std::chrono::milliseconds overdue{0};
  // The learned timeout: factor × the slowest recent step interval, never below the floor; until every
  // reporting rank has shown a few intervals, the warm-up timeout.
  int factor = 5;
  std::chrono::milliseconds floor{60'000};
  std::chrono::milliseconds warmup{600'000};
  // Without progress reports: every worker of every node quiet this long is a stall (0: never said).
  std::chrono::milliseconds stall{300'000};
};

struct HangVerdict {
  std::chrono::milliseconds stuck_for{0};  // since the least advanced rank last moved
  std::chrono::milliseconds timeout{0};
  bool learned = false;  // the timeout was learned, not given
  int64_t step = 0;      // where the least advanced ranks are
  // The least advanced ranks (at `step`), longest stuck first, at most kNamedRanks; `behind` counts them all.
  std::vector<std::pair<int, RankProgress>> slowest;  // (node, rank's progress as of now)
  int behind = 0;
  int ranks = 0;  // that report progress
  int64_t median_step = 0;
};

class HangWatch {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr int kNamedRanks = 8;

  explicit HangWatch(HangWatchConfig config) : config_(config) {}

  // `progress` is the node's as of `now` (its ages count back from now).
  void Update(int node, const NodeProgress& progress, Clock::time_point now);
  void Forget(int node);  // lost, or no longer running workers
  void Reset();           // a new epoch: new workers, new steps

  // Armed once a rank reported: the timeout in force, and whether it was learned.
  std::optional<std::chrono::milliseconds> Timeout(bool* learned = nullptr) const;
  // Set when the least advanced rank of the nodes heard from lately has not moved for the timeout.
  std::optional<HangVerdict> Check(Clock::time_point now) const;
  // Without any progress report: how long every worker of every one of `nodes` has been quiet, when all
  // of them have reported being quiet for at least the stall time.
  std::optional<std::chrono::milliseconds> Stalled(const std::vector<int>& nodes,
                                                   Clock::time_point now) const;

  // Every reporting rank with its ages as of `now`, by rank.
  std::vector<std::pair<int, RankProgress>> Ranks(Clock::time_point now) const;  // (node, progress)
  // The node's last report, aged to `now` ("quiet 12 s" in status); nullopt if it never sent one.
  std::optional<NodeProgress> NodeAsOf(int node, Clock::time_point now) const;

 private:
  struct NodeReport {
    NodeProgress progress;
    Clock::time_point at;
  };
  // Every reporting rank with its ages as of `now`; `judged`: only those of nodes not overdue.
  std::vector<std::pair<int, RankProgress>> RanksAsOf(Clock::time_point now, bool judged) const;

  std::map<int, NodeReport> nodes_;
  HangWatchConfig config_;
};

// "hung: no progress for 62s (--hang-timeout 60s); least advanced: rank 3 (node 1 (b), pid 4242) at step 10
// (median 11)", or "...; every rank reported step 10 last" where steps tell no rank apart.
std::string DescribeHang(const HangVerdict& verdict, const std::vector<std::string>& node_names);

}  // namespace distrun
