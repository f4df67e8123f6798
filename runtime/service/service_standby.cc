// The standby coordinator (DESIGN §4.5), both sides. The coordinator's: what it writes through to the
// epoch's standby (a snapshot of the job when its state changes, each write of a job key after it) and the
// writes it holds back until the standby acknowledged them. The standby's: its copy (StandbyReplica), a
// service rebuilt from it, and the takeover that begins the next epoch without the old coordinator. The
// rule that decides whether to take over is runtime/service/takeover.h's; the wire is the transport's.

#include <algorithm>
#include <stdexcept>

#include "runtime/service/message_text.h"
#include "runtime/service/service.h"

namespace distrun {

StandbyReplica::Result StandbyReplica::Apply(const StandbyUpdate& update) {
  if (update.seq <= applied_) return Result::kStale;
  if (update.snapshot) {
    copy_ = update.snapshot;
  } else {
    if (!copy_ || update.seq != applied_ + 1) return Result::kNeedSnapshot;
    if (update.value) {
      copy_->job_keys[update.key] = *update.value;
    } else {
      copy_->job_keys.erase(update.key);
    }
    copy_->seq = update.seq;
  }
  applied_ = update.seq;
  return Result::kApplied;
}

ServiceSnapshot CoordinationService::Snapshot() const {
  std::lock_guard lock(mu_);
  return SnapshotLocked();
}

ServiceSnapshot CoordinationService::SnapshotLocked() const {
  ServiceSnapshot s;
  s.num_nodes = config_.num_nodes;
  s.run_id = config_.run_id;
  s.worker_token = config_.worker_token;
  s.host_agent = config_.host_agent;
  s.round = round_;
  s.restarts = restarts_;
  s.losses = losses_;
  s.arrivals = arrivals_;
  for (int agent = 0; agent < Agents(); ++agent) s.hosts.push_back(HostOf(agent));
  s.membership = membership_.State();
  s.seq = standby_sent_;
  s.world_ranks = world_ranks_;
  for (const auto& [key, value] : store_) {
    if (IsJobKey(key)) s.job_keys.emplace(key, value);
  }
  return s;
}

void CoordinationService::Restore(const ServiceSnapshot& s) {
  auto refuse = [](const std::string& what) {
    throw std::invalid_argument("the standby's copy of the job does not fit this job: " + what);
  };
  if (!config_.elastic) refuse("only an elastic job (--nnodes MIN:MAX) has a standby");
  if (s.num_nodes != config_.num_nodes) {
    refuse("it started " + std::to_string(s.num_nodes) + " nodes, this job " +
           std::to_string(config_.num_nodes));
  }
  if (s.run_id != config_.run_id)
    refuse("it is run '" + s.run_id + "', this job run '" + config_.run_id + "'");
  membership_ = Membership::FromState(s.membership);
  if (membership_.agents() < config_.num_nodes) refuse("fewer agents than the nodes started");
  if (s.hosts.size() != static_cast<size_t>(membership_.agents())) refuse("a host for every agent");
  if (s.round != membership_.epoch()) refuse("its epoch and its membership's differ");
  if (s.host_agent < 0 || s.host_agent >= membership_.agents()) refuse("its coordinator's agent is unknown");
  for (const auto* events : {&s.losses, &s.arrivals}) {
    for (auto [agent, epoch] : *events) {
      if (agent < 0 || agent >= membership_.agents() || epoch < 0 || epoch > s.round)
        refuse("a loss or an arrival of agent " + std::to_string(agent) + " in epoch " +
               std::to_string(epoch));
    }
  }
  for (const auto& [agent, ranks] : s.world_ranks) {
    if (agent < 0 || agent >= membership_.agents() || ranks.rank_offset < 0 || ranks.workers < 0)
      refuse("the last world's ranks of agent " + std::to_string(agent));
  }
  config_.worker_token = s.worker_token;
  world_ranks_ = s.world_ranks;
  standby_sent_ = standby_acked_ = s.seq;
  round_ = s.round;
  restarts_ = s.restarts;
  losses_ = s.losses;
  arrivals_ = s.arrivals;
  nodes_.assign(static_cast<size_t>(membership_.agents()), NodeState{});
  for (size_t a = 0; a < nodes_.size(); ++a) nodes_[a].host = s.hosts[a];
  grouped_ = true;  // the snapshot's membership knows which agents share a host
  for (const auto& [key, value] : s.job_keys) {
    if (!IsJobKey(key)) refuse("'" + key + "' is not one of the job's keys");
    store_.emplace(key, value);
    store_bytes_ += key.size() + value.size();
    job_key_bytes_ += key.size() + value.size();
  }
  election_.emplace(s, config_.host_agent, config_.heartbeat_timeout, Now());
}

Status CoordinationService::TakeOver(const TakeoverDecision& decision) {
  Completions completions;
  Status status;
  {
    std::lock_guard lock(mu_);
    if (!config_.resume || taken_over_ || joined_ > 0) {
      return {StatusCode::kFailedPrecondition, "only a standby's service takes over, once, before any join"};
    }
    if (decision.verdict != TakeoverDecision::Verdict::kTakeOver || decision.fenced.empty()) {
      return {StatusCode::kInvalidArgument, "the takeover has no decision to take over"};
    }
    const int standby_node = membership_.node_of(config_.host_agent);
    for (int node : decision.fenced) {
      if (node < 0 || node >= membership_.nodes()) {
        return {StatusCode::kInvalidArgument,
                "the takeover fences node " + std::to_string(node) + ", which the job does not have"};
      }
      if (node == standby_node) return {StatusCode::kInvalidArgument, "the standby cannot fence itself"};
    }
    election_.reset();
    TakeOverLocked(decision, completions);
    if (state_ == JobState::kStopped) status = {StatusCode::kAborted, DescribeFailure(*root_cause_)};
  }
  Run(completions);
  return status;
}

void CoordinationService::TakeOverLocked(const TakeoverDecision& decision, Completions& completions) {
  taken_over_ = true;
  const int old_host = config_.resume->host_agent;
  FailedWorker f;
  f.node_rank = old_host;
  f.host = HostOf(old_host);
  f.exit_code = kLostAgentExitCode;
  f.description = "node lost: it hosted the job's coordinator";
  std::vector<std::string> others;
  bool too_few = false;
  for (int node : decision.fenced) {
    const int agent = membership_.agents_of(node).front();
    if (agent != old_host) others.push_back(NodeName(agent));
    Membership::Loss loss{};
    RecordLoss(agent, &loss);
    too_few = too_few || loss == Membership::Loss::kTooFew;
  }
  // The old coordinator's workers may still run until its own timeout ends them: never beside these.
  hold_epoch_until_ = std::max(hold_epoch_until_, Now() + config_.fence_wait);
  for (int agent = 0; agent < Agents(); ++agent) {
    if (!membership_.lost(agent)) SetHeartbeatDeadline(nodes_[static_cast<size_t>(agent)]);
  }
  if (too_few) {
    GoOnWithout({}, true, Membership::Loss::kTooFew, f, completions);
    return;
  }
  f.description += "; its standby, " + NodeName(config_.host_agent) + ", took over with " +
                   std::to_string(membership_.world_nodes()) + " node(s)";
  if (!others.empty()) f.description += " (also fenced: " + JoinNames(others) + ")";
  JobEvent event;
  event.kind = JobEvent::Kind::kRestart;
  event.root_cause = f;
  event.node_lost = true;
  BeginEpoch(event, completions);
}

bool CoordinationService::Electing() const {
  std::lock_guard lock(mu_);
  return election_.has_value();
}

bool CoordinationService::Elect(Clock::time_point now, Completions& completions) {
  switch (election_->Tick(now)) {
    case StandbyCoordinator::Outcome::kWaiting:
      return true;
    case StandbyCoordinator::Outcome::kTakeOver: {
      const TakeoverDecision decision = election_->decision();
      election_.reset();
      TakeOverLocked(decision, completions);
      return false;
    }
    case StandbyCoordinator::Outcome::kEnd: {
      FailedWorker f;
      f.node_rank = -1;  // the message names the nodes itself
      f.exit_code = kLostAgentExitCode;
      f.description = election_->end_message();
      election_.reset();
      taken_over_ = true;
      StopJob(f, completions, /*coordinator_lost=*/true);
      return false;
    }
  }
  return false;
}

bool CoordinationService::Replicating() const {
  if (!standby_ || shut_down_ || state_ == JobState::kStopped || state_ == JobState::kSucceeded) return false;
  const NodeState& node = nodes_[static_cast<size_t>(*standby_)];
  return node.replicates && node.stream && !membership_.lost(*standby_);
}

void CoordinationService::ReplicateState(Completions& completions) {
  if (!Replicating()) {
    ReleaseHeldWrites(completions);
    return;
  }
  ++standby_sent_;
  SendToStandby(StandbyUpdate{standby_sent_, SnapshotLocked(), {}, {}});  // its seq is this one
  sent_epochs_.push_back({standby_sent_, membership_.node_of(*standby_), round_, membership_.seated_nodes()});
}

void CoordinationService::WriteThrough(const std::string& key, const std::optional<std::string>& value,
                                       Done on_held, Completions& completions) {
  if (!IsJobKey(key) || !Replicating()) {
    if (on_held) completions.push_back([done = std::move(on_held)] { done(Status::Ok()); });
    return;
  }
  SendToStandby(StandbyUpdate{++standby_sent_, std::nullopt, key, value});
  if (on_held) held_writes_.emplace_back(standby_sent_, std::move(on_held));
}

void CoordinationService::SendToStandby(StandbyUpdate update) {
  JobEvent event;
  event.kind = JobEvent::Kind::kStandby;
  event.standby_update = std::move(update);
  sinks_[*nodes_[static_cast<size_t>(*standby_)].stream](event);
}

void CoordinationService::ReleaseHeldWrites(Completions& completions) {
  standby_acked_ = standby_sent_;
  for (auto& [seq, done] : held_writes_) {
    completions.push_back([done = std::move(done)] { done(Status::Ok()); });
  }
  held_writes_.clear();
}

void CoordinationService::StandbyApplied(uint64_t stream_id, uint64_t applied, bool needs_snapshot) {
  Completions completions;
  {
    std::lock_guard lock(mu_);
    auto it = streams_.find(stream_id);
    if (it == streams_.end() || !standby_ || it->second != *standby_) return;
    standby_acked_ = std::max(standby_acked_, std::min(applied, standby_sent_));
    // Held writes are in sequence order.
    auto covered = std::find_if(held_writes_.begin(), held_writes_.end(),
                                [this](const auto& held) { return held.first > standby_acked_; });
    for (auto w = held_writes_.begin(); w != covered; ++w) {
      completions.push_back([done = std::move(w->second)] { done(Status::Ok()); });
    }
    held_writes_.erase(held_writes_.begin(), covered);
    while (!sent_epochs_.empty() && sent_epochs_.front().seq <= standby_acked_) {
      standby_epoch_ = std::move(sent_epochs_.front());
      sent_epochs_.erase(sent_epochs_.begin());
    }
    if (needs_snapshot) ReplicateState(completions);
  }
  Run(completions);
}

CoordinationService::Away CoordinationService::AwayFromHost(int node, Clock::time_point now) const {
  const int agent = membership_.agents_of(node).front();
  if (agent == config_.host_agent) return Away::kNo;
  if (membership_.lost(agent)) return Away::kLost;
  const NodeState& state = nodes_[static_cast<size_t>(agent)];
  auto recent = [&](const std::optional<Clock::time_point>& t) {
    return t && now - *t <= config_.heartbeat_timeout;
  };
  if (recent(state.heard_poorly)) return Away::kHearsPoorly;
  if (recent(state.lossy)) return Away::kLossy;
  // Silent for half the timeout or more: at least one and a half of its heartbeat intervals missed.
  if (state.heartbeat_deadline && *state.heartbeat_deadline - now <= config_.heartbeat_timeout / 2)
    return Away::kLate;
  return Away::kNo;
}

std::vector<std::pair<int, CoordinationService::Away>> CoordinationService::MayBeCutOff() const {
  if (!standby_epoch_) return {};
  const Clock::time_point now = Now();
  // The standby is here: nobody else can take over.
  if (AwayFromHost(standby_epoch_->standby_node, now) == Away::kNo) return {};
  std::vector<std::pair<int, Away>> unheard;
  for (int node : standby_epoch_->members) {
    if (Away away = AwayFromHost(node, now); away != Away::kNo) unheard.emplace_back(node, away);
  }
  if (!IsMajority(static_cast<int>(unheard.size()), static_cast<int>(standby_epoch_->members.size())))
    return {};
  return unheard;
}

void CoordinationService::FenceHost(const std::vector<std::pair<int, Away>>& unheard,
                                    Completions& completions) {
  std::vector<std::string> names, poorly, lossy, late;
  for (const auto& [node, away] : unheard) {
    const std::string name = NodeName(membership_.agents_of(node).front());
    switch (away) {
      case Away::kHearsPoorly:
        poorly.push_back(name);
        break;
      case Away::kLossy:
        lossy.push_back(name);
        break;
      case Away::kLate:
        late.push_back(name);
        break;
      default:
        names.push_back(name);
    }
  }
  FailedWorker f;
  f.node_rank = config_.host_agent;
  f.host = HostOf(config_.host_agent);
  f.exit_code = kFencedExitCode;
  f.description =
      kFencedPrefix + std::string("this node hosts the job's coordinator but no longer hears ") +
      (names.empty() ? std::string("its standby") : JoinNames(names)) +
      (poorly.empty() ? std::string() : ", and " + JoinNames(poorly) + " hardly hear it") +
      (lossy.empty() ? std::string() : ", and " + JoinNames(lossy) + " reach it only after retransmissions") +
      (late.empty() ? std::string()
                    : ", and " + JoinNames(late) + " sent nothing for half the heartbeat timeout") +
      ": " + std::to_string(unheard.size()) + " of the " + std::to_string(standby_epoch_->members.size()) +
      " nodes of epoch " + std::to_string(standby_epoch_->epoch) +
      ", its standby among them, may go on without it, so it stops rather than run beside them";
  StopJob(f, completions, /*coordinator_lost=*/false, StopAudience::kHostOnly);
}

}  // namespace distrun
