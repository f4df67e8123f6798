#include "runtime/service/service.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <stdexcept>

#include "detect/parse.h"
#include "runtime/service/message_text.h"

namespace distrun {
namespace {

constexpr int kMaxNodes = 1 << 20;
std::optional<int64_t> ParseInt64(const std::string& text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || text.empty()) return std::nullopt;
  return value;
}

const ServiceConfig& Checked(const ServiceConfig& config) {
  if (config.num_nodes < 1 || config.num_nodes > kMaxNodes) {
    throw std::invalid_argument("the coordination service needs 1 to " + std::to_string(kMaxNodes) +
                                " nodes, not " + std::to_string(config.num_nodes));
  }
  return config;
}

// Without a range every started node is needed: the first loss leaves too few.
ElasticRange RangeOf(const ServiceConfig& config) {
  return config.elastic.value_or(ElasticRange{config.num_nodes, config.num_nodes, ElasticPolicy::kResize});
}

}  // namespace

CoordinationService::CoordinationService(ServiceConfig config)
    : config_(Checked(config)),
      membership_(config_.num_nodes, RangeOf(config_), config_.elastic && config_.agents_share_hosts),
      hang_watch_(config_.hang),
      straggler_watch_(config_.straggler) {
  if (!config_.clock) config_.clock = [] { return Clock::now(); };
  started_ = Now();
  ledger_ = RecoveryLedger(started_);
  nodes_.resize(static_cast<size_t>(config_.num_nodes));
  round_deadline_ = Now() + config_.initialization_timeout;
  if (config_.resume) Restore(*config_.resume);
  if (config_.host_agent < 0 || config_.host_agent >= Agents()) {
    throw std::invalid_argument("the service's host is agent " + std::to_string(config_.host_agent) +
                                ", but the job has agents 0 to " + std::to_string(Agents() - 1));
  }
}

CoordinationService::~CoordinationService() { Shutdown(); }

CoordinationService::Clock::time_point CoordinationService::Now() const { return config_.clock(); }

std::string CoordinationService::HostOf(int node_rank) const {
  if (node_rank < 0 || node_rank >= Agents()) return {};
  const NodeState& node = nodes_[static_cast<size_t>(node_rank)];
  if (node.join) return node.join->name();
  if (!node.host.empty()) return node.host;
  if (static_cast<size_t>(node_rank) < config_.expected_hosts.size()) {
    return config_.expected_hosts[static_cast<size_t>(node_rank)];
  }
  return {};
}

std::string CoordinationService::NodeName(int node_rank) const {
  std::string name = "node " + std::to_string(node_rank);
  std::string host = HostOf(node_rank);
  return host.empty() ? name : name + " (" + host + ")";
}

std::string CoordinationService::WorkerName(int process_id) const {
  std::string name = "rank " + std::to_string(process_id);
  // Offsets ascend with the node rank: the worker's node is the last one starting at or before it that
  // has workers (nodes without workers share the next node's offset).
  auto it = std::upper_bound(assignments_.begin(), assignments_.end(), process_id,
                             [](int id, const NodeAssignment& a) { return id < a.rank_offset; });
  while (it != assignments_.begin()) {
    --it;
    const int agent = membership_.agent_in_seat(static_cast<int>(it - assignments_.begin()));
    const NodeState& node = nodes_[static_cast<size_t>(agent)];
    int workers = node.join ? node.join->local_workers : 0;
    if (workers == 0) continue;
    if (process_id < it->rank_offset + workers) return name + " on " + NodeName(agent);
    break;
  }
  return name;
}

void CoordinationService::SetHeartbeatDeadline(NodeState& node) {
  node.heartbeat_deadline = Now() + config_.heartbeat_timeout;
  earliest_heartbeat_deadline_ = std::min(earliest_heartbeat_deadline_, *node.heartbeat_deadline);
}

bool CoordinationService::HeldFailureIsDue(Clock::time_point now) const {
  if (now < held_failure_->reported + config_.failure_hold) return false;
  if (now >= held_failure_->reported + config_.heartbeat_timeout + config_.fence_wait) return true;
  for (int i = 0; i < Agents(); ++i) {
    const NodeState& n = nodes_[static_cast<size_t>(i)];
    if (membership_.lost(i) || !membership_.seat(i) || !n.heartbeat_deadline || n.succeeded) continue;
    if (n.heard_well < held_failure_->reported) return false;
  }
  return true;
}

std::string CoordinationService::MissingNodes() const {
  std::vector<std::string> missing;
  for (int i = 0; i < Agents(); ++i) {
    if (!nodes_[static_cast<size_t>(i)].join && !membership_.lost(i)) missing.push_back(NodeName(i));
  }
  return JoinNames(missing);
}

size_t CoordinationService::AttachedAgents() const {
  std::lock_guard lock(mu_);
  return streams_.size();
}

std::string CoordinationService::RendezvousProgress() const {
  std::lock_guard lock(mu_);
  if (state_ != JobState::kRendezvous) return {};
  return "waiting for " + std::to_string(joined_) + " of " + std::to_string(membership_.live_agents()) +
         " nodes; missing: " + MissingNodes();
}

void CoordinationService::Run(Completions& completions) {
  for (auto& c : completions) c();
  completions.clear();
}

// ---- rendezvous ----

void CoordinationService::Join(const NodeJoin& join, JoinDone done) {
  Completions completions;
  auto fail = [&](StatusCode code, std::string message) {
    completions.push_back([done = std::move(done), s = Status{code, std::move(message)}] { done(s, {}); });
  };
  {
    std::lock_guard lock(mu_);
    const std::string who = "node " + std::to_string(join.node_rank) +
                            (join.name().empty() ? std::string() : " (" + join.name() + ")");
    // A node admitted after the start (Admit) never knew the node count, and its first join is for
    // whatever epoch the job is in.
    NodeJoin arrival = join;
    const bool arrived = join.node_rank >= config_.num_nodes && join.node_rank < Agents();
    // A node that claimed a seat when every one was taken came as an arrival (Admit).
    const bool arriving = join.arriving || (join.claims_seat && arrived);
    if (arriving) arrival.restart_round = round_;
    if (shut_down_) {
      fail(StatusCode::kUnavailable, "the coordination service is shutting down");
    } else if (election_) {
      // A standby before its decision holds no epoch to join: the takeover's restart names the next one.
      fail(StatusCode::kUnavailable, who + " joined the job's standby before it took the job over");
    } else if (arriving && !arrived) {
      fail(StatusCode::kInvalidArgument, who + " says it arrived, but the coordinator did not admit it");
    } else if (!arrived && join.num_nodes != config_.num_nodes) {
      fail(StatusCode::kInvalidArgument, who + " expects " + std::to_string(join.num_nodes) +
                                             " nodes, but the job has " + std::to_string(config_.num_nodes) +
                                             "; every distrun of a job must see the same node count");
    } else if (join.node_rank < 0 || join.node_rank >= Agents()) {
      fail(StatusCode::kInvalidArgument,
           who + ": node rank out of range; the job has nodes 0 to " + std::to_string(Agents() - 1));
    } else if (join.local_workers < 0 || join.local_workers > kMaxWorkersPerNode) {
      fail(StatusCode::kInvalidArgument,
           who + ": " + std::to_string(join.local_workers) + " local workers is out of range");
    } else if (!config_.run_id.empty() && !join.run_id.empty() && join.run_id != config_.run_id) {
      fail(StatusCode::kInvalidArgument,
           who + " belongs to run '" + join.run_id + "', but this job is run '" + config_.run_id + "'");
    } else if (join.recovers_in_place != config_.recovery_in_place) {
      fail(StatusCode::kInvalidArgument, RecoveryMismatch(who, join.recovers_in_place));
    } else if (Fenced(join.node_rank)) {
      fail(StatusCode::kAborted, FencedEvent(join.node_rank).root_cause.description);
    } else if (!join.leaving.empty()) {
      // Whatever round it is: the node goes, and the job without it (or not at all).
      fail(StatusCode::kAborted, who + " left the job: " + join.leaving);
      LoseNode(join.node_rank, "it left the job: " + join.leaving, completions);
    } else if (state_ == JobState::kStopped && exit_code_ == kFencedExitCode && root_cause_ &&
               root_cause_->node_rank == join.node_rank) {
      fail(StatusCode::kAborted, root_cause_->description);  // the host fenced itself: it leaves as fenced
    } else if (state_ == JobState::kStopped || state_ == JobState::kSucceeded) {
      fail(StatusCode::kAborted,
           who + " joined after the job ended" +
               (root_cause_ ? " (root cause: " + DescribeFailure(*root_cause_) + ")" : std::string()));
    } else if (arrival.restart_round != round_) {
      fail(StatusCode::kFailedPrecondition, who + " joined round " + std::to_string(join.restart_round) +
                                                " but the job is in round " + std::to_string(round_));
    } else if (arriving && state_ == JobState::kRunning) {
      // The epoch runs without it: a spare until a later epoch seats it.
      nodes_[static_cast<size_t>(join.node_rank)].join = arrival;
      nodes_[static_cast<size_t>(join.node_rank)].replicates = join.replicates;
      completions.push_back(
          [done = std::move(done), a = AssignmentOf(join.node_rank)] { done(Status::Ok(), a); });
    } else if (state_ != JobState::kRendezvous) {
      fail(StatusCode::kAlreadyExists, who + " joined twice in round " + std::to_string(round_) +
                                           "; rendezvous of this round is already complete");
    } else {
      NodeState& node = nodes_[static_cast<size_t>(join.node_rank)];
      if (node.join) {
        fail(StatusCode::kAlreadyExists, who + " joined twice; it first joined from host '" +
                                             node.join->name() +
                                             "'; are two distrun processes given the "
                                             "same node rank?");
      } else {
        node.join = arrival;
        node.host = join.name();
        node.replicates = join.replicates;
        node.join_done = std::move(done);
        if (!node.stream) SetHeartbeatDeadline(node);
        // Counted, not scanned: a scan per join is quadratic in the node count.
        ++joined_;
        CompleteIfAllJoined(completions);
      }
    }
  }
  Run(completions);
}

void CoordinationService::CompleteRendezvous(Completions& completions) {
  if (config_.elastic && config_.agents_share_hosts && !grouped_) {
    // Per-task jobs: the agents on one host are one node, for the range, the seats and the losses.
    grouped_ = true;
    std::map<std::string, int> node_of_host;
    std::vector<int> node_of;
    for (const NodeState& n : nodes_) {
      node_of.push_back(
          node_of_host.emplace(n.join->name(), static_cast<int>(node_of_host.size())).first->second);
    }
    try {
      membership_.SetGroups(node_of);
    } catch (const std::invalid_argument& e) {
      FailedWorker f;
      f.description = std::string(e.what()) + " (--nnodes counts hosts in a per-task job)";
      f.exit_code = kLostAgentExitCode;
      FailRendezvous({StatusCode::kInvalidArgument, f.description}, completions);
      StopJob(f, completions);
      return;
    }
  }
  // The epoch's world in seat order; spares (and lost nodes) hold no seat.
  const int world = membership_.world_agents();
  int64_t offset = 0;
  std::string process0_host;
  for (int seat = 0; seat < world; ++seat) {
    const NodeState& n = nodes_[static_cast<size_t>(membership_.agent_in_seat(seat))];
    if (process0_host.empty() && n.join->local_workers > 0) process0_host = n.join->host;
    offset += n.join->local_workers;
  }
  if (offset > std::numeric_limits<int>::max()) {
    FailRendezvous({StatusCode::kInvalidArgument, "the job has more than 2^31 workers"}, completions);
    return;
  }
  const int num_processes = static_cast<int>(offset);
  // The service's host is in every epoch: its ports are the job's.
  const NodeJoin& first = *nodes_[static_cast<size_t>(config_.host_agent)].join;
  NodeAssignment common;
  common.num_processes = num_processes;
  common.num_nodes = membership_.world_nodes();
  common.process0_host = process0_host.empty() ? first.host : process0_host;
  common.master_port = first.proposed_master_port;
  common.jax_port = first.proposed_jax_port;
  common.run_id = config_.run_id.empty() ? first.run_id : config_.run_id;
  common.restart_round = round_;
  common.worker_token = config_.worker_token;
  if (config_.elastic) {
    common.standby_agent =
        ChooseStandby(membership_, config_.host_agent, [this](int agent) { return HostOf(agent); });
    if (common.standby_agent) {
      const std::optional<NodeJoin>& j = nodes_[static_cast<size_t>(*common.standby_agent)].join;
      if (j) common.standby_address = j->standby_address;
    }
  }
  assignments_.clear();
  offset = 0;
  int node_rank = -1;
  for (int seat = 0, last_node = -1; seat < world; ++seat) {
    const int agent = membership_.agent_in_seat(seat);
    const int node = membership_.node_of(agent);
    if (node != last_node) ++node_rank;
    last_node = node;
    NodeAssignment a = common;
    a.rank_offset = static_cast<int>(offset);
    a.node_rank = node_rank;
    offset += nodes_[static_cast<size_t>(agent)].join->local_workers;
    assignments_.push_back(a);
  }
  if (config_.recovery_in_place) ChangeWorld();
  RecoveryAgreed(assignments_.empty() ? WorldChange{} : assignments_.front().change);
  state_ = JobState::kRunning;
  EpochBegan();
  if (common.standby_agent != standby_) {
    // A new standby starts from a snapshot; what the old one acknowledged no longer holds anything back.
    ReleaseHeldWrites(completions);
    standby_ = common.standby_agent;
  }
  ReplicateState(completions);
  for (int agent = 0; agent < Agents(); ++agent) {
    NodeState& n = nodes_[static_cast<size_t>(agent)];
    if (!n.join_done) continue;
    completions.push_back(
        [done = std::move(n.join_done), a = AssignmentOf(agent)] { done(Status::Ok(), a); });
    n.join_done = nullptr;
  }
}

void CoordinationService::CompleteIfAllJoined(Completions& completions) {
  if (joined_ != membership_.live_agents() || Now() < hold_epoch_until_) return;  // Tick comes back to it
  CompleteRendezvous(completions);
}

void CoordinationService::FailRendezvous(const Status& status, Completions& completions) {
  for (NodeState& n : nodes_) {
    if (n.join_done) {
      completions.push_back([done = std::move(n.join_done), status] { done(status, {}); });
      n.join_done = nullptr;
    }
  }
}

// ---- liveness and failures ----

Status CoordinationService::AttachAgent(int node_rank, EventSink sink, uint64_t* stream_id) {
  std::lock_guard lock(mu_);
  if (shut_down_) return {StatusCode::kUnavailable, "the coordination service is shutting down"};
  if (node_rank < 0 || node_rank >= Agents()) {
    return {StatusCode::kInvalidArgument, "node " + std::to_string(node_rank) +
                                              " opened a liveness stream, but the job has nodes 0 to " +
                                              std::to_string(Agents() - 1)};
  }
  NodeState& node = nodes_[static_cast<size_t>(node_rank)];
  if (node.stream) {
    return {StatusCode::kAlreadyExists,
            NodeName(node_rank) +
                " opened a second liveness stream; are two distrun processes given the same "
                "node rank?"};
  }
  uint64_t id = next_id_++;
  node.stream = id;
  SetHeartbeatDeadline(node);
  node.heard_well = Now();
  node.heard_poorly.reset();
  node.retransmitted.reset();
  node.lossy.reset();
  streams_[id] = node_rank;
  if (election_) election_->Reached(node_rank);  // a vote for the standby's takeover (or nothing)
  if (Fenced(node_rank)) {
    sink(FencedEvent(node_rank));  // it may have been away (frozen, partitioned) while the job went on
  } else if (final_event_) {
    sink(*final_event_);
  } else if (restart_event_ && state_ == JobState::kRendezvous && !node.join) {
    // A node may join before its stream is attached (an agent sends both at once): one that missed the
    // restart broadcast in between hears it now, and joins the new round.
    sink(*restart_event_);
  }
  sinks_[id] = std::move(sink);
  *stream_id = id;
  return Status::Ok();
}

void CoordinationService::Heartbeat(uint64_t stream_id, std::chrono::milliseconds unanswered,
                                    uint32_t retransmitted, std::chrono::microseconds round_trip) {
  std::lock_guard lock(mu_);
  auto it = streams_.find(stream_id);
  if (it == streams_.end()) return;
  if (Fenced(it->second)) {
    sinks_[stream_id](FencedEvent(it->second));
    return;
  }
  // Later than the deadline it replaces, so the earliest deadline stays a lower bound.
  NodeState& node = nodes_[static_cast<size_t>(it->second)];
  const Clock::time_point now = Now();
  node.heartbeat_deadline = now + config_.heartbeat_timeout;
  if (unanswered * 2 < config_.heartbeat_timeout) node.heard_well = now;
  if (unanswered * 5 >= config_.heartbeat_timeout * 2) node.heard_poorly = now;
  if (retransmitted > 0) {
    if (retransmitted > 1 || (node.retransmitted && now - *node.retransmitted <= config_.heartbeat_timeout))
      node.lossy = now;
    node.retransmitted = now;
  }
  if (round_trip.count() > 0) node.round_trips.Add(round_trip);
  sinks_[stream_id](JobEvent{});
}

void CoordinationService::DetachAgent(uint64_t stream_id) {
  Completions completions;
  {
    std::lock_guard lock(mu_);
    auto it = streams_.find(stream_id);
    if (it == streams_.end()) return;
    int node_rank = it->second;
    streams_.erase(it);
    sinks_.erase(stream_id);
    NodeState& node = nodes_[static_cast<size_t>(node_rank)];
    node.stream.reset();
    node.heartbeat_deadline.reset();
    if (election_) {
      election_->Lost(node_rank);  // before the decision: it neither votes nor takes a seat
    } else if (!node.succeeded) {
      LoseNode(node_rank, "its distrun disconnected", completions);
    }
  }
  Run(completions);
}

void CoordinationService::Broadcast(const JobEvent& event) {
  for (auto& [id, sink] : sinks_) {
    if (!Fenced(streams_.at(id))) sink(event);
  }
}

void CoordinationService::StopJob(const FailedWorker& failure, Completions& completions,
                                  bool coordinator_lost, StopAudience audience) {
  held_failure_.reset();
  root_cause_ = failure;
  JobEvent event;
  event.kind = JobEvent::Kind::kStop;
  event.exit_code = failure.exit_code;
  event.root_cause = failure;
  event.coordinator_lost = coordinator_lost;
  state_ = JobState::kStopped;
  exit_code_ = failure.exit_code;
  EpochEnded("stopped: " + DescribeFailure(failure));
  if (audience == StopAudience::kEveryone) final_event_ = event;
  ReleaseHeldWrites(completions);  // they are applied: nothing more will hold them
  Status aborted{StatusCode::kAborted, "the job stopped after " + DescribeFailure(failure)};
  FailRendezvous(aborted, completions);
  FailAllWaits(aborted, completions);
  if (audience == StopAudience::kEveryone) {
    Broadcast(event);
  } else if (const NodeState& host = nodes_[static_cast<size_t>(config_.host_agent)]; host.stream) {
    sinks_[*host.stream](event);
  }
}

void CoordinationService::RecordFailure(const FailedWorker& failure, bool allow_restart,
                                        Completions& completions) {
  root_cause_ = failure;
  if (allow_restart && restarts_ < config_.max_restarts) {
    ++restarts_;
    JobEvent event;
    event.kind = JobEvent::Kind::kRestart;
    event.root_cause = failure;
    BeginEpoch(event, completions);
    return;
  }
  StopJob(failure, completions);
}

Status CoordinationService::ReportFailure(int restart_round, const FailedWorker& failure, bool* root_cause) {
  *root_cause = false;
  Completions completions;
  {
    std::lock_guard lock(mu_);
    if (failure.node_rank < 0 || failure.node_rank >= Agents()) {
      return {StatusCode::kInvalidArgument, "failure report from node " + std::to_string(failure.node_rank) +
                                                ", but the job has nodes 0 to " +
                                                std::to_string(Agents() - 1)};
    }
    // Reports of an earlier round, or after the end, are echoes of the root cause's teardown; a fenced
    // node's are of a world that went on without it.
    if (restart_round != round_ || state_ == JobState::kStopped || state_ == JobState::kSucceeded ||
        Fenced(failure.node_rank)) {
      return Status::Ok();
    }
    if (held_failure_) return Status::Ok();  // the first report of the epoch is the root cause
    *root_cause = true;
    if (config_.elastic && config_.failure_hold.count() > 0) {
      held_failure_ = HeldFailure{failure, Now()};  // Tick acts on it, unless a node is lost
      return Status::Ok();
    }
    RecordFailure(failure, /*allow_restart=*/true, completions);
  }
  Run(completions);
  return Status::Ok();
}

Status CoordinationService::ReportSuccess(int node_rank, int restart_round) {
  std::lock_guard lock(mu_);
  if (node_rank < 0 || node_rank >= Agents()) {
    return {StatusCode::kInvalidArgument, "success report from node " + std::to_string(node_rank) +
                                              ", but the job has nodes 0 to " + std::to_string(Agents() - 1)};
  }
  if (restart_round != round_ || state_ != JobState::kRunning) return Status::Ok();
  // Spares run no workers, and a fenced node's workers were of an earlier epoch.
  if (!membership_.seat(node_rank)) return Status::Ok();
  NodeState& node = nodes_[static_cast<size_t>(node_rank)];
  if (!node.succeeded) {
    node.succeeded = true;
    ++succeeded_;
  }
  if (succeeded_ == membership_.world_agents()) {
    state_ = JobState::kSucceeded;
    exit_code_ = 0;
    EpochEnded("succeeded");
    JobEvent event;
    event.kind = JobEvent::Kind::kComplete;
    final_event_ = event;
    Broadcast(event);
  }
  return Status::Ok();
}

// ---- key-value store ----

Status CoordinationService::ValidateKey(const std::string& key) const {
  if (key.empty()) return {StatusCode::kInvalidArgument, "empty key"};
  if (key.size() > config_.max_key_bytes) {
    return {StatusCode::kInvalidArgument, "key of " + std::to_string(key.size()) + " bytes is longer than " +
                                              std::to_string(config_.max_key_bytes) + " bytes"};
  }
  return Status::Ok();
}

Status CoordinationService::StoreValue(const std::string& key, const std::string& value,
                                       Completions& completions) {
  if (value.size() > config_.max_value_bytes) {
    return {StatusCode::kInvalidArgument, "value of " + std::to_string(value.size()) + " bytes for key '" +
                                              key + "' is larger than " +
                                              std::to_string(config_.max_value_bytes) + " bytes"};
  }
  auto it = store_.find(key);
  size_t old_bytes = it == store_.end() ? 0 : key.size() + it->second.size();
  size_t new_total = store_bytes_ - old_bytes + key.size() + value.size();
  const bool job_key = IsJobKey(key);
  const size_t new_job_total = job_key ? job_key_bytes_ - old_bytes + key.size() + value.size() : 0;
  if (job_key && new_job_total > config_.max_job_key_bytes) {
    return {StatusCode::kResourceExhausted,
            "the job's keys (" + std::string(kJobKeyPrefix) + "...) are full (" +
                std::to_string(config_.max_job_key_bytes) +
                " bytes together); keep large values elsewhere (a file) and their path here"};
  }
  if (new_total > config_.max_store_bytes) {
    return {StatusCode::kResourceExhausted, "the key-value store is full (" +
                                                std::to_string(config_.max_store_bytes) +
                                                " bytes); delete keys that are no longer needed"};
  }
  store_[key] = value;
  store_bytes_ = new_total;
  if (job_key) job_key_bytes_ = new_job_total;
  auto waiters = kv_waiters_.find(key);
  if (waiters != kv_waiters_.end()) {
    for (KvWaiter& w : waiters->second) {
      completions.push_back([done = std::move(w.done), value] { done(Status::Ok(), value); });
    }
    kv_waiters_.erase(waiters);
  }
  return Status::Ok();
}

Status CoordinationService::KvSet(const std::string& key, const std::string& value, Done on_held) {
  Completions completions;
  Status status;
  {
    std::lock_guard lock(mu_);
    status = ValidateKey(key);
    if (status.ok()) status = StoreValue(key, value, completions);
    if (status.ok()) WriteThrough(key, value, std::move(on_held), completions);
  }
  Run(completions);
  return status;
}

void CoordinationService::KvGet(const std::string& key, std::chrono::milliseconds timeout, ValueDone done) {
  Completions completions;
  {
    std::lock_guard lock(mu_);
    Status status = ValidateKey(key);
    if (status.ok() && shut_down_)
      status = {StatusCode::kUnavailable, "the coordination service is shutting down"};
    if (status.ok() && timeout.count() <= 0) {
      status = {StatusCode::kInvalidArgument, "waiting for key '" + key + "' needs a positive timeout"};
    }
    auto it = store_.find(key);
    if (!status.ok()) {
      completions.push_back([done = std::move(done), status] { done(status, {}); });
    } else if (it != store_.end()) {
      completions.push_back([done = std::move(done), value = it->second] { done(Status::Ok(), value); });
    } else {
      auto deadline = Now() + std::min(timeout, config_.max_wait);
      earliest_kv_deadline_ = std::min(earliest_kv_deadline_, deadline);
      kv_waiters_[key].push_back(KvWaiter{next_id_++, deadline, std::move(done)});
    }
  }
  Run(completions);
}

Status CoordinationService::KvTryGet(const std::string& key, std::optional<std::string>* value) {
  std::lock_guard lock(mu_);
  Status status = ValidateKey(key);
  if (!status.ok()) return status;
  auto it = store_.find(key);
  if (it == store_.end()) {
    value->reset();
  } else {
    *value = it->second;
  }
  return Status::Ok();
}

Status CoordinationService::KvAdd(const std::string& key, int64_t delta, int64_t* value, Done on_held) {
  Completions completions;
  Status status;
  {
    std::lock_guard lock(mu_);
    status = ValidateKey(key);
    if (status.ok()) {
      int64_t current = 0;
      auto it = store_.find(key);
      if (it != store_.end()) {
        std::optional<int64_t> parsed = ParseInt64(it->second);
        if (!parsed) {
          status = {StatusCode::kFailedPrecondition,
                    "key '" + key + "' holds a value that is not a decimal integer; Add needs one"};
        } else {
          current = *parsed;
        }
      }
      int64_t result = 0;
      if (status.ok() && __builtin_add_overflow(current, delta, &result)) {
        status = {StatusCode::kOutOfRange, "adding " + std::to_string(delta) + " to key '" + key + "' (" +
                                               std::to_string(current) + ") overflows int64"};
      }
      if (status.ok()) status = StoreValue(key, std::to_string(result), completions);
      if (status.ok()) {
        *value = result;
        WriteThrough(key, std::to_string(result), std::move(on_held), completions);
      }
    }
  }
  Run(completions);
  return status;
}

Status CoordinationService::KvCompareAndSet(const std::string& key,
                                            const std::optional<std::string>& expected,
                                            const std::string& desired, CasResult* result, Done on_held) {
  Completions completions;
  Status status;
  {
    std::lock_guard lock(mu_);
    status = ValidateKey(key);
    if (status.ok()) {
      auto it = store_.find(key);
      result->found = it != store_.end();
      result->current = result->found ? it->second : std::string();
      bool match = expected ? (result->found && it->second == *expected) : !result->found;
      result->swapped = false;
      if (match) {
        status = StoreValue(key, desired, completions);
        result->swapped = status.ok();
      }
      if (status.ok()) {
        std::optional<std::string> written;
        if (result->swapped) written = desired;
        // Nothing written: nothing to hold (an unchanged key is passed as an epoch's, at once).
        WriteThrough(result->swapped ? key : std::string(), written, std::move(on_held), completions);
      }
    }
  }
  Run(completions);
  return status;
}

Status CoordinationService::KvDelete(const std::string& key, bool* deleted, Done on_held) {
  Completions completions;
  Status status;
  {
    std::lock_guard lock(mu_);
    status = ValidateKey(key);
    if (status.ok()) {
      auto it = store_.find(key);
      *deleted = it != store_.end();
      if (*deleted) {
        store_bytes_ -= it->first.size() + it->second.size();
        if (IsJobKey(key)) job_key_bytes_ -= it->first.size() + it->second.size();
        store_.erase(it);
      }
      WriteThrough(*deleted ? key : std::string(), std::nullopt, std::move(on_held), completions);
    }
  }
  Run(completions);
  return status;
}

Status CoordinationService::KvList(const std::string& prefix,
                                   std::vector<std::pair<std::string, std::string>>* entries) {
  std::lock_guard lock(mu_);
  if (prefix.size() > config_.max_key_bytes) {
    return {StatusCode::kInvalidArgument, "prefix of " + std::to_string(prefix.size()) +
                                              " bytes is longer than " +
                                              std::to_string(config_.max_key_bytes) + " bytes"};
  }
  entries->clear();
  for (auto it = store_.lower_bound(prefix); it != store_.end() && it->first.starts_with(prefix); ++it) {
    entries->emplace_back(it->first, it->second);
  }
  return Status::Ok();
}

// ---- barriers ----

void CoordinationService::Barrier(const std::string& name, int process_id, int count,
                                  std::chrono::milliseconds timeout, Done done) {
  Completions completions;
  auto fail = [&](StatusCode code, std::string message) {
    completions.push_back([done = std::move(done), s = Status{code, std::move(message)}] { done(s); });
  };
  {
    std::lock_guard lock(mu_);
    const std::string who = "rank " + std::to_string(process_id);
    Status key = ValidateKey(name);
    int num_processes = assignments_.empty() ? 0 : assignments_.front().num_processes;
    if (!key.ok()) {
      fail(key.code, "barrier name: " + key.message);
    } else if (shut_down_) {
      fail(StatusCode::kUnavailable, "the coordination service is shutting down");
    } else if (timeout.count() <= 0) {
      fail(StatusCode::kInvalidArgument, who + " waits at barrier '" + name + "' without a positive timeout");
    } else if (count < 0) {
      fail(StatusCode::kInvalidArgument, who + " gave barrier '" + name + "' a negative count");
    } else if (count == 0 && state_ != JobState::kRunning) {
      fail(StatusCode::kFailedPrecondition,
           who + " waits at barrier '" + name + "' over all workers, but rendezvous is not complete");
    } else if (process_id < 0 || (count == 0 && process_id >= num_processes)) {
      fail(StatusCode::kInvalidArgument, who + " is not a worker of this job (" +
                                             std::to_string(num_processes) +
                                             " workers) and cannot wait at barrier '" + name + "'");
    } else {
      int wanted = count == 0 ? num_processes : count;
      auto [it, created] = barriers_.try_emplace(name);
      BarrierState& b = it->second;
      if (created) {
        b.count = wanted;
        b.all_workers = count == 0;
        b.first_process = process_id;
      }
      if (b.count != wanted) {
        fail(StatusCode::kInvalidArgument, who + " arrived at barrier '" + name + "' expecting " +
                                               std::to_string(wanted) + " participants, but rank " +
                                               std::to_string(b.first_process) + " expects " +
                                               std::to_string(b.count));
      } else if (b.arrived.count(process_id)) {
        fail(StatusCode::kAlreadyExists, who + " arrived twice at barrier '" + name + "'");
      } else {
        auto deadline = Now() + std::min(timeout, config_.max_wait);
        b.earliest_deadline = std::min(b.earliest_deadline, deadline);
        b.arrived[process_id] = BarrierWaiter{deadline, std::move(done)};
        if (static_cast<int>(b.arrived.size()) >= b.count) {
          for (auto& [id, w] : b.arrived) completions.push_back([d = std::move(w.done)] { d(Status::Ok()); });
          barriers_.erase(it);  // the name can be used again
        }
      }
    }
  }
  Run(completions);
}

// ---- time and shutdown ----

void CoordinationService::FailAllWaits(const Status& status, Completions& completions) {
  for (auto& [key, waiters] : kv_waiters_) {
    for (KvWaiter& w : waiters)
      completions.push_back([done = std::move(w.done), status] { done(status, {}); });
  }
  kv_waiters_.clear();
  for (auto& [name, b] : barriers_) {
    for (auto& [id, w] : b.arrived)
      completions.push_back([done = std::move(w.done), status] { done(status); });
  }
  barriers_.clear();
}

void CoordinationService::Tick() {
  Completions completions;
  {
    std::lock_guard lock(mu_);
    const auto now = Now();
    // A standby's service before its decision holds no epoch to watch: only the election's window runs.
    if (election_ && Elect(now, completions)) return;
    if (state_ == JobState::kRendezvous && now >= round_deadline_) {
      std::string message = "rendezvous timed out after " + FormatSeconds(config_.initialization_timeout) +
                            " (--initialization-timeout): " + std::to_string(joined_) + " of " +
                            std::to_string(membership_.live_agents()) +
                            " nodes joined; missing: " + MissingNodes();
      FailedWorker f;
      f.node_rank = -1;
      for (int i = 0; i < Agents() && f.node_rank < 0; ++i) {
        if (!nodes_[static_cast<size_t>(i)].join && !membership_.lost(i)) f.node_rank = i;
      }
      f.host = HostOf(f.node_rank);
      f.description = message;
      FailRendezvous({StatusCode::kDeadlineExceeded, message}, completions);
      root_cause_ = f;
      exit_code_ = f.exit_code;
      state_ = JobState::kStopped;
      JobEvent event;
      event.kind = JobEvent::Kind::kStop;
      event.exit_code = f.exit_code;
      event.root_cause = f;
      final_event_ = event;
      FailAllWaits({StatusCode::kAborted, message}, completions);
      Broadcast(event);
    }
    if (grow_at_ && now >= *grow_at_) GrowWorld(completions);
    if (state_ == JobState::kRendezvous) CompleteIfAllJoined(completions);  // a held epoch's time came
    if (held_failure_ && state_ == JobState::kRunning && HeldFailureIsDue(now)) {
      FailedWorker f = std::move(held_failure_->failure);
      held_failure_.reset();
      RecordFailure(f, /*allow_restart=*/true, completions);
    }
    if (config_.freeze_grace.count() > 0 && last_tick_ && now - *last_tick_ > config_.heartbeat_timeout / 2) {
      for (NodeState& n : nodes_) {
        if (n.heartbeat_deadline)
          n.heartbeat_deadline = std::max(*n.heartbeat_deadline, now + config_.freeze_grace);
      }
      earliest_heartbeat_deadline_ = std::max(earliest_heartbeat_deadline_, now + config_.freeze_grace);
    }
    last_tick_ = now;
    // Scans run only once the earliest deadline passed: a scan every tick costs O(nodes) under the lock.
    if (now >= earliest_heartbeat_deadline_) {
      earliest_heartbeat_deadline_ = Clock::time_point::max();
      for (int i = 0; i < Agents(); ++i) {
        NodeState& n = nodes_[static_cast<size_t>(i)];
        if (!n.heartbeat_deadline || n.succeeded) continue;
        if (now >= *n.heartbeat_deadline) {
          n.heartbeat_deadline.reset();
          LoseNode(i,
                   "no heartbeat for " + FormatSeconds(config_.heartbeat_timeout) + " (--heartbeat-timeout)",
                   completions, /*silent=*/true);
        } else {
          earliest_heartbeat_deadline_ = std::min(earliest_heartbeat_deadline_, *n.heartbeat_deadline);
        }
      }
    }
    if (now >= earliest_kv_deadline_) ExpireKvWaits(now, completions);
    WatchProgress(now, completions);
    ExpireRecoveries(now);
    for (auto it = barriers_.begin(); it != barriers_.end();) {
      BarrierState& b = it->second;
      if (now < b.earliest_deadline) {
        ++it;
        continue;
      }
      std::string message = "barrier '" + it->first + "' timed out: " + std::to_string(b.arrived.size()) +
                            " of " + std::to_string(b.count) + " arrived";
      if (b.all_workers) {
        // Names only as many as the message shows; the rest is a count.
        std::vector<std::string> missing;
        size_t missing_count = static_cast<size_t>(b.count) - b.arrived.size();
        for (int p = 0; p < b.count && missing.size() < kMaxNamesInMessage; ++p) {
          if (!b.arrived.count(p)) missing.push_back(WorkerName(p));
        }
        message += "; missing: " + JoinNames(missing, missing_count);
      }
      // A barrier fails for everyone at once, so no participant passes it while another gave up.
      for (auto& [id, w] : b.arrived) {
        completions.push_back(
            [done = std::move(w.done), s = Status{StatusCode::kDeadlineExceeded, message}] { done(s); });
      }
      it = barriers_.erase(it);
    }
  }
  Run(completions);
}

void CoordinationService::ExpireKvWaits(Clock::time_point now, Completions& completions) {
  earliest_kv_deadline_ = Clock::time_point::max();
  for (auto it = kv_waiters_.begin(); it != kv_waiters_.end();) {
    auto& waiters = it->second;
    for (auto w = waiters.begin(); w != waiters.end();) {
      if (now >= w->deadline) {
        completions.push_back([done = std::move(w->done), key = it->first] {
          done({StatusCode::kDeadlineExceeded, "key '" + key + "' was not set before the timeout"}, {});
        });
        w = waiters.erase(w);
      } else {
        earliest_kv_deadline_ = std::min(earliest_kv_deadline_, w->deadline);
        ++w;
      }
    }
    it = waiters.empty() ? kv_waiters_.erase(it) : std::next(it);
  }
}

void CoordinationService::Shutdown() {
  Completions completions;
  {
    std::lock_guard lock(mu_);
    if (shut_down_) return;
    shut_down_ = true;
    Status unavailable{StatusCode::kUnavailable, "the coordination service is shutting down"};
    FailRendezvous(unavailable, completions);
    FailAllWaits(unavailable, completions);
    while (!stack_requests_.empty()) FinishStackRequest(stack_requests_.begin()->first, completions);
    ReleaseHeldWrites(completions);
  }
  Run(completions);
}

JobState CoordinationService::State() const {
  std::lock_guard lock(mu_);
  return state_;
}

int CoordinationService::CurrentRound() const { return round_.load(); }

std::optional<int> CoordinationService::ExitCode() const {
  std::lock_guard lock(mu_);
  return exit_code_;
}

std::optional<FailedWorker> CoordinationService::RootCause() const {
  std::lock_guard lock(mu_);
  return root_cause_;
}

}  // namespace distrun
