// The supervisor's part of recovering in place (--recovery in-process; ARCHITECTURE.md, "Recovering in
// place"): the worker channel, the node's recovery (launcher/recovery/in_place_recovery.h), the join of the
// next generation on a thread of its own, a failed worker started again alone, and the world handed out.

#include <spdlog/logger.h>

#include <chrono>

#include "launcher/recovery/worker_channel.h"
#include "launcher/supervise/rendezvous_thread.h"
#include "launcher/supervise/supervisor.h"

namespace distrun {
namespace {

std::string EnvOf(const WorkerPlan& plan, std::string_view name, std::string fallback) {
  for (const auto& [n, v] : plan.env) {
    if (n == name) return v;
  }
  return fallback;
}

}  // namespace

void Supervisor::SetUpRecovery() {
  if (options_.recovery != RecoveryMode::kInProcess) return;
  if (!link_) {
    log_->warn(
        "--recovery in-process needs the job's runtime, which this launch has none of; workers restart");
    return;
  }
  channel_ = std::make_unique<WorkerChannel>([this](pid_t pid) -> std::optional<size_t> {
    for (size_t i = 0; i < workers_.size(); ++i) {
      const Worker& w = workers_[i];
      if (w.started && !w.child.reaped() && w.child.pid() == pid) return i;
    }
    return std::nullopt;
  });
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(options_.RecoveryTimeoutSeconds() * 1000));
  recovery_ = std::make_unique<InPlaceRecovery>(plan_.workers.size(), timeout,
                                                static_cast<RecoveryActions&>(*this), log_);
  WatchFd(channel_->fd(), POLLIN, [this](short) { OnChannel(); });
  log_->debug("workers recover in place; their channel is {}", channel_->address());
}

void Supervisor::OnChannel() {
  for (ChannelEvent& e : channel_->Process()) {
    if (!e.message) {
      recovery_->Disconnected(e.slot);
      continue;
    }
    try {
      recovery_->OnMessage(e.slot, *e.message, Clock::now());
    } catch (const WorkerMessageError& error) {
      log_->warn("rank {}: {}", workers_[e.slot].plan.process_id, error.what());
    }
  }
  for (const std::string& problem : channel_->TakeProblems()) log_->warn("{}", problem);
}

bool Supervisor::Send(size_t slot, const WorkerMessage& message) { return channel_->Send(slot, message); }

void Supervisor::Restart(size_t slot, const std::string& why) {
  log_->warn("{}", why);
  RestartSlot(slot, why);
}

void Supervisor::ChangeInPlace(const JobDecision& d) {
  if (d.kind == JobDecision::Kind::kFailover) {
    log_->warn("{}: this node's workers keep running and take the standby's next world", d.reason);
    return;
  }
  if (d.node_arrived) {
    log_->warn("{}; the workers take generation {} in place", d.reason, d.restart_round);
  } else if (d.node_lost) {
    log_->warn("{}; the job goes on without it in generation {}, its workers recovering in place", d.reason,
               d.restart_round);
  } else {
    log_->warn("{}; the workers recover in place in generation {}", d.reason, d.restart_round);
  }
  recovery_->Change(d.restart_round, Clock::now());
}

void Supervisor::Join(int generation, const std::vector<int>& fresh_local) {
  AbandonJoin();  // an older generation's, which the service aborted when it began this one
  joining_ = std::make_unique<RendezvousThread>(*link_, generation, plan_.assignment, fresh_local);
  WatchFd(joining_->fd(), POLLIN, [this](short) { OnJoinedInPlace(); });
}

void Supervisor::AbandonJoin() {
  if (!joining_ || !link_) return;
  UnwatchFd(joining_->fd());
  link_->CancelRendezvous();
  joining_.reset();  // joins its thread, which the cancel ended
}

void Supervisor::OnJoinedInPlace() {
  UnwatchFd(joining_->fd());
  std::unique_ptr<RendezvousThread> done = std::move(joining_);
  const bool current = recovery_->changing() == done->round();
  JobAssignment a;
  try {
    a = done->Take();
  } catch (const JobLinkError&) {
    if (!current) return;  // a newer generation replaced it
    throw;                 // the job cannot be formed: it ends as a failed rendezvous ends it
  }
  if (!current) return;
  restart_count_ = a.restart_count;
  if (a != plan_.assignment) plan_ = MakePlan(plan_.topology, plan_.layout, a, options_, env_);
  HandOutWorld(plan_);
}

std::optional<NodeRecovery> Supervisor::RecoveryProgress(Clock::time_point now) {
  // Read often while first steps are awaited: a first report is exact only if the next has not come yet.
  constexpr auto kFirstStepRead = std::chrono::milliseconds(5);
  next_first_steps_ = now + kFirstStepRead;
  std::vector<InPlaceRecovery::Reports> reports;
  for (const ProgressSample& s : worker_watch_->Reports()) reports.push_back({s.reports, s.time_ns});
  recovery_->Progress(reports);
  NodeRecovery last = recovery_->Last();
  if (last.generation < 0) return std::nullopt;
  return last;
}

void Supervisor::HandOutWorld(const Plan& plan) {
  const JobAssignment& a = plan.assignment;
  const auto now = Clock::now();
  std::vector<WorldMessage> worlds;
  if (!a.spare) {
    std::vector<std::pair<std::string, std::string>> secrets;
    if (options_.export_distrun) secrets = link_->WorkerSecrets();
    for (size_t i = 0; i < plan.workers.size() && i < workers_.size(); ++i) {
      const WorkerPlan& p = plan.workers[i];
      WorldMessage w;
      w.generation = a.restart_count;
      w.rank = p.process_id;
      w.world_size = a.num_processes;
      w.local_rank = p.local_rank;
      w.local_world_size =
          std::stoi(EnvOf(p, "DISTRUN_LOCAL_WORLD_SIZE", std::to_string(plan.workers.size())));
      w.group_rank = std::max(a.node_rank, 0);
      w.group_world_size = std::max(a.num_nodes, 1);
      w.source = a.change.source;
      w.lost = a.change.lost;
      w.joined = a.change.joined;
      w.store_prefix = GenerationStorePrefix(a.restart_count);
      w.env = p.env;
      w.env.insert(w.env.end(), secrets.begin(), secrets.end());
      worlds.push_back(std::move(w));
      Worker& worker = workers_[i];
      const bool renumbered = worker.plan.process_id != p.process_id;
      worker.plan = p;
      if (worker.started && !worker.child.reaped()) {
        output_.Relabel(i, p.process_id, p.local_rank);
        if (renumbered) {
          worker_watch_->Starting(i);  // its steps count anew under its new rank
          worker_watch_->Started(i, p.process_id, worker.child.pid(),
                                 fmt::format("{}", fmt::join(p.device_tokens, ",")), now);
        }
      }
    }
  } else {
    log_->info("generation {}: this node is a warm spare; its {} worker(s) wait for a seat", a.restart_count,
               plan.workers.size());
  }
  RecoveryProgress(now);  // the reports so far: first steps count from here
  recovery_->Handout(a.restart_count, std::move(worlds), now);
}

void Supervisor::RestartSlot(size_t slot, const std::string& why) {
  Worker& w = workers_[slot];
  if (w.started) {
    w.child.SignalGroup(SIGKILL);
    for (Stream stream : {Stream::kStdout, Stream::kStderr}) {
      UniqueFd& fd = stream == Stream::kStdout ? w.child.stdout_pipe() : w.child.stderr_pipe();
      while (fd) {
        ssize_t n = ::read(fd.get(), buffer_.data(), buffer_.size());
        if (n > 0) {
          output_.Write(slot, stream, std::string_view(buffer_.data(), static_cast<size_t>(n)));
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        output_.Finish(slot, stream);
        fd.Reset();
      }
    }
    w.child = Child();  // the old one's group is killed and the process reaped
    w.started = false;
    worker_watch_->Exited(slot);
    if (recovery_) recovery_->Exited(slot);
  }
  if (channel_) channel_->Drop(slot);
  sentinel_.AddFingerprints({FingerprintFor(slot)});
  std::vector<SpawnOutcome> out =
      spawner_->Start(1, [&](size_t, SpawnSpec& spec) { MakeSpec(slot, spec, /*clear_error_file=*/true); });
  if (out.front().error) {
    try {
      std::rethrow_exception(out.front().error);
    } catch (const SpawnError& e) {
      log_->error("cannot start rank {} again ({}): {}", w.plan.process_id, why, e.what());
      no_restart_ = true;
      BeginStop(StopReason::kSpawnError, e.exit_code());
      return;
    }
  }
  Adopt(slot, std::move(out.front().child));
  CloseBrokenStreams();
}

bool Supervisor::RestartFailedWorker(size_t slot) {
  // Without restarts the job would only stop it again: the ordinary stop, with its summary.
  if (!recovery_ || options_.max_restarts == 0) return false;
  Worker& w = workers_[slot];
  const int status = w.child.wait_status();
  std::string text =
      fmt::format("rank {} (pid {}) failed with {}; starting it again alone (--recovery in-process)",
                  w.plan.process_id, w.child.pid(), DescribeWaitStatus(status));
  for (const std::string& line : output_.StderrTail(slot)) text += "\n    " + line;
  log_->error("{}", text);
  FailedWorker f;
  f.host = env_.hostname;
  f.process_id = w.plan.process_id;
  f.exit_code = ExitCodeOf(status);
  f.description = DescribeWaitStatus(status);
  link_->ReportFailure(f);
  RestartSlot(slot, "it failed");
  return true;
}

}  // namespace distrun
