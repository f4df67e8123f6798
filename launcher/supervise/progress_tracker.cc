#include "launcher/supervise/progress_tracker.h"

#include <algorithm>

namespace distrun {
namespace {

int64_t Ms(ProgressTracker::Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

// The median of the slot's recent runs in each section, in seconds; sections without a run in the window
// are left out.
template <typename Slot>
RankSectionMedians SectionMedians(const Slot& s, ProgressTracker::Clock::time_point now) {
  RankSectionMedians m;
  m.rank = s.rank;
  std::vector<int64_t> durations;
  for (const auto& [name, runs] : s.sections) {
    durations.clear();
    for (const auto& [at, ns] : runs.recent) {
      if (now - at <= ProgressTracker::kSectionWindow) durations.push_back(ns);
    }
    if (durations.empty()) continue;
    const size_t mid = durations.size() / 2;
    std::nth_element(durations.begin(), durations.begin() + static_cast<std::ptrdiff_t>(mid),
                     durations.end());
    double median = static_cast<double>(durations[mid]);
    if (durations.size() % 2 == 0) {
      median = (median + static_cast<double>(*std::max_element(
                             durations.begin(), durations.begin() + static_cast<std::ptrdiff_t>(mid)))) /
               2;
    }
    m.median_s[name] = median / 1e9;
  }
  return m;
}

}  // namespace

void ProgressTracker::Started(size_t slot, int rank, pid_t pid, Clock::time_point now) {
  if (slot >= slots_.size()) return;
  slots_[slot] = Slot{};
  slots_[slot].running = true;
  slots_[slot].rank = rank;
  slots_[slot].pid = pid;
  slots_[slot].active_at = now;
}

void ProgressTracker::Exited(size_t slot) {
  if (slot < slots_.size()) slots_[slot].running = false;
}

void ProgressTracker::Look(Clock::time_point now) {
  away_ = Clock::duration::zero();
  if (looked_at_ && now - *looked_at_ > kAwayAfter) {
    away_ = now - *looked_at_;
    away_since_ = *looked_at_;
    auto forward = [&](Clock::time_point& t) { t = std::min(t + away_, now); };
    for (Slot& s : slots_) {
      if (!s.running) continue;
      if (s.advanced_at) forward(*s.advanced_at);
      if (s.reports > 0) forward(s.reported_at);
      forward(s.active_at);
    }
  }
  looked_at_ = now;
}

void ProgressTracker::Sample(size_t slot, const ProgressSample& sample, Clock::time_point now) {
  if (slot >= slots_.size()) return;
  Slot& s = slots_[slot];
  if (!s.running || sample.reports == 0 || sample.reports == s.reports) return;
  // The report's own time when the board has one (several reports may fall between two samples).
  Clock::time_point at =
      sample.time_ns > 0 ? Clock::time_point(std::chrono::nanoseconds(sample.time_ns)) : now;
  if (away_ > Clock::duration::zero() && at > away_since_) at += away_;  // unseen until after a gap (Look)
  at = std::min(at, now);
  const bool first = s.reports == 0;
  s.reports = sample.reports;
  s.reported_at = at;
  if (first || sample.step != s.step) {
    // The first interval is often the slowest (compilation, warm-up): it is not kept.
    if (!first && s.advanced_at && ++s.changes >= 2) {
      // Several steps between two samples: each took its share.
      const int64_t steps = std::max<int64_t>(1, sample.step - s.step);
      s.intervals_ms.push_back(Ms(at - *s.advanced_at) / steps);
      if (s.intervals_ms.size() > kIntervalsKept) s.intervals_ms.pop_front();
    }
    s.step = sample.step;
    s.advanced_at = at;
  }
  s.history.emplace_back(at, sample.step);
  while (s.history.size() > 2 && at - s.history.front().first > kRateWindow) s.history.pop_front();
}

void ProgressTracker::Sections(size_t slot, const std::vector<SectionSample>& sections,
                               Clock::time_point now) {
  if (slot >= slots_.size() || !slots_[slot].running) return;
  for (const SectionSample& sample : sections) {
    Slot::SectionRuns& runs = slots_[slot].sections[sample.name];
    if (sample.runs < runs.runs) runs = {};  // a new worker in the slot
    const uint64_t fresh = std::min<uint64_t>(sample.runs - runs.runs, sample.durations_ns.size());
    for (size_t i = sample.durations_ns.size() - fresh; i < sample.durations_ns.size(); ++i) {
      runs.recent.emplace_back(now, sample.durations_ns[i]);
    }
    runs.runs = sample.runs;
    while (runs.recent.size() > kSectionRunsKept) runs.recent.pop_front();
  }
}

void ProgressTracker::Cpu(size_t slot, uint64_t ticks, Clock::time_point now) {
  if (slot >= slots_.size()) return;
  Slot& s = slots_[slot];
  if (s.cpu_ticks && *s.cpu_ticks != ticks) s.active_at = now;
  s.cpu_ticks = ticks;
}

void ProgressTracker::Output(size_t slot, Clock::time_point now) {
  if (slot < slots_.size()) slots_[slot].active_at = now;
}

NodeProgress ProgressTracker::Progress(int epoch, Clock::time_point now) const {
  NodeProgress p;
  p.epoch = epoch;
  bool learned = true;
  std::optional<Clock::time_point> active;
  for (const Slot& s : slots_) {
    if (!s.running) continue;
    ++p.workers;
    active = active ? std::max(*active, s.active_at) : s.active_at;
    if (RankSectionMedians m = SectionMedians(s, now); !m.median_s.empty())
      p.sections.push_back(std::move(m));
    if (s.reports == 0) continue;
    RankProgress r;
    r.rank = s.rank;
    r.pid = static_cast<int>(s.pid);
    r.step = s.step;
    r.advanced_ms_ago = std::max<int64_t>(0, Ms(now - s.advanced_at.value_or(s.reported_at)));
    r.reported_ms_ago = std::max<int64_t>(0, Ms(now - s.reported_at));
    if (s.history.size() >= 2) {
      const auto& [t0, step0] = s.history.front();
      const double seconds = std::chrono::duration<double>(now - t0).count();
      if (seconds > 0) r.steps_per_second = static_cast<double>(s.step - step0) / seconds;
    }
    p.ranks.push_back(r);
    if (s.intervals_ms.size() < kIntervalsToLearn) {
      learned = false;
    } else {
      p.slowest_interval_ms =
          std::max(p.slowest_interval_ms, *std::max_element(s.intervals_ms.begin(), s.intervals_ms.end()));
    }
  }
  if (!learned) p.slowest_interval_ms = 0;
  if (active && now - *active >= kQuietMinimum) p.quiet_ms = Ms(now - *active);
  return p;
}

}  // namespace distrun
