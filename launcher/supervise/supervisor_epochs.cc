// The supervisor's part of the job's rounds (DESIGN §4.1): joining each round's rendezvous, the job's
// decisions (stop, restart, a new epoch, a notice, stacks), when this node restarts its workers, its
// --node-check and leaving the job, and the watchdog that lets the sentinel fence a frozen node.

#include <signal.h>
#include <spdlog/logger.h>

#include "launcher/process/signal_names.h"
#include "launcher/supervise/node_check.h"
#include "launcher/supervise/supervisor.h"

namespace distrun {

// An elastic job's node whose distrun freezes must not keep its workers beside the next epoch: the sentinel
// watches for distrun's pulses while workers run and fences the node after --heartbeat-timeout without one,
// when node 0 gives up on it too. Not while distrun waits for a rendezvous or a node check, which may take
// long and during which no worker runs.
void Supervisor::ArmWatchdog(bool on) {
  if (!options_.elastic || !link_ || on == watchdog_armed_) return;
  watchdog_armed_ = on;
  sentinel_.Watch(on ? std::chrono::milliseconds(static_cast<int64_t>(options_.heartbeat_timeout_s * 1000))
                     : std::chrono::milliseconds(0));
  next_pulse_ = Clock::now() + WatchdogPulse();
}

Supervisor::Clock::duration Supervisor::WatchdogPulse() const {
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options_.heartbeat_timeout_s / 5));
}

std::string Supervisor::CheckNode(int epoch) {
  if (!options_.node_check) return {};
  ArmWatchdog(false);
  std::vector<std::string> env;
  for (const auto& [name, value] : env_.vars) {
    if (name != "DISTRUN_EPOCH") env.push_back(name + "=" + value);
  }
  env.push_back("DISTRUN_EPOCH=" + std::to_string(epoch));  // which epoch the node is about to take part in
  log_->debug("epoch {}: running --node-check", epoch);
  NodeCheckResult r = RunNodeCheck(*options_.node_check, env, options_.node_check_timeout_s);
  if (r.ok) return {};
  return "--node-check '" + *options_.node_check + "' failed on " + env_.hostname + ": " + r.problem;
}

void Supervisor::LeaveJob(const std::string& reason) {
  log_->error("{}; this node leaves the job (exit code {})", reason, kFencedExitCode);
  if (link_) link_->Leave(restart_count_, reason);
  exit_code_ = kFencedExitCode;
}

bool Supervisor::ShouldRestart() const {
  if (no_restart_) return false;
  if (link_) {
    // The job decides, for every node alike.
    if (!decision_ || decision_->kind != JobDecision::Kind::kRestart) return false;
  } else if (stop_reason_ != StopReason::kFailure || restart_count_ >= options_.max_restarts) {
    return false;
  }
  return !timeout_at_ || Clock::now() < *timeout_at_;
}

void Supervisor::JoinRound(int round) {
  // Waiting for the other nodes may take long. No worker runs meanwhile, so INT, TERM and HUP may end
  // distrun the ordinary way: nothing is left behind.
  sigset_t stop;
  sigemptyset(&stop);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop, sig);
  ::pthread_sigmask(SIG_UNBLOCK, &stop, nullptr);
  ArmWatchdog(false);
  JobAssignment assignment;
  try {
    assignment = link_->Rendezvous(round, plan_.assignment);
  } catch (...) {
    ::pthread_sigmask(SIG_BLOCK, &stop, nullptr);
    throw;
  }
  ::pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  decision_.reset();
  restart_count_ = assignment.restart_count;  // an arrival joined whatever epoch the job was in
  // The plan is the assignment's: made again (7 us per worker) only when the rendezvous changed it.
  if (assignment != plan_.assignment)
    plan_ = MakePlan(plan_.topology, plan_.layout, assignment, options_, env_);
  if (assignment.spare && options_.recovery == RecoveryMode::kInProcess) {
    log_->debug("epoch {}: this node is a spare", assignment.restart_count);  // warm: HandOutWorld says so
  } else if (assignment.spare) {
    log_->info("epoch {}: this node is a hot spare (no workers) until a later epoch gives it a seat",
               assignment.restart_count);
  } else if (options_.elastic) {
    log_->info("epoch {}: node {} of {}, ranks {}..{} of {}", round, assignment.node_rank,
               assignment.num_nodes, assignment.rank_offset,
               assignment.rank_offset + static_cast<int>(plan_.workers.size()) - 1, assignment.num_processes);
  } else {
    log_->debug("rendezvous round {}: ranks {}..{} of {} on this node", round, assignment.rank_offset,
                assignment.rank_offset + static_cast<int>(plan_.workers.size()) - 1,
                assignment.num_processes);
  }
}

bool Supervisor::AwaitingDecision() const {
  if (!link_ || decision_) return false;
  return stop_reason_ == StopReason::kSuccess || stop_reason_ == StopReason::kFailure ||
         stop_reason_ == StopReason::kSpawnError;
}

void Supervisor::OnJobDecisions() {
  for (JobDecision& d : link_->TakeDecisions()) {
    if (d.kind == JobDecision::Kind::kNotice) {
      NoticeChange(d.reason);
      continue;
    }
    if (d.kind == JobDecision::Kind::kStacks) {
      worker_watch_->CollectStacks(d.stacks_id);
      continue;
    }
    if (d.kind == JobDecision::Kind::kDiagnosis) {
      if (d.info) {
        log_->info("{}", d.reason);
      } else if (d.warning) {
        log_->warn("{}", d.reason);
      } else {
        log_->error("{}", d.reason);
      }
      continue;
    }
    if (recovery_ && phase_ == Phase::kRunning &&
        (d.kind == JobDecision::Kind::kFailover || d.kind == JobDecision::Kind::kRestart)) {
      ChangeInPlace(d);  // the workers keep running and take the next world
      continue;
    }
    if (d.kind == JobDecision::Kind::kFailover) {
      // The lost coordinator's world cannot go on, and the standby may begin the next epoch without this
      // node: its workers end now, without a grace period; the standby's restart or stop decides the rest.
      if (phase_ == Phase::kRunning) {
        log_->warn("{}: killing this node's workers at once", d.reason);
        BeginStop(StopReason::kFailure, 1);  // the code of a lost coordinator, should the job end
        HurryStop();
      } else {
        log_->warn("{}", d.reason);
      }
      continue;
    }
    // A restart into the epoch this node already joined (an arrival hears of it while it joins).
    if (d.kind == JobDecision::Kind::kRestart && d.restart_round <= restart_count_) continue;
    if (decision_) continue;  // the first decision of a round is the one
    switch (d.kind) {
      case JobDecision::Kind::kStop:
        no_restart_ = true;
        if (d.exit_code == kFencedExitCode) {
          // An elastic job went on without this node while it was frozen or cut off: its workers must not
          // run beside the next epoch's, so they get no grace period.
          if (phase_ == Phase::kRunning) {
            log_->error("{}; killing this node's workers at once", d.reason);
            BeginStop(StopReason::kExternal, d.exit_code);
            HurryStop();
          } else {
            log_->error("{}", d.reason);
          }
          exit_code_ = d.exit_code;
          // A worker that failed here first failed of what fenced the node (its peers went away): the
          // fence is this node's end, not that worker.
          root_cause_here_ = false;
        } else if (phase_ == Phase::kRunning && d.coordinator_lost && options_.elastic) {
          // Cut off (or node 0 is gone): the job may already go on without this node, so its workers end
          // now, without a grace period in which they could run beside the next epoch.
          log_->error(
              "the job stopped: {}; killing this node's workers at once (an elastic job goes on "
              "without it)",
              d.reason);
          BeginStop(StopReason::kExternal, d.exit_code);
          HurryStop();
        } else if (phase_ == Phase::kRunning) {
          log_->error("the job stopped: {}; stopping this node's workers", d.reason);
          BeginStop(StopReason::kExternal, d.exit_code);
        } else if (stop_reason_ != StopReason::kSignal && stop_reason_ != StopReason::kTimeout) {
          exit_code_ = d.exit_code;  // every node exits with the root cause's code
          // A worker that failed as the coordinator was lost failed of that loss: say it, too.
          if (stop_reason_ == StopReason::kSuccess || d.coordinator_lost)
            log_->error("the job stopped: {}", d.reason);
        }
        break;
      case JobDecision::Kind::kRestart:
        if (d.node_arrived) {
          log_->warn("{}; the job restarts with it in epoch {}", d.reason, d.restart_round);
        } else if (d.node_lost) {
          log_->warn("{}; the job goes on without it in epoch {}", d.reason, d.restart_round);
        } else if (phase_ == Phase::kRunning) {
          log_->warn("restarting the job (round {}) after {}", d.restart_round, d.reason);
        }
        if (phase_ == Phase::kRunning) BeginStop(StopReason::kRestart, 0);
        break;
      case JobDecision::Kind::kComplete:
      case JobDecision::Kind::kNotice:
      case JobDecision::Kind::kStacks:
      case JobDecision::Kind::kDiagnosis:
      case JobDecision::Kind::kFailover:
        break;
    }
    decision_ = std::move(d);
  }
}

void Supervisor::NoticeChange(const std::string& what) {
  if (!options_.change_signal || phase_ != Phase::kRunning) {
    log_->info("{}", what);
    return;
  }
  const int count = SignalRunningWorkers(*options_.change_signal);
  log_->info("{}; sent {} to {} worker(s) (--change-signal)", what, SignalName(*options_.change_signal),
             count);
}

}  // namespace distrun
