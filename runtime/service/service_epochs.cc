// The coordination service's epochs (DESIGN §4.1): what it does when a node is lost or arrives, how the
// next epoch begins, and how a node the job went on without is fenced. The seats themselves are
// runtime/service/membership.h's; rendezvous, liveness and the store are in service.cc.

#include <algorithm>

#include "detect/parse.h"
#include "runtime/service/message_text.h"
#include "runtime/service/service.h"

namespace distrun {

bool CoordinationService::Fenced(int node_rank) const {
  // Without a range the job ends with the lost node, which hears that end as every node does.
  return config_.elastic && membership_.lost(node_rank);
}

JobEvent CoordinationService::FencedEvent(int node_rank) const {
  JobEvent event;
  event.kind = JobEvent::Kind::kStop;
  event.exit_code = kFencedExitCode;
  event.root_cause.node_rank = node_rank;
  event.root_cause.host = HostOf(node_rank);
  event.root_cause.exit_code = kFencedExitCode;
  int epoch = 0;
  for (auto [lost, in_epoch] : losses_) {
    if (lost == node_rank) epoch = in_epoch;
  }
  event.root_cause.description = kFencedPrefix + ("lost in epoch " + std::to_string(epoch)) +
                                 ", and the job went on without it (now epoch " + std::to_string(round_) +
                                 ")";
  return event;
}

void CoordinationService::LoseNode(int node_rank, const std::string& why, Completions& completions,
                                   bool silent) {
  if (shut_down_ || state_ == JobState::kStopped || state_ == JobState::kSucceeded) return;
  FailedWorker f;
  f.node_rank = node_rank;
  f.host = HostOf(node_rank);
  f.exit_code = kLostAgentExitCode;
  f.description = "node lost: " + why;
  if (config_.elastic && membership_.node_of(node_rank) == membership_.node_of(config_.host_agent)) {
    // This node hosts the service: an elastic job needs it as much as any other.
    f.description += "; node " + std::to_string(config_.host_agent) +
                     " hosts the job's coordinator, so the job cannot go on without it";
    StopJob(f, completions);
    return;
  }
  const bool member = membership_.seat(node_rank).has_value();
  Membership::Loss loss{};
  const std::vector<int> gone = RecordLoss(node_rank, &loss);
  if (loss == Membership::Loss::kAlreadyLost) return;
  if (auto unheard = MayBeCutOff(); !unheard.empty()) {
    FenceHost(unheard, completions);
    return;
  }
  // A silent node may still run its workers until its own timeout ends them: never beside the next epoch.
  if (silent) hold_epoch_until_ = std::max(hold_epoch_until_, Now() + config_.fence_wait);
  const int round_before = round_;
  GoOnWithout(gone, member, loss, std::move(f), completions);
  if (round_ == round_before) ReplicateState(completions);  // a new epoch already sent it
  // A frozen agent's stream may still be open: it hears that it is fenced when it reads again (now that
  // the epoch it is left out of has begun, which the message names).
  for (int agent : gone) {
    const NodeState& node = nodes_[static_cast<size_t>(agent)];
    if (node.stream && Fenced(agent)) sinks_[*node.stream](FencedEvent(agent));
  }
}

NodeAssignment CoordinationService::AssignmentOf(int agent) const {
  // Every epoch has a seat (min_nodes >= 1), so the first seat's assignment carries the epoch's common part.
  std::optional<int> seat = membership_.seat(agent);
  NodeAssignment a = assignments_[static_cast<size_t>(seat.value_or(0))];
  if (!seat) {
    a.rank_offset = 0;
    a.node_rank = -1;
    a.spare = true;
  }
  a.agent = agent;
  return a;
}

std::vector<int> CoordinationService::RecordLoss(int agent, Membership::Loss* loss) {
  const size_t lost_before = membership_.lost_agents().size();
  *loss = membership_.Lose(agent);
  // In a per-task job the agents of the lost one's host go with it.
  const std::vector<int> gone(membership_.lost_agents().begin() + static_cast<ptrdiff_t>(lost_before),
                              membership_.lost_agents().end());
  for (int a : gone) {
    losses_.emplace_back(a, round_);
    nodes_[static_cast<size_t>(a)].heartbeat_deadline.reset();
  }
  return gone;
}

void CoordinationService::GoOnWithout(const std::vector<int>& gone, bool member, Membership::Loss loss,
                                      FailedWorker f, Completions& completions) {
  if (loss == Membership::Loss::kTooFew) {
    if (config_.elastic) {
      std::vector<std::string> lost;
      for (auto [agent, epoch] : losses_) lost.push_back(NodeName(agent));
      f.description += "; " + std::to_string(membership_.live()) + " node(s) left, fewer than the " +
                       std::to_string(membership_.range().min_nodes) +
                       " the job needs (--nnodes); lost: " + JoinNames(lost);
    }
    StopJob(f, completions);
    return;
  }
  if (state_ == JobState::kRendezvous) {
    // The epoch has not begun: it simply goes on without these agents (their seats are given again).
    for (int agent : gone) {
      NodeState& node = nodes_[static_cast<size_t>(agent)];
      if (!node.join) continue;
      node.join.reset();
      if (node.join_done) {
        completions.push_back([done = std::move(node.join_done), e = FencedEvent(agent)] {
          done(Status{StatusCode::kAborted, e.root_cause.description}, {});
        });
        node.join_done = nullptr;
      }
      --joined_;
    }
    CompleteIfAllJoined(completions);
    return;
  }
  if (loss == Membership::Loss::kSpare || !member) return;  // the world is as it was
  JobEvent event;
  event.kind = JobEvent::Kind::kRestart;
  event.root_cause = f;
  event.node_lost = true;
  BeginEpoch(event, completions);
}

void CoordinationService::BeginEpoch(JobEvent event, Completions& completions) {
  held_failure_.reset();  // a failure held while a node was lost came from that loss
  EpochEnded(event.notice.empty() ? "restart after " + DescribeFailure(event.root_cause) : event.notice);
  grow_at_.reset();  // the arrivals that waited for it take their seats in this epoch (scale-up)
  membership_.NextEpoch();
  round_ = membership_.epoch();
  event.restart_round = round_;
  RecoveryBegan(event);
  Status aborted{StatusCode::kAborted, "the job is restarting (round " + std::to_string(round_) + ") after " +
                                           DescribeFailure(event.root_cause)};
  FailRendezvous(aborted, completions);
  FailAllWaits(aborted, completions);
  // A new round starts without its predecessor's keys (an NCCL id would mislead it); the job's keys stay.
  std::erase_if(store_, [this](const auto& entry) {
    if (IsJobKey(entry.first)) return false;
    store_bytes_ -= entry.first.size() + entry.second.size();
    return true;
  });
  for (NodeState& n : nodes_) {
    n.join.reset();
    n.succeeded = false;
  }
  joined_ = 0;
  succeeded_ = 0;
  // Nodes that had succeeded are watched again: their deadlines count from now on.
  earliest_heartbeat_deadline_ = Clock::time_point::min();
  assignments_.clear();
  hang_watch_.Reset();  // new workers, new steps
  stall_said_ = false;
  node_sections_.clear();
  straggler_watch_ = StragglerWatch(config_.straggler);
  state_ = JobState::kRendezvous;
  round_deadline_ = Now() + config_.initialization_timeout;
  restart_event_ = event;
  Broadcast(event);
  ReplicateState(completions);
}

std::string CoordinationService::History() const {
  std::lock_guard lock(mu_);
  if (round_ == 0 && arrivals_.empty()) return {};
  std::string out = std::to_string(round_ + 1) + " epochs; " + std::to_string(restarts_) +
                    " restart(s) after a worker failure; " + std::to_string(losses_.size()) + " node(s) lost";
  std::vector<std::string> lost;
  for (auto [agent, epoch] : losses_) lost.push_back(NodeName(agent) + " in epoch " + std::to_string(epoch));
  if (!lost.empty()) out += ": " + JoinNames(lost);
  if (!arrivals_.empty()) {
    std::vector<std::string> arrived;
    for (auto [agent, epoch] : arrivals_)
      arrived.push_back(NodeName(agent) + " in epoch " + std::to_string(epoch));
    out += "; " + std::to_string(arrivals_.size()) + " node(s) arrived: " + JoinNames(arrived);
  }
  return out;
}

Status CoordinationService::Admit(const NodeJoin& join, int* agent) {
  Completions completions;
  Status status;
  {
    std::lock_guard lock(mu_);
    const std::string who = "a node arriving from host '" + join.name() + "'";
    // The first rendezvous's first free seat for a node that claims one (the service's host is node 0).
    std::optional<int> seat;
    if (join.claims_seat && round_ == 0 && state_ == JobState::kRendezvous) {
      for (int i = 1; i < config_.num_nodes && !seat; ++i) {
        const NodeState& n = nodes_[static_cast<size_t>(i)];
        if (!n.claimed && !n.join && !n.stream && !membership_.lost(i)) seat = i;
      }
    }
    if (shut_down_) {
      status = {StatusCode::kUnavailable, "the coordination service is shutting down"};
    } else if (election_) {
      status = {StatusCode::kUnavailable,
                who + " was refused: the job's standby is taking the job over; try again in a moment"};
    } else if (seat && join.num_nodes != config_.num_nodes) {
      status = {StatusCode::kInvalidArgument,
                "a node of host '" + join.name() + "' expects " + std::to_string(join.num_nodes) +
                    " nodes, but the job has " + std::to_string(config_.num_nodes) +
                    "; every distrun of a job must see the same node count (--nnodes)"};
    } else if (seat) {
      *agent = *seat;
      NodeState& n = nodes_[static_cast<size_t>(*seat)];
      n.claimed = true;
      n.host = join.name();
    } else if (join.claims_seat && !config_.elastic) {
      status = {StatusCode::kResourceExhausted,
                "a node of host '" + join.name() + "' was refused: " +
                    (round_ == 0 && state_ == JobState::kRendezvous
                         ? "the job's " + std::to_string(config_.num_nodes) + " nodes (--nnodes " +
                               std::to_string(config_.num_nodes) + ") are all there already"
                         : std::string("the job has started; a job without a node range (--nnodes MIN:MAX) "
                                       "takes no node after its start"))};
    } else if (!config_.elastic) {
      status = {StatusCode::kFailedPrecondition,
                who +
                    " was refused: this job has no node range (--nnodes MIN:MAX), so it admits no node "
                    "after its start"};
    } else if (join.run_id.empty() || (!config_.run_id.empty() && join.run_id != config_.run_id)) {
      status = {StatusCode::kInvalidArgument, who + " was refused: it belongs to run '" + join.run_id +
                                                  "', but this job is run '" + config_.run_id +
                                                  "'; give the job's run id with --run-id"};
    } else if (state_ == JobState::kStopped || state_ == JobState::kSucceeded) {
      status = {StatusCode::kAborted, who + " came after the job ended"};
    } else if (join.local_workers < 0 || join.local_workers > kMaxWorkersPerNode) {
      status = {StatusCode::kInvalidArgument,
                who + ": " + std::to_string(join.local_workers) + " local workers is out of range"};
    } else if (std::optional<int> admitted = membership_.Admit(); !admitted) {
      status = {StatusCode::kResourceExhausted, who + " was refused: the job already has " +
                                                    std::to_string(membership_.live()) +
                                                    " live nodes, the most its node range allows (--nnodes " +
                                                    std::to_string(membership_.range().min_nodes) + ":" +
                                                    std::to_string(membership_.range().max_nodes) + ")"};
    } else {
      *agent = *admitted;
      nodes_.emplace_back();
      nodes_.back().host = join.name();
      SetHeartbeatDeadline(nodes_.back());  // until its stream attaches
      arrivals_.emplace_back(*agent, round_);
      Arrived(*agent, completions);
      ReplicateState(completions);
    }
  }
  Run(completions);
  return status;
}

void CoordinationService::Arrived(int agent, Completions& completions) {
  if (state_ == JobState::kRendezvous) {
    membership_.SeatArrivals();  // the epoch being formed takes it, where the policy grows the world
    return;
  }
  // Spares: one more spare. Resize with scale-up never: it waits for a lost member's place.
  if (!membership_.waiting(agent) || membership_.range().scale_up == ScaleUp::kNever) return;
  const bool now = membership_.range().scale_up == ScaleUp::kNow;
  std::string notice = NodeName(agent) + " arrived; ";
  notice +=
      now ? "the job restarts with it in " + FormatSeconds(config_.scale_up_notice) + " (--scale-up now)"
          : "it joins the world at the next restart (--scale-up next-restart)";
  // Workers that want to checkpoint first watch this epoch's key, or take the signal their distrun sends
  // on the notice (--change-signal).
  (void)StoreValue(kChangeKey, notice, completions);
  JobEvent event;
  event.kind = JobEvent::Kind::kNotice;
  event.notice = notice;
  Broadcast(event);
  if (!now) return;
  if (config_.scale_up_notice.count() == 0) {
    GrowWorld(completions);
  } else if (!grow_at_) {
    grow_at_ = Now() + config_.scale_up_notice;
  }
}

void CoordinationService::GrowWorld(Completions& completions) {
  grow_at_.reset();
  if (state_ != JobState::kRunning || membership_.waiting_count() == 0) return;
  std::vector<std::string> names;
  for (int a = 0; a < membership_.agents(); ++a) {
    if (membership_.waiting(a)) names.push_back(NodeName(a));
  }
  JobEvent event;
  event.kind = JobEvent::Kind::kRestart;
  event.node_arrived = true;
  event.root_cause.node_rank = -1;
  event.root_cause.exit_code = 0;
  event.root_cause.description = JoinNames(names) + " arrived and the world grows (--scale-up now)";
  BeginEpoch(event, completions);
}

}  // namespace distrun
