#include "runtime/agent/agent.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "detect/parse.h"
#include "runtime/service/message_text.h"

namespace distrun {
namespace {

// The service answers a join by the initialization timeout; this much longer the agent waits for the answer
// to travel before it gives up on its own.
constexpr std::chrono::seconds kJoinAnswerMargin{5};

}  // namespace

// How often an agent says it is alive: five times per timeout, at most once a second, and in big jobs
// less often so that the coordinator answers about 2,000 a second in all (each cost it ≈ 50 µs of CPU over
// gRPC, ≈ 15 µs on the agent channel: bench/RESULTS.md), but never less than three times per timeout.
std::chrono::milliseconds HeartbeatInterval(std::chrono::milliseconds timeout, int num_nodes) {
  using std::chrono::milliseconds;
  milliseconds interval = std::clamp(timeout / 5, milliseconds(50), milliseconds(1000));
  interval = std::max(interval, milliseconds(num_nodes / 2));  // num_nodes / 2,000 per second
  return std::min(interval, timeout / 3);
}

Agent::Agent(AgentConfig config)
    : config_(std::move(config)),
      started_(std::chrono::steady_clock::now()),
      coordinator_address_(config_.coordinator_address),
      agent_number_(config_.join.node_rank) {
  event_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (event_fd_ < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
  config_.join.replicates = true;  // as the epoch's standby, this node keeps a copy of the job (Push)
  // The stream's first message joins round 0: rendezvous costs the coordinator no call of its own.
  NodeJoin first_join = config_.join;
  first_join.restart_round = 0;
  stream_ = OpenStream(0, nullptr, first_join);
  heartbeat_ = std::thread([this] { HeartbeatLoop(); });
}

std::shared_ptr<AgentStream> Agent::OpenStream(uint64_t generation, const FailoverTarget* target,
                                               const std::optional<NodeJoin>& first_join) {
  auto on_event = [this](const JobEvent& e) { Push(e); };
  auto on_closed = [this, generation](const Status& s) {
    {
      std::lock_guard lock(mu_);
      if (generation != generation_) return;  // a stream the agent has left behind
      lost_reason_ = s.message.empty() ? StatusCodeName(s.code) : s.message;
      // With somewhere to turn, the stream's end is not this node's: a join waits for the failover.
      if (!config_.on_coordinator_lost || ended_ || closing_) stream_closed_ = true;
    }
    CoordinatorLost(
        "the liveness stream ended (" + std::string(StatusCodeName(s.code)) + ": " + s.message + ")",
        generation);
  };
  CoordinationService* in_process = target ? target->in_process_service : config_.in_process_service;
  if (in_process != nullptr) {
    return std::make_shared<InProcessStream>(*in_process, target ? agent_number_ : config_.join.node_rank,
                                             on_event, on_closed, first_join);
  }
  AgentChannelOptions o;
  o.address = target ? target->address : config_.coordinator_address;
  o.token = config_.token;
  o.credential = target ? target->credential : config_.credential;
  o.node_rank = target ? agent_number_ : config_.join.node_rank;
  o.first_join = first_join;
  return std::make_shared<AgentChannel>(std::move(o), on_event, on_closed);
}

std::shared_ptr<AgentStream> Agent::Stream() const {
  std::lock_guard lock(stream_mu_);
  return stream_;
}

std::string Agent::coordinator_address() const {
  std::string connected = Stream()->connected_address();
  std::lock_guard lock(mu_);
  return connected.empty() ? coordinator_address_ : connected;
}

Agent::~Agent() {
  {
    std::lock_guard lock(mu_);
    closing_ = true;
  }
  cv_.notify_all();
  Stream()->Close();  // first: it may hold the heartbeat thread in a write
  heartbeat_.join();
  std::lock_guard lock(stream_mu_);
  stream_->Close();  // a failover may have opened another meanwhile
  stream_.reset();
  ::close(event_fd_);
}

void Agent::Leave(int restart_round, const std::string& reason) {
  NodeJoin join;
  {
    std::lock_guard lock(mu_);
    join_answer_.reset();
    join = config_.join;
  }
  join.restart_round = restart_round;
  join.leaving = reason;
  Stream()->SendJoin(join);
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, kJoinAnswerMargin, [this] { return join_answer_ || stream_closed_ || closing_; });
}

Status Agent::Join(int restart_round, NodeAssignment* assignment, std::optional<ProposedPorts> ports,
                   const std::vector<int>& fresh_local) {
  // Round 0's join went with the stream's first message; a later round's goes now. The answer comes back
  // on the stream (Push). The service answers every join: rendezvous completes, fails or times out.
  uint64_t generation = 0;  // of the stream the join goes on
  if (restart_round != 0) {
    NodeJoin join;
    {
      std::lock_guard lock(mu_);
      join_answer_.reset();
      join = config_.join;
      generation = generation_;
    }
    join.restart_round = restart_round;
    join.fresh_local = fresh_local;
    if (ports) {
      join.proposed_master_port = ports->master_port;
      join.proposed_jax_port = ports->jax_port;
    }
    Stream()->SendJoin(join);
  }
  std::unique_lock lock(mu_);
  join_cancelled_ = false;
  const auto deadline = std::chrono::steady_clock::now() + config_.initialization_timeout + kJoinAnswerMargin;
  int joining = restart_round;
  // A failover during the join, and the standby's restart since: the join went to the lost coordinator.
  auto moved_on = [&] { return generation_ != generation && restart_seen_ > joining; };
  while (true) {
    cv_.wait_until(lock, deadline, [&] {
      return join_answer_ || stream_closed_ || closing_ || join_cancelled_ || moved_on();
    });
    if (join_answer_ || stream_closed_ || closing_ || join_cancelled_ || !moved_on()) break;
    // The coordinator was lost while this node joined, and its standby took over with a later round (its
    // restart broadcast): the join went to the lost one, so join that round instead.
    joining = restart_seen_;
    NodeJoin join = config_.join;
    join.restart_round = joining;
    join.fresh_local = fresh_local;
    lock.unlock();
    Stream()->SendJoin(join);
    lock.lock();
  }
  if (!join_answer_ && join_cancelled_)
    return {StatusCode::kCancelled, "this node gave up on the rendezvous"};
  if (!join_answer_) {
    // Lost after a failover (the standby's host too, say): the join names both losses, as the stop does.
    if (!stopped_after_failover_.empty()) return {StatusCode::kUnavailable, stopped_after_failover_};
    return {StatusCode::kUnavailable,
            lost_reason_.empty()
                ? "no answer from the distrun runtime at " + coordinator_address_ +
                      " within the initialization timeout"
                : "cannot join the distrun runtime at " + coordinator_address_ + ": " + lost_reason_};
  }
  const JobEvent answer = *join_answer_;
  if (!answer.join_status.ok()) return answer.join_status;
  *assignment = answer.assignment;
  // An arrival joined whatever round the job was in; its later joins are ordinary ones.
  round_ = answer.assignment.restart_round;
  config_.join.arriving = false;
  config_.join.claims_seat = false;
  agent_number_ = answer.assignment.agent;
  return Status::Ok();
}

void Agent::CancelJoin() {
  {
    std::lock_guard lock(mu_);
    join_cancelled_ = true;
  }
  cv_.notify_all();
}

Status Agent::ReportFailure(const FailedWorker& failure, bool* root_cause) {
  int round = 0;
  {
    std::lock_guard lock(mu_);
    round = round_;
  }
  return Stream()->ReportFailure(round, failure, root_cause);
}

Status Agent::ReportSuccess() {
  int round = 0;
  {
    std::lock_guard lock(mu_);
    round = round_;
  }
  // On the liveness stream, unanswered: the job's completion (or stop) comes back on it as an event.
  if (!Stream()->SendSuccess(round)) {
    return {StatusCode::kUnavailable, "the liveness stream to " + coordinator_address() + " has ended"};
  }
  return Status::Ok();
}

namespace {

// The least advanced rank's (step, rank): what the hang watch judges by.
std::pair<int64_t, int> Slowest(const NodeProgress& p) {
  std::pair<int64_t, int> slowest{INT64_MAX, -1};
  for (const RankProgress& r : p.ranks) slowest = std::min(slowest, std::pair<int64_t, int>{r.step, r.rank});
  return slowest;
}

}  // namespace

std::chrono::milliseconds ProgressNewsInterval(std::chrono::milliseconds heartbeat_interval) {
  return std::max<std::chrono::milliseconds>(std::chrono::seconds(1), heartbeat_interval / 2);
}

std::optional<NodeProgress> ProgressToSend(const std::optional<NodeProgress>& progress,
                                           std::chrono::steady_clock::time_point read_at,
                                           std::chrono::steady_clock::time_point now) {
  if (!progress || now - read_at > kProgressFreshFor) return std::nullopt;
  return AgedBy(*progress, std::chrono::duration_cast<std::chrono::milliseconds>(now - read_at).count());
}

void Agent::SetProgress(const NodeProgress& progress) {
  std::lock_guard lock(mu_);
  if (!progress_ || Slowest(*progress_) != Slowest(progress) ||
      progress_->ranks.size() != progress.ranks.size()) {
    progress_news_ = true;
    cv_.notify_all();
  }
  progress_ = progress;
  progress_read_ = std::chrono::steady_clock::now();
}

void Agent::SendStacks(const StacksReply& reply) { Stream()->SendStacks(reply); }

void Agent::Push(const JobEvent& event) {
  std::lock_guard lock(mu_);
  last_answer_ = std::chrono::steady_clock::now();
  grace_ = {};
  if (event.kind == JobEvent::Kind::kHeartbeat) {
    if (beat_out_) {
      round_trip_ =
          std::max(std::chrono::microseconds(1),
                   std::chrono::duration_cast<std::chrono::microseconds>(*last_answer_ - *beat_out_));
      beat_out_.reset();
    }
    return;
  }
  if (event.kind == JobEvent::Kind::kStandby) {
    // This node is the epoch's standby: the coordinator holds a write back until it hears this was applied.
    if (replica_.Apply(*event.standby_update) == StandbyReplica::Result::kNeedSnapshot)
      standby_needs_snapshot_ = true;
    standby_ack_ = true;
    cv_.notify_all();
    return;
  }
  if (event.kind == JobEvent::Kind::kJoined) {
    join_answer_ = event;
    cv_.notify_all();
    return;
  }
  if (event.kind == JobEvent::Kind::kRestart) restart_seen_ = std::max(restart_seen_, event.restart_round);
  // The job's end: nothing more to say, and the stream's end is expected now.
  if (event.kind == JobEvent::Kind::kStop || event.kind == JobEvent::Kind::kComplete) ended_ = true;
  QueueEventLocked(event);
}

void Agent::QueueEventLocked(JobEvent event) {
  events_.push_back(std::move(event));
  uint64_t one = 1;
  // The counter only says "look"; a full counter (never in practice) still reads as readable.
  [[maybe_unused]] ssize_t n = ::write(event_fd_, &one, sizeof one);
  cv_.notify_all();
}

void Agent::CoordinatorLost(const std::string& why, uint64_t generation) {
  std::lock_guard lock(mu_);
  if (ended_ || closing_) return;  // the end of the stream after the job's end is expected
  if (generation != generation_ || failover_why_) return;  // a stream left behind, or turning already
  if (config_.on_coordinator_lost) {
    failover_why_ = why;  // the heartbeat thread asks where to turn: the hook may start a service
    cv_.notify_all();
    return;
  }
  StopForLostCoordinatorLocked(why);
}

void Agent::StopForLostCoordinatorLocked(const std::string& why) {
  ended_ = true;
  JobEvent e;
  e.kind = JobEvent::Kind::kStop;
  e.exit_code = kLostAgentExitCode;
  e.root_cause.node_rank = -1;
  e.root_cause.host = coordinator_address_;
  e.root_cause.description = "lost the coordinator at " + coordinator_address_ + ": " + why;
  if (!failed_over_.empty()) {
    e.root_cause.description += " (its standby, after " + failed_over_ + ")";
    stopped_after_failover_ = e.root_cause.description;  // what a join in progress answers: both losses
  }
  e.coordinator_lost = true;
  QueueEventLocked(std::move(e));
}

void Agent::FailOver(std::unique_lock<std::mutex>& lock) {
  const std::string why = *failover_why_;
  const std::string from = coordinator_address_;
  lock.unlock();
  std::optional<FailoverTarget> target = config_.on_coordinator_lost(why);
  lock.lock();
  failover_why_.reset();
  if (closing_ || ended_) return;
  if (!target) {
    // Nowhere to turn: the job is over for this node, as without a standby. A join in progress ends too,
    // and sees the stop's reason (set under the same lock).
    stream_closed_ = true;
    StopForLostCoordinatorLocked(why);
    lock.unlock();
    Stream()->Close();
    lock.lock();
    return;
  }
  const uint64_t generation = ++generation_;
  coordinator_address_ = target->address;
  failed_over_ = "the coordinator at " + from + " was lost (" + why + ")";
  JobEvent turned;
  turned.kind = JobEvent::Kind::kFailover;
  turned.notice =
      "lost the job's coordinator at " + from + "; its standby at " + target->address + " takes the job over";
  QueueEventLocked(std::move(turned));
  // The standby has two heartbeat timeouts from now to answer (its first answer is the attach's): its port
  // opens only once it has lost the coordinator too.
  last_answer_ = std::chrono::steady_clock::now();
  grace_ = config_.heartbeat_timeout;
  stream_closed_ = false;
  lost_reason_.clear();
  config_.join.node_rank = agent_number_;  // an arrival's number, on the new stream
  config_.join.arriving = false;
  config_.join.claims_seat = false;
  lock.unlock();
  std::shared_ptr<AgentStream> fresh = OpenStream(generation, &*target, std::nullopt);
  std::shared_ptr<AgentStream> old;
  {
    std::lock_guard stream_lock(stream_mu_);
    old = std::exchange(stream_, fresh);
  }
  old->Close();
  old.reset();
  lock.lock();
}

std::vector<JobEvent> Agent::TakeEvents() {
  std::lock_guard lock(mu_);
  uint64_t count = 0;
  [[maybe_unused]] ssize_t n = ::read(event_fd_, &count, sizeof count);
  return std::exchange(events_, {});
}

std::optional<JobEvent> Agent::WaitForEvent(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, timeout, [this] { return !events_.empty(); })) return std::nullopt;
  JobEvent e = events_.front();
  events_.erase(events_.begin());
  if (events_.empty()) {
    uint64_t count = 0;
    [[maybe_unused]] ssize_t n = ::read(event_fd_, &count, sizeof count);
  }
  return e;
}

std::optional<ServiceSnapshot> Agent::StandbyCopy() const {
  std::lock_guard lock(mu_);
  return replica_.copy();
}

void Agent::HeartbeatLoop() {
  std::unique_lock lock(mu_);
  auto last_wake = std::chrono::steady_clock::now();
  auto next_beat = last_wake + config_.heartbeat_interval;
  while (true) {
    // Up at the next heartbeat, and exactly when the coordinator's silence reaches the timeout: a node cut
    // off fences itself when the coordinator gives up on it, not up to an interval later.
    auto wake = next_beat;
    const bool news_planned = progress_news_;
    if (news_planned)
      wake = std::min(wake, progress_sent_ + ProgressNewsInterval(config_.heartbeat_interval));
    if (last_answer_ && !ended_) {
      wake =
          std::min(wake, *last_answer_ + config_.heartbeat_timeout + grace_ + std::chrono::milliseconds(1));
    }
    if (cv_.wait_until(lock, wake, [&] {
          return closing_ || standby_ack_ || failover_why_ || (progress_news_ && !news_planned);
        })) {
      if (closing_) break;
      if (failover_why_) {
        FailOver(lock);
        continue;
      }
      if (standby_ack_) {
        const uint64_t applied = replica_.applied();
        const bool needs_snapshot = standby_needs_snapshot_;
        standby_ack_ = standby_needs_snapshot_ = false;
        lock.unlock();
        Stream()->SendStandbyApplied(applied, needs_snapshot);
        lock.lock();
      }
      continue;  // news of progress: wake at its time instead
    }
    auto now = std::chrono::steady_clock::now();
    const bool beat =
        now >= next_beat ||
        (progress_news_ && now >= progress_sent_ + ProgressNewsInterval(config_.heartbeat_interval));
    if (beat) next_beat = now + config_.heartbeat_interval;
    if (ended_) continue;
    // This loop itself did not run for a whole timeout: this process was frozen (SIGSTOP, a stalled VM),
    // not the coordinator. Ask again before concluding anything: a coordinator that went on without this
    // node answers that it is fenced.
    if (last_answer_ && now - last_wake > config_.heartbeat_timeout) last_answer_ = now;
    last_wake = now;
    std::optional<std::string> lost;
    if (last_answer_ && now - *last_answer_ > config_.heartbeat_timeout + grace_) {
      lost =
          grace_ == std::chrono::steady_clock::duration{}
              ? "no answer for " + FormatSeconds(config_.heartbeat_timeout) + " (--heartbeat-timeout)"
              : "no answer for twice " + FormatSeconds(config_.heartbeat_timeout) + " (--heartbeat-timeout)";
    } else if (!last_answer_ && now - started_ > config_.initialization_timeout) {
      lost =
          "no answer within " + FormatSeconds(config_.initialization_timeout) + " (--initialization-timeout)";
    }
    std::optional<NodeProgress> progress;
    if (beat) {
      progress = ProgressToSend(progress_, progress_read_, now);
      // Sent, or too old to send: either way no news waits (a fresh view that moved brings news again).
      progress_news_ = false;
      if (progress) progress_sent_ = now;
    }
    LinkNews news;
    news.unanswered = std::chrono::duration_cast<std::chrono::milliseconds>(
        last_answer_ ? now - *last_answer_ : std::chrono::steady_clock::duration{});
    if (beat && !lost) {
      news.round_trip = std::exchange(round_trip_, {});
      // One beat out at a time is timed; one unanswered for a whole timeout was lost on the way (a
      // reconnection), and this one is timed instead.
      if (!beat_out_ || now - *beat_out_ > config_.heartbeat_timeout) beat_out_ = now;
    }
    const uint64_t generation = generation_;
    lock.unlock();
    std::shared_ptr<AgentStream> stream = Stream();
    if (lost) {
      CoordinatorLost(*lost, generation);
      if (!config_.on_coordinator_lost) stream->Close();  // else the failover closes it
    } else if (progress) {
      stream->SendProgress(*progress, news);
    } else if (beat) {
      stream->SendHeartbeat(news);
    }
    lock.lock();
  }
}

}  // namespace distrun
