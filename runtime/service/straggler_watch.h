#pragma once
// Straggler detection: node 0's judgement of which ranks are slow. A synchronous job's step times are the
// same on every rank (each waits for the slowest at every collective), so a slow rank shows only in the time
// it spends in its own compute: the sections its workers mark (`with distrun.section("fwd")`). Each rank's
// distrun sends the median of its recent section times; per section, a rank's score is NVRx's relative
// score, the fastest rank's median ÷ its own (1.0: as fast as the fastest). A rank whose worst section
// scores below the threshold for `windows` evaluations in a row is a straggler (one event); it has
// recovered when it scores at or above the threshold for as many in a row (one event). A one-off stall moves
// a median little and lasts one window: never a straggler.
//
// Pure logic: the service feeds it each window's medians and logs its events.

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace distrun {

struct StragglerConfig {
  double threshold = 0.75;  // --straggler-threshold: below it a rank is slow
  int windows = 3;          // evaluations in a row that make a straggler, and that end one
};

// One rank's medians over its recent sections, as its distrun reported them.
struct RankSections {
  int rank = 0;
  std::string host;
  std::map<std::string, double> median_s;  // section name → median seconds of its recent runs
};

struct RankScore {
  double score = 1.0;           // the worst of its sections' scores
  std::string section;          // that section
  double median_s = 0;          // its median there
  double fastest_median_s = 0;  // the fastest rank's median there
  bool straggler = false;
};

struct StragglerEvent {
  enum class Kind { kStraggler, kRecovered };
  Kind kind = Kind::kStraggler;
  int rank = 0;
  std::string host;
  RankScore score;
};

// "rank 3 (node2) is a straggler: score 0.52 in section fwd (median 0.210 s; fastest rank 0.109 s)".
std::string DescribeStragglerEvent(const StragglerEvent& event);

class StragglerWatch {
 public:
  explicit StragglerWatch(StragglerConfig config = {}) : config_(config) {}

  // One window: every reporting rank's medians (ranks without sections are left out). Returns what changed.
  std::vector<StragglerEvent> Evaluate(const std::vector<RankSections>& ranks);

  // The latest scores, by rank (ranks that reported sections in the last window).
  const std::map<int, RankScore>& scores() const { return scores_; }
  int stragglers() const;

 private:
  struct History {
    int below = 0;  // windows in a row below the threshold
    int above = 0;  // and at or above it
    bool straggler = false;
  };
  StragglerConfig config_;
  std::map<int, RankScore> scores_;
  std::map<int, History> history_;
};

}  // namespace distrun
