#include "runtime/service/hang_watch.h"

#include <algorithm>

#include "detect/parse.h"
#include "runtime/service/message_text.h"

namespace distrun {
namespace {

int64_t MsSince(HangWatch::Clock::time_point then, HangWatch::Clock::time_point now) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(now - then).count();
}

}  // namespace

void HangWatch::Update(int node, const NodeProgress& progress, Clock::time_point now) {
  nodes_[node] = NodeReport{progress, now};
}

void HangWatch::Forget(int node) { nodes_.erase(node); }

void HangWatch::Reset() { nodes_.clear(); }

std::optional<std::chrono::milliseconds> HangWatch::Timeout(bool* learned) const {
  if (config_.off) return std::nullopt;
  bool armed = false;
  bool all_learned = true;
  int64_t slowest = 0;
  for (const auto& [node, report] : nodes_) {
    if (report.progress.ranks.empty()) continue;
    armed = true;
    if (report.progress.slowest_interval_ms <= 0) all_learned = false;
    slowest = std::max(slowest, report.progress.slowest_interval_ms);
  }
  if (!armed) return std::nullopt;
  if (learned) *learned = config_.timeout.count() <= 0;
  if (config_.timeout.count() > 0) return config_.timeout;
  if (!all_learned) return std::max(config_.warmup, config_.floor);
  return std::max(config_.floor, std::chrono::milliseconds(slowest * config_.factor));
}

std::vector<std::pair<int, RankProgress>> HangWatch::Ranks(Clock::time_point now) const {
  return RanksAsOf(now, /*judged=*/false);
}

std::vector<std::pair<int, RankProgress>> HangWatch::RanksAsOf(Clock::time_point now, bool judged) const {
  std::vector<std::pair<int, RankProgress>> ranks;
  for (const auto& [node, report] : nodes_) {
    const int64_t age = MsSince(report.at, now);
    if (judged && config_.overdue.count() > 0 && age > config_.overdue.count()) continue;
    for (const RankProgress& r : AgedBy(report.progress, age).ranks) {
      ranks.emplace_back(node, r);
    }
  }
  std::sort(ranks.begin(), ranks.end(),
            [](const auto& a, const auto& b) { return a.second.rank < b.second.rank; });
  return ranks;
}

std::optional<NodeProgress> HangWatch::NodeAsOf(int node, Clock::time_point now) const {
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return std::nullopt;
  return AgedBy(it->second.progress, MsSince(it->second.at, now));
}

std::optional<HangVerdict> HangWatch::Check(Clock::time_point now) const {
  bool learned = false;
  std::optional<std::chrono::milliseconds> timeout = Timeout(&learned);
  if (!timeout) return std::nullopt;
  std::vector<std::pair<int, RankProgress>> ranks = RanksAsOf(now, /*judged=*/true);
  if (ranks.empty()) return std::nullopt;
  int64_t least = INT64_MAX;
  for (const auto& [node, r] : ranks) least = std::min(least, r.step);
  std::vector<std::pair<int, RankProgress>> behind;
  int64_t youngest = INT64_MAX;  // among the least advanced: the one that moved last decides
  for (const auto& nr : ranks) {
    if (nr.second.step != least) continue;
    behind.push_back(nr);
    youngest = std::min(youngest, nr.second.advanced_ms_ago);
  }
  if (youngest < timeout->count() + config_.staleness.count()) return std::nullopt;
  HangVerdict v;
  v.stuck_for = std::chrono::milliseconds(youngest);
  v.timeout = *timeout;
  v.learned = learned;
  v.step = least;
  v.behind = static_cast<int>(behind.size());
  v.ranks = static_cast<int>(ranks.size());
  std::stable_sort(behind.begin(), behind.end(), [](const auto& a, const auto& b) {
    return a.second.advanced_ms_ago > b.second.advanced_ms_ago;
  });
  if (behind.size() > kNamedRanks) behind.resize(kNamedRanks);
  v.slowest = std::move(behind);
  std::vector<int64_t> steps;
  for (const auto& nr : ranks) steps.push_back(nr.second.step);
  std::nth_element(steps.begin(), steps.begin() + static_cast<long>(steps.size() / 2), steps.end());
  v.median_step = steps[steps.size() / 2];
  return v;
}

std::optional<std::chrono::milliseconds> HangWatch::Stalled(const std::vector<int>& nodes,
                                                            Clock::time_point now) const {
  if (config_.stall.count() <= 0 || nodes.empty()) return std::nullopt;
  int64_t quiet = INT64_MAX;
  for (int node : nodes) {
    auto it = nodes_.find(node);
    if (it == nodes_.end()) return std::nullopt;
    const NodeProgress& p = it->second.progress;
    // Progress reports mean the hang watch judges; a node without running workers is not stalled.
    if (!p.ranks.empty() || p.workers == 0 || p.quiet_ms <= 0) return std::nullopt;
    quiet = std::min(quiet, p.quiet_ms + MsSince(it->second.at, now));
  }
  if (quiet < config_.stall.count()) return std::nullopt;
  return std::chrono::milliseconds(quiet);
}

std::string DescribeHang(const HangVerdict& v, const std::vector<std::string>& node_names) {
  std::string text = "hung: no progress for " + MeasuredSeconds(v.stuck_for) + " (" +
                     (v.learned ? "learned hang timeout " + MeasuredSeconds(v.timeout)
                                : "--hang-timeout " + FormatSeconds(v.timeout)) +
                     ")";
  if (v.median_step == v.step && v.behind > 1) {
    // Every rank at one step: progress cannot tell the culprit; the stacks do (the caller adds them).
    return text + "; " + (v.behind == v.ranks ? "every rank" : std::to_string(v.behind) + " ranks") +
           " reported step " + std::to_string(v.step) + " last";
  }
  text += "; least advanced: ";
  for (size_t i = 0; i < v.slowest.size(); ++i) {
    const auto& [node, r] = v.slowest[i];
    if (i > 0) text += ", ";
    std::string where = node >= 0 && static_cast<size_t>(node) < node_names.size() ? node_names[node] : "";
    text += "rank " + std::to_string(r.rank) + " (" +
            (where.empty() ? "node " + std::to_string(node) : where) + ", pid " + std::to_string(r.pid) + ")";
  }
  if (v.behind > static_cast<int>(v.slowest.size())) {
    text += " and " + std::to_string(v.behind - static_cast<int>(v.slowest.size())) + " more";
  }
  return text + " at step " + std::to_string(v.step) + " (median " + std::to_string(v.median_step) + ")";
}

}  // namespace distrun
