#include "runtime/service/straggler_watch.h"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace distrun {

std::string DescribeStragglerEvent(const StragglerEvent& e) {
  char text[320];
  if (e.kind == StragglerEvent::Kind::kStraggler) {
    std::snprintf(
        text, sizeof text,
        "rank %d (%s) is a straggler: score %.2f in section %s (median %.3f s; fastest rank %.3f s)", e.rank,
        e.host.c_str(), e.score.score, e.score.section.c_str(), e.score.median_s, e.score.fastest_median_s);
  } else {
    std::snprintf(
        text, sizeof text,
        "rank %d (%s) is no longer a straggler: score %.2f in section %s (median %.3f s; fastest rank "
        "%.3f s)",
        e.rank, e.host.c_str(), e.score.score, e.score.section.c_str(), e.score.median_s,
        e.score.fastest_median_s);
  }
  return text;
}

std::vector<StragglerEvent> StragglerWatch::Evaluate(const std::vector<RankSections>& ranks) {
  // The fastest median of each section over the ranks that ran it.
  std::map<std::string, double> fastest;
  for (const RankSections& r : ranks) {
    for (const auto& [section, median] : r.median_s) {
      if (!(median > 0)) continue;  // a section that takes no measurable time says nothing
      auto [it, fresh] = fastest.emplace(section, median);
      if (!fresh) it->second = std::min(it->second, median);
    }
  }
  std::vector<StragglerEvent> events;
  std::map<int, RankScore> scores;
  for (const RankSections& r : ranks) {
    RankScore worst;
    bool any = false;
    for (const auto& [section, median] : r.median_s) {
      if (!(median > 0)) continue;
      const double best = fastest.at(section);
      const double score = best / median;
      if (!any || score < worst.score) worst = {score, section, median, best, false};
      any = true;
    }
    if (!any) continue;
    History& h = history_[r.rank];
    if (worst.score < config_.threshold) {
      ++h.below;
      h.above = 0;
    } else {
      ++h.above;
      h.below = 0;
    }
    if (!h.straggler && h.below >= config_.windows) {
      h.straggler = true;
      events.push_back({StragglerEvent::Kind::kStraggler, r.rank, r.host, worst});
    } else if (h.straggler && h.above >= config_.windows) {
      h.straggler = false;
      events.push_back({StragglerEvent::Kind::kRecovered, r.rank, r.host, worst});
    }
    worst.straggler = h.straggler;
    for (StragglerEvent& e : events) {
      if (e.rank == r.rank) e.score.straggler = h.straggler;
    }
    scores[r.rank] = worst;
  }
  scores_ = std::move(scores);
  return events;
}

int StragglerWatch::stragglers() const {
  int n = 0;
  for (const auto& [rank, s] : scores_) n += s.straggler;
  return n;
}

}  // namespace distrun
