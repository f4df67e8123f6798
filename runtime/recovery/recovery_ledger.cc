#include "runtime/recovery/recovery_ledger.h"

#include <algorithm>
#include <cstdio>

#include "runtime/recovery/worker_message.h"

namespace distrun {
namespace {

int64_t Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

}  // namespace

std::string DescribeRecovery(const RecoveryRecord& r) {
  const RecoveryPhases& p = r.phases;
  const int64_t total = std::max({p.agreed, p.up, p.first_step});
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.3f", static_cast<double>(total) / 1000);
  std::string out = "generation " + std::to_string(r.generation) +
                    (r.in_place ? " recovered in place" : " restarted every worker") +
                    (total >= 0 ? std::string(" in ") + seconds + " s" : std::string()) + ": " + r.cause;
  if (r.in_place) {
    out += "; lost rank(s) " + (r.change.lost.empty() ? std::string("none") : FormatRanks(r.change.lost)) +
           ", new processes at rank(s) " +
           (r.change.joined.empty() ? std::string("none") : FormatRanks(r.change.joined)) + ", state from " +
           (r.change.source < 0 ? std::string("no rank (every process is new)")
                                : "rank " + std::to_string(r.change.source));
  }
  out += "; decided";
  const std::pair<const char*, int64_t> phases[] = {{"notified", p.notified},
                                                    {"ready", p.ready},
                                                    {"agreed", p.agreed},
                                                    {"group up", p.up},
                                                    {"first step", p.first_step}};
  for (const auto& [name, ms] : phases) {
    if (ms >= 0) out += std::string(" → ") + name + " " + std::to_string(ms) + " ms";
  }
  return out;
}

RecoveryRecord* RecoveryLedger::Find(int generation) {
  for (RecoveryRecord& r : records_) {
    if (r.generation == generation) return &r;
  }
  return nullptr;
}

void RecoveryLedger::Began(int generation, bool in_place, std::string cause, Clock::time_point now) {
  RecoveryRecord r;
  r.generation = generation;
  r.in_place = in_place;
  r.cause = std::move(cause);
  r.decided_ms = Ms(now - started_);
  records_.push_back(std::move(r));
  if (records_.size() > kKept) records_.pop_front();
  decided_[generation] = now;
  ++(in_place ? in_place_ : restarts_);
  // A generation begun before the last one was agreed is over: it completes with what it has.
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (RecoveryRecord* older = Find(it->first); older != nullptr && it->first < generation) {
      Merge(*older, it->second);
      older->complete = true;
    }
    it = it->first < generation ? pending_.erase(it) : std::next(it);
  }
}

void RecoveryLedger::Agreed(int generation, const WorldChange& change, std::set<int> nodes,
                            Clock::time_point now) {
  RecoveryRecord* r = Find(generation);
  auto decided = decided_.find(generation);
  if (r == nullptr || decided == decided_.end())
    return;  // the first world, or a generation no recovery began
  r->change = change;
  r->phases.agreed = Ms(now - decided->second);
  decided_.erase(decided);
  if (nodes.empty()) {  // no node reports (a restart): nothing more to wait for
    r->complete = true;
    return;
  }
  Pending& p = pending_[generation];
  p.agreed_at = now;
  p.nodes = std::move(nodes);
}

bool RecoveryLedger::Done(const Pending& p) const {
  for (int node : p.nodes) {
    auto it = p.reports.find(node);
    if (it == p.reports.end() || it->second.up_ms < 0 || it->second.first_step_ms < 0) return false;
  }
  return true;
}

void RecoveryLedger::Merge(RecoveryRecord& r, const Pending& p) const {
  auto latest = [&](int64_t NodeRecovery::*field) {
    int64_t most = -1;
    for (const auto& [node, report] : p.reports) most = std::max(most, report.*field);
    return most;
  };
  r.phases.notified = latest(&NodeRecovery::notified_ms);
  r.phases.ready = latest(&NodeRecovery::ready_ms);
  r.phases.up = latest(&NodeRecovery::up_ms);
  r.phases.first_step = latest(&NodeRecovery::first_step_ms);
}

std::optional<RecoveryRecord> RecoveryLedger::Reported(int node, const NodeRecovery& report) {
  auto it = pending_.find(report.generation);
  if (it == pending_.end() || !it->second.nodes.contains(node)) return std::nullopt;
  NodeRecovery& kept = it->second.reports[node];
  if (kept == report) return std::nullopt;
  kept = report;
  RecoveryRecord* r = Find(report.generation);
  if (r == nullptr) {
    pending_.erase(it);
    return std::nullopt;
  }
  Merge(*r, it->second);
  if (!Done(it->second)) return std::nullopt;
  r->complete = true;
  pending_.erase(it);
  return *r;
}

std::vector<RecoveryRecord> RecoveryLedger::Expire(Clock::time_point now, std::chrono::milliseconds wait) {
  std::vector<RecoveryRecord> done;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (now - it->second.agreed_at < wait) {
      ++it;
      continue;
    }
    if (RecoveryRecord* r = Find(it->first)) {
      Merge(*r, it->second);
      r->complete = true;
      done.push_back(*r);
    }
    it = pending_.erase(it);
  }
  return done;
}

}  // namespace distrun
