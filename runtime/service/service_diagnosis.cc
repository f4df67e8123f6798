// The coordination service's view of progress (DESIGN §4.2): the hang watch, the stall warning and the
// collection of every worker's stack (runtime/service/hang_watch.h; the service's other parts are in
// service.cc and service_epochs.cc).

#include "detect/parse.h"
#include "runtime/service/message_text.h"
#include "runtime/service/service.h"

namespace distrun {
namespace {

// Nothing in the watch needs a finer look: timeouts are seconds, and a look costs O(ranks) under the lock.
constexpr std::chrono::milliseconds kWatchInterval{250};
constexpr size_t kEventsKept = 50;

}  // namespace

void CoordinationService::ReportProgress(int node_rank, const NodeProgress& progress) {
  std::lock_guard lock(mu_);
  // A report of an earlier epoch (sent before its node heard of the restart) would bring back dead steps.
  if (state_ != JobState::kRunning || progress.epoch != round_) return;
  if (node_rank < 0 || node_rank >= Agents() || membership_.lost(node_rank)) return;
  hang_watch_.Update(node_rank, progress, Now());
  node_sections_[node_rank] = progress.sections;
  if (progress.recovery) RecoveryReported(node_rank, *progress.recovery);
}

void CoordinationService::CollectStacks(std::chrono::milliseconds timeout, StacksDone done) {
  Completions completions;
  {
    std::lock_guard lock(mu_);
    RequestStacks(timeout.count() > 0 ? timeout : config_.stacks_timeout, std::move(done), completions);
  }
  Run(completions);
}

uint64_t CoordinationService::RequestStacks(std::chrono::milliseconds timeout, StacksDone done,
                                            Completions& completions) {
  const uint64_t id = next_stacks_id_++;
  StacksRequest& request = stack_requests_[id];
  request.deadline = Now() + timeout;
  request.done = std::move(done);
  request.reply.id = id;
  JobEvent ask;
  ask.kind = JobEvent::Kind::kStacks;
  ask.stacks_id = id;
  for (auto& [stream, sink] : sinks_) {
    const int node = streams_.at(stream);
    if (Fenced(node)) continue;
    request.waiting.insert(node);
    sink(ask);
  }
  if (request.waiting.empty()) FinishStackRequest(id, completions);
  return id;
}

void CoordinationService::ReportStacks(int node_rank, const StacksReply& reply) {
  Completions completions;
  {
    std::lock_guard lock(mu_);
    auto it = stack_requests_.find(reply.id);
    if (it == stack_requests_.end() || it->second.waiting.erase(node_rank) == 0) return;  // late, or twice
    auto& workers = it->second.reply.workers;
    workers.insert(workers.end(), reply.workers.begin(), reply.workers.end());
    if (it->second.waiting.empty()) FinishStackRequest(reply.id, completions);
  }
  Run(completions);
}

void CoordinationService::FinishStackRequest(uint64_t id, Completions& completions) {
  auto it = stack_requests_.find(id);
  if (it == stack_requests_.end()) return;
  StacksReply reply = std::move(it->second.reply);
  for (int node : it->second.waiting) {
    reply.missing.push_back(NodeName(node));
  }
  std::sort(reply.workers.begin(), reply.workers.end(),
            [](const WorkerStack& a, const WorkerStack& b) { return a.rank < b.rank; });
  completions.push_back([done = std::move(it->second.done), reply = std::move(reply)] { done(reply); });
  stack_requests_.erase(it);
}

void CoordinationService::ExpireStackRequests(Clock::time_point now, Completions& completions) {
  std::set<int> attached;
  for (const auto& [stream, node] : streams_) attached.insert(node);
  std::vector<uint64_t> finished;
  for (auto& entry : stack_requests_) {
    StacksRequest& request = entry.second;
    // A node whose stream ended will not answer: no need to wait for the deadline.
    std::erase_if(request.waiting, [&](int node) {
      if (attached.count(node)) return false;
      request.reply.missing.push_back(NodeName(node) + ": its stream ended");
      return true;
    });
    if (request.waiting.empty() || now >= request.deadline) finished.push_back(entry.first);
  }
  for (uint64_t id : finished) FinishStackRequest(id, completions);
}

void CoordinationService::WatchProgress(Clock::time_point now, Completions& completions) {
  if (!stack_requests_.empty()) ExpireStackRequests(now, completions);
  if (now < next_watch_) return;
  next_watch_ = now + kWatchInterval;
  if (state_ != JobState::kRunning || diagnosing_) return;
  WatchStragglers(now);

  if (std::optional<HangVerdict> verdict = hang_watch_.Check(now)) {
    std::vector<std::string> names;
    for (int i = 0; i < Agents(); ++i) names.push_back(NodeName(i));
    const std::string headline = DescribeHang(*verdict, names);
    diagnosing_ = true;
    hung_round_ = round_.load();
    hung_at_step_.reset();
    if (verdict->behind < verdict->ranks) hung_at_step_ = verdict->step;
    Note(headline);
    const int round = round_;
    RequestStacks(
        config_.stacks_timeout,
        [this, verdict = *verdict, headline, round](const StacksReply& stacks) {
          Hung(verdict, headline, round, stacks);
        },
        completions);
    return;
  }

  std::vector<int> members;
  for (int i = 0; i < Agents(); ++i) {
    const NodeState& n = nodes_[static_cast<size_t>(i)];
    if (!membership_.lost(i) && membership_.seat(i) && n.join && n.join->local_workers > 0)
      members.push_back(i);
  }
  std::optional<std::chrono::milliseconds> quiet = hang_watch_.Stalled(members, now);
  if (!quiet) {
    stall_said_ = false;
  } else if (!stall_said_) {
    stall_said_ = true;
    JobEvent e;
    e.kind = JobEvent::Kind::kDiagnosis;
    e.notice = "stalled: no worker on any node has used CPU time or written output for " +
               MeasuredSeconds(*quiet) +
               " (the workers report no progress, so the hang watch cannot judge them; `distrun stacks` "
               "shows where they are)";
    Note(e.notice);
    SendToHost(e);
  }
}

void CoordinationService::WatchStragglers(Clock::time_point now) {
  if (now < next_straggler_window_) return;
  next_straggler_window_ = now + config_.straggler_window;
  std::vector<RankSections> ranks;
  for (const auto& [node, sections] : node_sections_) {
    if (membership_.lost(node) || !membership_.seat(node)) continue;
    for (const RankSectionMedians& r : sections) ranks.push_back({r.rank, HostOf(node), r.median_s});
  }
  if (ranks.empty()) return;
  for (const StragglerEvent& event : straggler_watch_.Evaluate(ranks)) {
    JobEvent e;
    e.kind = JobEvent::Kind::kDiagnosis;
    e.warning = true;
    e.notice = DescribeStragglerEvent(event);
    Note(e.notice);
    SendToHost(e);
  }
}

void CoordinationService::Note(const std::string& line) {
  events_.emplace_back(SinceStart(Now()), line);
  if (events_.size() > kEventsKept) events_.pop_front();
}

int64_t CoordinationService::SinceStart(Clock::time_point t) const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t - started_).count();
}

void CoordinationService::EpochBegan() {
  EpochSpan span;
  span.epoch = round_;
  span.start_ms = SinceStart(Now());
  span.ranks = 0;
  for (const NodeAssignment& a : assignments_) span.ranks = std::max(span.ranks, a.num_processes);
  epochs_.push_back(span);
}

void CoordinationService::EpochEnded(const std::string& why) {
  if (epochs_.empty() || epochs_.back().end_ms) return;
  epochs_.back().end_ms = SinceStart(Now());
  epochs_.back().end = why;
  if (why != "succeeded") Note("epoch " + std::to_string(epochs_.back().epoch) + " ended: " + why);
}

void CoordinationService::Hung(const HangVerdict& verdict, const std::string& headline, int round,
                               const StacksReply& stacks) {
  // Outside the lock: explaining parses and merges every stack, and writes the full dump.
  HangExplanation explained;
  if (config_.explain) explained = config_.explain(headline, stacks);
  std::string summary = headline;
  if (!explained.odd_summary.empty()) summary += "; the stacks set apart " + explained.odd_summary;
  Completions completions;
  {
    std::lock_guard lock(mu_);
    diagnosing_ = false;
    if (state_ != JobState::kRunning || round_ != round) return;  // the job moved on meanwhile
    JobEvent e;
    e.kind = JobEvent::Kind::kDiagnosis;
    e.notice = explained.text.empty() ? summary : explained.text;
    SendToHost(e);
    // The root cause: the least advanced rank where progress tells ranks apart (a stack that stands out may
    // be a healthy rank's, or a failed capture), else the first rank the stacks set apart, else none
    // (every rank stuck alike: the job as a whole).
    FailedWorker f;
    if (!verdict.slowest.empty() && verdict.behind < verdict.ranks) {
      f.node_rank = verdict.slowest.front().first;
      f.process_id = verdict.slowest.front().second.rank;
    } else if (!explained.odd_ranks.empty()) {
      f.process_id = explained.odd_ranks.front();
      for (const auto& [node, r] : hang_watch_.Ranks(Now())) {
        if (r.rank == f.process_id) f.node_rank = node;
      }
    }
    f.host = HostOf(f.node_rank);
    f.exit_code = kHungExitCode;
    f.description = summary;
    RecordFailure(f, /*allow_restart=*/true, completions);
  }
  Run(completions);
}

void CoordinationService::SendToHost(const JobEvent& event) {
  for (auto& [stream, sink] : sinks_) {
    if (streams_.at(stream) == 0) sink(event);
  }
}

JobStatusView CoordinationService::Overview() const {
  JobStatusView v;
  v.history = History();  // takes the lock itself
  std::lock_guard lock(mu_);
  const auto now = Now();
  v.state = state_;
  v.epoch = round_;
  v.num_nodes = membership_.world_nodes();
  v.recoveries.assign(ledger_.records().begin(), ledger_.records().end());
  v.recoveries_in_place = ledger_.count(true);
  v.recoveries_restart = ledger_.count(false);
  v.run_id = config_.run_id;
  v.uptime_ms = SinceStart(now);
  v.restarts = restarts_;
  v.nodes_lost = static_cast<int>(losses_.size());
  v.hung = hung_round_ == round_.load() && (diagnosing_ || state_ == JobState::kStopped);
  if (v.hung) v.hung_at_step = hung_at_step_;
  v.straggler_threshold = config_.straggler.threshold;
  v.epochs = epochs_;
  v.events.assign(events_.begin(), events_.end());
  const std::map<int, RankScore>& scores = straggler_watch_.scores();
  for (auto& [node, r] : hang_watch_.Ranks(now)) {
    v.ranks.push_back(r);
    v.ranks.back().host = HostOf(node);
  }
  for (const auto& [node, sections] : node_sections_) {
    if (membership_.lost(node)) continue;
    for (RankSectionMedians m : sections) {
      m.host = HostOf(node);
      if (auto score = scores.find(m.rank); score != scores.end()) {
        m.score = score->second.score;
        m.straggler = score->second.straggler;
        m.section = score->second.section;
      }
      v.sections.push_back(std::move(m));
    }
  }
  std::sort(v.sections.begin(), v.sections.end(),
            [](const RankSectionMedians& a, const RankSectionMedians& b) { return a.rank < b.rank; });
  std::sort(v.ranks.begin(), v.ranks.end(),
            [](const RankProgress& a, const RankProgress& b) { return a.rank < b.rank; });
  v.hang_timeout = hang_watch_.Timeout(&v.hang_timeout_learned);
  for (int i = 0; i < Agents(); ++i) {
    if (membership_.lost(i)) continue;
    const NodeState& n = nodes_[static_cast<size_t>(i)];
    std::string line = NodeName(i);
    if (!membership_.seat(i)) {
      line += ": spare";
    } else {
      std::optional<NodeProgress> p = hang_watch_.NodeAsOf(i, now);
      int workers = p ? p->workers : (n.join ? n.join->local_workers : 0);
      line += ": " + std::to_string(workers) + (workers == 1 ? " worker" : " workers");
      if (p && p->quiet_ms > 0)
        line += ", quiet for " + FormatSeconds(std::chrono::milliseconds(p->quiet_ms));
    }
    if (!n.stream) line += ", no liveness stream";
    v.nodes.push_back(std::move(line));
    if (n.round_trips.count() > 0) v.round_trips.push_back({i, HostOf(i), n.round_trips});
  }
  return v;
}

}  // namespace distrun
