#pragma once
// This node's side of the hang watch (DESIGN §4.2): turns what the workers wrote on the progress board
// (runtime/progress/progress_board.h) and what distrun sees of them (CPU time, output) into the node's
// progress, which the agent sends on the liveness stream. Fed by the supervisor's loop; no I/O of its own, so
// the rules (step intervals, rates, quiet time) are tested with made-up samples.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/progress/progress_board.h"
#include "runtime/service/types.h"

namespace distrun {

class ProgressTracker {
 public:
  using Clock = std::chrono::steady_clock;
  // Intervals a rank must show before the node reports a learned slowest interval, and how many are kept.
  static constexpr size_t kIntervalsToLearn = 3;
  static constexpr size_t kIntervalsKept = 20;
  static constexpr std::chrono::seconds kRateWindow{60};
  // Quiet for less than this is not reported (a worker between two lines of output).
  static constexpr std::chrono::seconds kQuietMinimum{10};
  // A section's median is over its most recent runs, at most this many and none older than the window: a
  // one-off stall is one run in many, and a section no longer run drops out.
  static constexpr size_t kSectionRunsKept = 32;
  static constexpr std::chrono::seconds kSectionWindow{120};

  // A look at the board later than this after the one before means nobody looked meanwhile (this process,
  // or the machine, was not running: SIGSTOP, a paused VM); the supervisor looks every 250 ms.
  static constexpr std::chrono::seconds kAwayAfter{1};

  explicit ProgressTracker(size_t slots) : slots_(slots) {}

  // The supervisor is about to sample the board. After a gap over kAwayAfter, the gap does not count as
  // time without progress or activity: every rank's times move forward by it (at most to now), and so do
  // those of reports written since the look before (before or during the gap: the board cannot tell), so a
  // rank that was frozen with everything else is not reported as stuck for that long.
  void Look(Clock::time_point now);

  void Started(size_t slot, int rank, pid_t pid, Clock::time_point now);
  void Exited(size_t slot);
  // The slot's board sample; `report_time` is its time_ns on steady_clock.
  void Sample(size_t slot, const ProgressSample& sample, Clock::time_point now);
  // The slot's sections as the board holds them (ProgressBoard::ReadSections): the runs since the last
  // look count, at `now`.
  void Sections(size_t slot, const std::vector<SectionSample>& sections, Clock::time_point now);
  // The worker's CPU ticks (its process group's), read every few seconds.
  void Cpu(size_t slot, uint64_t ticks, Clock::time_point now);
  void Output(size_t slot, Clock::time_point now);

  NodeProgress Progress(int epoch, Clock::time_point now) const;

 private:
  struct Slot {
    bool running = false;
    int rank = 0;
    pid_t pid = 0;
    uint64_t reports = 0;
    int64_t step = 0;
    int changes = 0;                               // of the step, after the first report
    std::optional<Clock::time_point> advanced_at;  // the step last changed (the report's own time)
    Clock::time_point reported_at;
    std::deque<int64_t> intervals_ms;                           // per step, the most recent last
    std::deque<std::pair<Clock::time_point, int64_t>> history;  // (time, step) over the rate window
    std::optional<uint64_t> cpu_ticks;
    Clock::time_point active_at;  // CPU time or output last moved
    struct SectionRuns {
      uint64_t runs = 0;                                         // the board's count at the last look
      std::deque<std::pair<Clock::time_point, int64_t>> recent;  // (seen at, duration ns), latest last
    };
    std::map<std::string, SectionRuns> sections;
  };
  std::vector<Slot> slots_;
  std::optional<Clock::time_point> looked_at_;
  // The gap the last look ended, and the look before it (Clock::duration::zero(): none).
  Clock::duration away_{};
  Clock::time_point away_since_;
};

}  // namespace distrun
