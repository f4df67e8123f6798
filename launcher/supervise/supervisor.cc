#include "launcher/supervise/supervisor.h"

#include <spdlog/logger.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string_view>

#include "launcher/process/signal_names.h"
#include "launcher/recovery/worker_channel.h"
#include "launcher/supervise/node_check.h"
#include "launcher/supervise/rendezvous_thread.h"
#include "launcher/supervise/scratch_parent.h"

namespace distrun {
namespace {

constexpr size_t kReadChunk = 64 * 1024;
// While stopping, how often distrun looks for processes that are left (orphans do not all send SIGCHLD
// to distrun, and members of a worker's group may outlive it).
constexpr auto kStopTick = std::chrono::milliseconds(20);
// After SIGKILL, how long distrun waits for processes that do not die (stuck in the kernel) before it
// gives up on them.
constexpr auto kKillWait = std::chrono::seconds(10);
// How often the workers' progress is read and handed to the job link: the hang watch's timeouts are seconds.
constexpr auto kProgressInterval = std::chrono::milliseconds(250);
// A node's part of `distrun stacks`: gdb on a large native process takes seconds; the service waits a
// little longer for every node.
constexpr auto kStacksTimeout = std::chrono::milliseconds(10'000);

}  // namespace

sigset_t SupervisedSignals(const Options& options) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2}) sigaddset(&set, sig);
  for (int sig : options.forward_signals) sigaddset(&set, sig);
  return set;
}

void BlockSupervisedSignals(const Options& options) {
  sigset_t set = SupervisedSignals(options);
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

Supervisor::Supervisor(Plan plan, Options options, Environment env, std::shared_ptr<spdlog::logger> log,
                       JobLinkFactory make_link)
    : plan_(std::move(plan)),
      options_(std::move(options)),
      env_(std::move(env)),
      log_(std::move(log)),
      make_link_(std::move(make_link)),
      output_([&] {
        OutputSettings s;
        s.tag = options_.tag_output == TagOutput::kOn ||
                (options_.tag_output == TagOutput::kAuto && plan_.assignment.num_processes > 1);
        s.tag_template = options_.tag_template;
        s.host = env_.hostname;
        if (options_.log_dir) s.log_dir = *options_.log_dir;
        s.ranks_filter = options_.ranks_filter;
        s.local_ranks_filter = options_.local_ranks_filter;
        s.redirects = options_.redirects;
        s.tee = options_.tee;
        s.log = log_;
        return s;
      }()),
      // Two starts at a time per CPU (up to 8): a start mostly waits for its child to reach exec, and the CPU
      // runs the children meanwhile (8 workers on 2 CPUs: 2 threads gave 0.97-1.01 of mpiexec, 4 gave
      // 0.97-0.98).
      spawner_(std::make_unique<Spawner>(static_cast<size_t>(std::clamp(2 * env_.cpu_count, 1, 8)))),
      buffer_(kReadChunk) {}

void Supervisor::PrepareScratch() {
  const std::filesystem::path scratch = ScratchParent(env_);
  if (options_.export_torch) {
    std::optional<std::filesystem::path> log_dir;
    if (options_.log_dir) log_dir = *options_.log_dir;
    error_files_.emplace(log_dir, scratch);
    if (!error_files_->problem().empty()) log_->warn("{}", error_files_->problem());
  }
  std::vector<std::string> tool_env;
  for (const auto& [name, value] : env_.vars) tool_env.push_back(name + "=" + value);
  worker_watch_.emplace(plan_.workers.size(), scratch, env_.hostname, kStacksTimeout, std::move(tool_env));
  if (!worker_watch_->problem().empty()) log_->warn("{}", worker_watch_->problem());
}

Supervisor::~Supervisor() {
  KillEverything();
  TakeTerminal();
  if (mask_saved_) {
    signal_fd_.Reset();
    ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
    ::sigaction(SIGPIPE, &old_sigpipe_, nullptr);
    ::sigaction(SIGTTOU, &old_sigttou_, nullptr);
  }
  // The scratch directories go before the sentinel is reaped (members are destroyed after this, in
  // reverse order): one told to quit exits meanwhile; one that was not sweeps them too.
  worker_watch_.reset();
  error_files_.reset();
}

void Supervisor::WatchFd(int fd, short events, std::function<void(short)> on_ready) {
  UnwatchFd(fd);
  watches_.push_back(Watch{fd, events, std::move(on_ready)});
}

void Supervisor::UnwatchFd(int fd) {
  std::erase_if(watches_, [fd](const Watch& w) { return w.fd == fd; });
}

void Supervisor::StopJob(int exit_code, const std::string& reason) {
  no_restart_ = true;
  if (phase_ == Phase::kIdle) {
    pending_stop_ = {exit_code, reason};
    return;
  }
  if (phase_ != Phase::kRunning) return;
  log_->error("{}; stopping the workers", reason);
  BeginStop(StopReason::kExternal, exit_code);
}

void Supervisor::SetUpProcess() {
  EnsureStandardFds();
  // Signals are only ever read from the signalfd, in the loop: blocked here, unblocked in workers.
  handled_ = SupervisedSignals(options_);
  ::sigprocmask(SIG_BLOCK, &handled_, &old_mask_);
  // A console that goes away must not kill distrun (and leave the job unsupervised): writes fail instead.
  struct sigaction ignore;
  std::memset(&ignore, 0, sizeof(ignore));
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &old_sigpipe_);
  // Taking the terminal back from a worker, and writing to it meanwhile, must not stop distrun.
  ::sigaction(SIGTTOU, &ignore, &old_sigttou_);
  mask_saved_ = true;
  if (::isatty(STDIN_FILENO) == 1 && ::tcgetpgrp(STDIN_FILENO) == ::getpgrp()) terminal_fd_ = STDIN_FILENO;
  // Orphaned descendants of workers are re-parented to distrun, which kills and reaps them at teardown.
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    log_->warn("cannot become a child subreaper ({}); orphaned processes of workers may outlive the job",
               std::strerror(errno));
  }
  // Node 0 hosts the job's service: a descriptor for every agent and every worker of the job that connects
  // to it, and a soft limit of 1,024 would refuse them in a job of a thousand nodes. The workers get the
  // original limit back: some programs walk every descriptor up to it.
  if (plan_.layout.unit_index == 0 && plan_.layout.units > 1) {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
      rlimit raised = limit;
      raised.rlim_cur = limit.rlim_max;
      if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) {
        workers_descriptor_limit_ = limit;
        log_->debug("descriptor limit raised from {} to {} for the job's service", limit.rlim_cur,
                    raised.rlim_cur);
      }
    }
  }
  // distrun-sentinel beside this program, started without copying distrun, on a thread of its own while
  // the scratch files are written (posix_spawn waits for the program's exec); else a fork, while distrun
  // is still single-threaded. The signals masked above are masked in that thread and in the sentinel too.
  // main starts it earlier still (AdoptSentinel).
  if (!sentinel_starting_) {
    std::string program = FindSentinelProgram(env_.program);
    if (program.empty()) {
      sentinel_ = Sentinel::Start();
    } else {
      sentinel_starting_ = std::make_shared<SentinelStart>(std::move(program));
    }
  }
  non_default_signals_ = NonDefaultSignals();
  signal_fd_.Reset(::signalfd(-1, &handled_, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!signal_fd_) throw std::runtime_error(std::string("signalfd: ") + std::strerror(errno));
}

std::vector<std::string> Supervisor::WorkerEnvironment(size_t slot, const WorkerPlan& plan) const {
  // The worker's own variables (the plan's, distrun's per-worker ones over them) as one sorted list of
  // views, merged with distrun's environment as the entries are written: copying that environment into a map
  // per worker was most of the time before the first of 64 workers started.
  const std::set<std::string_view> unset(plan.unset.begin(), plan.unset.end());
  using View = std::pair<std::string_view, std::string_view>;
  std::vector<View> mine;
  mine.reserve(plan.env.size() + 8);
  for (const auto& [name, value] : plan.env) {
    if (!unset.contains(name)) mine.emplace_back(name, value);
  }
  // A later entry for a name wins, as assignment would have it.
  std::stable_sort(mine.begin(), mine.end(), [](const View& a, const View& b) { return a.first < b.first; });
  auto last = std::unique(mine.rbegin(), mine.rend(),
                          [](const View& a, const View& b) { return a.first == b.first; });
  mine.erase(mine.begin(), last.base());
  auto find = [&mine](std::string_view name) {
    return std::lower_bound(mine.begin(), mine.end(), name,
                            [](const View& v, std::string_view n) { return v.first < n; });
  };

  WorkerWatch::Variables own;
  // AddVariables extends the PYTHONPATH the worker would have.
  if (auto path = find("PYTHONPATH"); path != mine.end() && path->first == "PYTHONPATH") {
    own["PYTHONPATH"] = path->second;
  } else if (const std::string* inherited = env_.Get("PYTHONPATH");
             inherited != nullptr && !unset.contains("PYTHONPATH")) {
    own["PYTHONPATH"] = *inherited;
  }
  worker_watch_->AddVariables(slot, own);
  if (link_ && options_.export_distrun) {
    for (const auto& [name, value] : link_->WorkerSecrets()) own[name] = value;
  }
  if (error_files_ && error_files_->enabled()) {
    own[std::string(kTorchErrorFileVariable)] = error_files_->PathFor(plan.process_id).string();
  }
  if (channel_) own[kRecoverySocketVariable] = channel_->address();
  for (const auto& [name, value] : own) {
    auto at = find(name);
    if (at != mine.end() && at->first == name) {
      at->second = value;
    } else {
      mine.emplace(at, name, value);
    }
  }

  std::vector<std::string> out;
  out.reserve(env_.vars.size() + mine.size());
  auto write = [&out](std::string_view name, std::string_view value) {
    std::string& e = out.emplace_back();
    e.reserve(name.size() + 1 + value.size());
    e.append(name).append(1, '=').append(value);
  };
  // distrun's environment under the worker's entries; an inherited entry the plan unsets is left out.
  auto inherited = env_.vars.begin();
  auto pass_inherited = [&] {
    if (!unset.contains(inherited->first)) write(inherited->first, inherited->second);
    ++inherited;
  };
  for (const auto& [name, value] : mine) {
    while (inherited != env_.vars.end() && inherited->first < name) pass_inherited();
    if (inherited != env_.vars.end() && inherited->first == name) ++inherited;  // the worker's wins
    write(name, value);
  }
  while (inherited != env_.vars.end()) pass_inherited();
  return out;
}

std::vector<std::string> Supervisor::FingerprintFor(size_t slot) const {
  std::vector<std::string> entries = FingerprintOf(plan_.workers[slot].env);
  // Recovering in place, a spare's workers wait under ranks another node's workers were started with, and
  // a worker started again takes a rank whose first process may still run elsewhere: the node's own
  // channel, unique to this distrun, tells its workers apart.
  if (channel_ && !entries.empty())
    entries.push_back(std::string(kRecoverySocketVariable) + "=" + channel_->address());
  return entries;
}

void Supervisor::MakeSpec(size_t slot, SpawnSpec& spec, bool clear_error_file) {
  Worker& w = workers_[slot];
  w.plan = plan_.workers[slot];
  output_.StartWorker(slot, w.plan.process_id, w.plan.local_rank);
  if (clear_error_file) error_files_->Clear(w.plan.process_id);
  worker_watch_->Starting(slot);
  spec.argv = options_.command;
  spec.env = WorkerEnvironment(slot, w.plan);
  spec.inherit_stdin = w.plan.process_id == 0;
  spec.cpus = w.plan.cpus;
  spec.non_default_signals = &non_default_signals_;
  spec.descriptor_limit = workers_descriptor_limit_;
  spec.foreground = TakesTerminal(w.plan);
}

void Supervisor::Adopt(size_t slot, Child child) {
  Worker& w = workers_[slot];
  w.child = std::move(child);
  w.started = true;
  ++w.spawns;
  const auto now = Clock::now();
  worker_watch_->Started(slot, w.plan.process_id, w.child.pid(),
                         fmt::format("{}", fmt::join(w.plan.device_tokens, ",")), now);
  if (TakesTerminal(w.plan)) terminal_owner_ = w.child.pid();
  log_->debug("started rank {} (local rank {}, pid {}){}", w.plan.process_id, w.plan.local_rank,
              w.child.pid(), restart_count_ > 0 ? fmt::format(", restart {}", restart_count_) : "");
  if (recovery_) recovery_->Started(slot, w.child.pid(), w.plan.process_id, now);
}

void Supervisor::StartWorkers() {
  phase_ = Phase::kRunning;
  // The first report one interval in: a single-host job that ends sooner never starts its runtime for it
  // (launcher/job/lazy_link.h).
  next_progress_ = Clock::now() + kProgressInterval;
  stop_reason_ = StopReason::kNone;
  root_cause_.reset();
  root_cause_here_ = true;
  local_done_ = false;
  killed_ = false;
  gave_up_ = false;
  seen_gone_ = false;
  workers_.clear();
  workers_.resize(plan_.workers.size());
  // The sentinel knows every worker before the first one starts.
  std::vector<std::vector<std::string>> fingerprints;
  for (size_t i = 0; i < plan_.workers.size(); ++i) fingerprints.push_back(FingerprintFor(i));
  sentinel_.AddFingerprints(fingerprints);
  // The private directory made at this launch holds no error file before its first workers ran (an unlink
  // per worker was 10 us); --log-dir's may hold an earlier job's.
  const bool clear_error_files =
      error_files_ && (rounds_started_ > 0 || error_files_->private_directory().empty());
  ++rounds_started_;
  ArmWatchdog(true);
  // Each worker's spec is made here while the spawner's threads start the ones before it.
  std::vector<SpawnOutcome> outcomes = spawner_->Start(
      plan_.workers.size(), [&](size_t i, SpawnSpec& spec) { MakeSpec(i, spec, clear_error_files); });
  std::exception_ptr first_error;
  size_t failed_slot = 0;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    if (outcomes[i].error) {
      if (!first_error) {
        first_error = outcomes[i].error;
        failed_slot = i;
      }
      continue;
    }
    Adopt(i, std::move(outcomes[i].child));
  }
  CloseBrokenStreams();
  if (first_error) {
    try {
      std::rethrow_exception(first_error);
    } catch (const SpawnError& e) {
      const Worker& w = workers_[failed_slot];
      log_->error("{}", e.what());
      no_restart_ = true;  // the next attempt would fail the same way
      BeginStop(StopReason::kSpawnError, e.exit_code());
      if (link_) {
        FailedWorker f;
        f.host = env_.hostname;
        f.process_id = w.plan.process_id;
        f.exit_code = e.exit_code();
        f.description = e.what();
        link_->ReportFailure(f);
      }
      return;
    }
  }
  if (workers_.empty()) BeginStop(StopReason::kSuccess, 0);
}

int Supervisor::Run() {
  SetUpProcess();
  start_ = Clock::now();
  if (options_.timeout_s > 0) {
    timeout_at_ = start_ + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(options_.timeout_s));
  }
  if (pending_stop_) {
    AwaitSentinel();
    sentinel_.Dismiss();
    log_->error("{}; not starting the workers", pending_stop_->second);
    return pending_stop_->first;
  }
  // After the sentinel's start began (SetUpProcess): its spawn runs beside these files and the runtime's.
  PrepareScratch();
  try {
    std::string unhealthy = CheckNode(0);
    if (make_link_) {
      link_ = make_link_(unhealthy);
      WatchFd(link_->event_fd(), POLLIN, [this](short) { OnJobDecisions(); });
      WatchFd(worker_watch_->stacks_fd(), POLLIN, [this](short) { AnswerStacks(); });
    }
    AwaitSentinel();
    sentinel_.AddScratch(worker_watch_->directory().string());
    if (error_files_) sentinel_.AddScratch(error_files_->private_directory().string());
    while (true) {
      if (!unhealthy.empty()) {
        LeaveJob(unhealthy);
        break;
      }
      if (link_) JoinRound(restart_count_);
      if (rounds_started_ == 0) SetUpRecovery();
      StartWorkers();
      if (recovery_) HandOutWorld(plan_);
      Loop();
      FinishRun();
      if (!ShouldRestart()) break;
      if (!link_ || (!decision_->node_lost && !decision_->node_arrived)) {
        ++failure_restarts_;
        log_->warn("restarting all workers (restart {} of {}, --max-restarts)", failure_restarts_,
                   options_.max_restarts);
      }
      restart_count_ = link_ ? decision_->restart_round : restart_count_ + 1;
      unhealthy = CheckNode(restart_count_);
      if (!link_) {
        JobAssignment assignment = plan_.assignment;
        assignment.restart_count = restart_count_;
        plan_ = MakePlan(plan_.topology, plan_.layout, assignment, options_, env_);
      }
    }
  } catch (...) {
    AbandonJoin();
    KillEverything();
    throw;
  }
  AbandonJoin();
  if (stop_reason_ == StopReason::kFailure && options_.max_restarts > 0 &&
      failure_restarts_ >= options_.max_restarts) {
    log_->error("no restarts left (--max-restarts {}); exiting with the failed worker's code {}",
                options_.max_restarts, exit_code_);
  }
  // Told to quit, not waited for: it exits while this distrun cleans up, and is reaped last (~Supervisor).
  sentinel_.Release();
  // Everything else was killed and reaped by the loop; collect anything that raced with it.
  for (pid_t pid; (pid = ::waitpid(-1, nullptr, WNOHANG)) > 0;) {
    if (pid == sentinel_.pid()) sentinel_.SetReaped();
  }
  return exit_code_;
}

bool Supervisor::TakesTerminal(const WorkerPlan& plan) const {
  return plan.process_id == 0 &&
         terminal_fd_ >= 0;  // rank 0 reads distrun's stdin (SpawnSpec::inherit_stdin)
}

void Supervisor::AwaitSentinel() {
  if (!sentinel_starting_) return;
  std::shared_ptr<SentinelStart> starting = std::move(sentinel_starting_);
  try {
    sentinel_ = starting->Take();
  } catch (const std::exception& e) {
    log_->warn(
        "{}; if distrun is killed with SIGKILL, processes that left their worker's process group may "
        "survive",
        e.what());
  }
}

void Supervisor::WatchProgress(Clock::time_point now) {
  next_progress_ = now + kProgressInterval;
  if (!link_) return;
  NodeProgress progress = worker_watch_->Sample(restart_count_, now);
  if (recovery_) progress.recovery = RecoveryProgress(now);
  link_->ReportProgress(progress);
}

void Supervisor::AnswerStacks() {
  for (const StacksReply& reply : worker_watch_->TakeStacks()) {
    if (link_) link_->SendStacks(reply);
  }
}

void Supervisor::Loop() {
  std::vector<pollfd> fds;
  // The worker stream behind each pollfd before the extra watches (the signalfd's slot is SIZE_MAX), and
  // which of the slot's processes it was.
  struct Pipe {
    size_t slot;
    Stream stream;
    uint64_t spawns;
  };
  std::vector<Pipe> what;
  next_check_ = Clock::now();
  while (true) {
    Clock::time_point now = Clock::now();
    if (watchdog_armed_ && now >= next_pulse_) {
      sentinel_.Pulse();
      next_pulse_ = now + WatchdogPulse();
    }
    if (phase_ == Phase::kStopping && !local_done_ && (check_gone_ || now >= next_check_)) {
      check_gone_ = false;
      next_check_ = now + kStopTick;
      // Orphans keep arriving while their parents die: each gets the stop signal too.
      if (killed_ && !gave_up_) SignalJob(SIGKILL);
      if (JobGone()) {
        local_done_ = true;
        // Nothing of this node is left and nothing will start again: the sentinel may go while the rest
        // of the job is heard from (it is reaped before distrun exits).
        if (no_restart_ || (options_.max_restarts == 0 && !options_.elastic)) sentinel_.Release();
        if (AwaitingDecision()) log_->debug("this node is done; waiting for the rest of the job");
      } else if (!killed_) {
        SignalNewOrphans();
      }
    }
    if (phase_ == Phase::kStopping && local_done_ && !AwaitingDecision()) return;
    if (phase_ == Phase::kRunning && now >= next_progress_) WatchProgress(now);
    fds.clear();
    what.clear();
    fds.push_back({signal_fd_.get(), POLLIN, 0});
    what.push_back({SIZE_MAX, Stream::kStdout, 0});
    for (size_t i = 0; i < workers_.size(); ++i) {
      Worker& w = workers_[i];
      if (w.child.stdout_pipe()) {
        fds.push_back({w.child.stdout_pipe().get(), POLLIN, 0});
        what.push_back({i, Stream::kStdout, w.spawns});
      }
      if (w.child.stderr_pipe()) {
        fds.push_back({w.child.stderr_pipe().get(), POLLIN, 0});
        what.push_back({i, Stream::kStderr, w.spawns});
      }
    }
    const size_t first_watch = fds.size();
    for (const Watch& watch : watches_) fds.push_back({watch.fd, watch.events, 0});

    int n = ::poll(fds.data(), fds.size(), PollTimeoutMs(now));
    if (n < 0 && errno != EINTR) throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    if (n > 0) {
      if (fds[0].revents != 0) HandleSignals();
      for (size_t k = 1; k < first_watch; ++k) {
        const Pipe& pipe = what[k];
        if (fds[k].revents != 0 && workers_[pipe.slot].spawns == pipe.spawns)
          ReadPipe(pipe.slot, pipe.stream, fds[k].revents);
      }
      for (size_t k = first_watch; k < fds.size(); ++k) {
        if (fds[k].revents == 0) continue;
        // The callback may watch or unwatch fds: look it up again, and call a copy.
        auto it =
            std::find_if(watches_.begin(), watches_.end(), [&](const Watch& w) { return w.fd == fds[k].fd; });
        if (it == watches_.end()) continue;
        auto callback = it->on_ready;
        callback(fds[k].revents);
      }
    }
    CheckTimers(Clock::now());
  }
}

int Supervisor::PollTimeoutMs(Clock::time_point now) const {
  std::optional<Clock::time_point> wake;
  auto earliest = [&](Clock::time_point t) {
    if (!wake || t < *wake) wake = t;
  };
  if (phase_ == Phase::kRunning && timeout_at_) earliest(*timeout_at_);
  if (phase_ == Phase::kStopping && !local_done_) {
    earliest(next_check_);
    if (!gave_up_) earliest(killed_ ? give_up_at_ : kill_at_);
  }
  if (phase_ == Phase::kStopping && local_done_ && timeout_at_) earliest(*timeout_at_);
  if (watchdog_armed_) earliest(next_pulse_);
  if (phase_ == Phase::kRunning && link_) earliest(next_progress_);
  if (phase_ == Phase::kRunning && recovery_) {
    if (auto deadline = recovery_->NextDeadline()) earliest(*deadline);
    if (recovery_->WatchingFirstSteps()) earliest(next_first_steps_);
  }
  if (!wake) return -1;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(*wake - now).count();
  return static_cast<int>(std::clamp<decltype(ms)>(ms, 0, 60 * 60 * 1000));
}

void Supervisor::CheckTimers(Clock::time_point now) {
  if (phase_ == Phase::kRunning && recovery_) {
    recovery_->Tick(now);
    if (recovery_->WatchingFirstSteps() && now >= next_first_steps_) RecoveryProgress(now);
  }
  if (timeout_at_ && now >= *timeout_at_) {
    no_restart_ = true;
    if (phase_ == Phase::kRunning) {
      log_->error("the job ran for --timeout {}; stopping the workers (exit code {})",
                  FormatSeconds(options_.timeout_s), kTimeoutExit);
      BeginStop(StopReason::kTimeout, kTimeoutExit);
    } else if (local_done_ && AwaitingDecision()) {
      log_->error("the job ran for --timeout {} while this node waited for the others (exit code {})",
                  FormatSeconds(options_.timeout_s), kTimeoutExit);
      stop_reason_ = StopReason::kTimeout;
      exit_code_ = kTimeoutExit;
    }
  }
  if (phase_ != Phase::kStopping) return;
  if (!killed_ && now >= kill_at_) {
    if (!JobGone() && !hurried_) {
      log_->warn("workers still running {} after {} (--grace-period); sending SIGKILL",
                 FormatSeconds(options_.grace_period_s), SignalName(stop_signal_));
    }
    SignalJob(SIGKILL);
    killed_ = true;
    give_up_at_ = now + kKillWait;
  } else if (killed_ && now >= give_up_at_ && !gave_up_) {
    // A node that waits for the job's decision with nothing left (a hot spare) stays here: no error then.
    if (!JobGone()) {
      log_->error(
          "processes of the job did not exit {}s after SIGKILL (stuck in the kernel?); giving up on them",
          std::chrono::duration_cast<std::chrono::seconds>(kKillWait).count());
    }
    gave_up_ = true;
    check_gone_ = true;
  }
}

void Supervisor::BeginStop(StopReason reason, int exit_code, int first_signal) {
  if (phase_ == Phase::kStopping) return;
  phase_ = Phase::kStopping;
  stop_reason_ = reason;
  exit_code_ = exit_code;
  killed_ = false;
  hurried_ = false;
  signalled_while_stopping_ = false;
  const auto now = Clock::now();
  kill_at_ = now + std::chrono::duration_cast<Clock::duration>(
                       std::chrono::duration<double>(options_.grace_period_s));
  check_gone_ = true;
  stop_signal_ = first_signal;
  signalled_orphans_.clear();
  // A second Ctrl-C must reach distrun, which kills at once.
  TakeTerminal();
  // With every worker reaped (the job's success, or its last worker failing), the loop's check that
  // follows at once (check_gone_) finds orphans and SignalNewOrphans gives them this signal: one scan of
  // every thread's children at the end of a job, not two.
  SignalJob(first_signal, /*orphans=*/!WorkersReaped());
  // A stopped worker (Ctrl-Z, or reading the terminal) would only act on the signal once continued.
  for (Worker& w : workers_) {
    if (w.started) w.child.SignalGroup(SIGCONT);
  }
}

void Supervisor::HurryStop() {
  kill_at_ = Clock::now();
  hurried_ = true;
}

void Supervisor::TakeTerminal() {
  if (terminal_owner_ == 0) return;
  terminal_owner_ = 0;
  ::tcsetpgrp(terminal_fd_, ::getpgrp());
}

void Supervisor::SuspendJob(size_t slot, int signal) {
  const pid_t owner = terminal_owner_;
  log_->info("rank {} stopped ({}); stopping the job and distrun (fg continues them)",
             workers_[slot].plan.process_id, SignalName(signal));
  TakeTerminal();
  SignalRunningWorkers(SIGSTOP);
  // The shell sees distrun stop and resumes it with SIGCONT (fg or bg); execution goes on from here.
  ::kill(::getpid(), SIGSTOP);
  // Back in the foreground (fg): the terminal goes to rank 0 again before any worker runs, as a shell's fg
  // does it; a worker continued first would find its read of the terminal refused (SIGTTIN) and stop the
  // job again.
  if (owner != 0 && ::tcgetpgrp(terminal_fd_) == ::getpgrp()) {
    terminal_owner_ = owner;
    ::tcsetpgrp(terminal_fd_, owner);
  }
  SignalRunningWorkers(SIGCONT);
  log_->debug("continued");
}

void Supervisor::SignalNewOrphans() {
  // Only once the workers are gone: until then their children are theirs, and scanning /proc on every
  // tick of a long grace period would cost more than it finds.
  if (!WorkersReaped()) return;
  for (pid_t orphan : OwnChildren()) {
    if (orphan != sentinel_.pid() && signalled_orphans_.insert(orphan).second) ::kill(orphan, stop_signal_);
  }
}

int Supervisor::SignalRunningWorkers(int signal) {
  int count = 0;
  for (Worker& w : workers_) {
    if (w.started && !w.child.reaped() && w.child.SignalGroup(signal)) ++count;
  }
  return count;
}

bool Supervisor::WorkersReaped() const {
  for (const Worker& w : workers_) {
    if (w.started && !w.child.reaped()) return false;
  }
  return true;
}

void Supervisor::SignalJob(int signal, bool orphans) {
  for (Worker& w : workers_) {
    // Also after the worker was reaped: its group may still have members.
    if (w.started) w.child.SignalGroup(signal);
  }
  if (!orphans) return;
  for (pid_t orphan : OwnChildren()) {
    if (orphan == sentinel_.pid()) continue;
    ::kill(orphan, signal);
    signalled_orphans_.insert(orphan);
  }
}

void Supervisor::HandleSignals() {
  signalfd_siginfo info;
  while (true) {
    ssize_t n = ::read(signal_fd_.get(), &info, sizeof(info));
    if (n != static_cast<ssize_t>(sizeof(info))) return;
    const int sig = static_cast<int>(info.ssi_signo);
    if (sig == SIGCHLD) {
      Reap();
      continue;
    }
    const auto& forward = options_.forward_signals;
    if (std::find(forward.begin(), forward.end(), sig) != forward.end()) {
      log_->info("forwarded {} to {} worker(s)", SignalName(sig), SignalRunningWorkers(sig));
      continue;
    }
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      no_restart_ = true;
      if (local_done_ && AwaitingDecision()) {
        log_->warn("received {} while waiting for the other nodes; exiting", SignalName(sig));
        stop_reason_ = StopReason::kSignal;
        exit_code_ = 128 + sig;
      } else if (phase_ == Phase::kRunning) {
        log_->warn("received {}; stopping the workers ({} now, SIGKILL after --grace-period {})",
                   SignalName(sig), SignalName(sig), FormatSeconds(options_.grace_period_s));
        BeginStop(StopReason::kSignal, 128 + sig, sig);
      } else if (phase_ == Phase::kStopping && !killed_) {
        // Only a signal after a signal hurries the stop: a scheduler's cancel that arrives while distrun
        // already stops (a lost node, a failure) is the same request, and the workers' cleanup keeps its
        // grace period. The exit code stays that of the first reason to stop.
        if (stop_reason_ == StopReason::kSignal || signalled_while_stopping_) {
          log_->warn("received {} while stopping; killing the workers now", SignalName(sig));
          HurryStop();
        } else {
          signalled_while_stopping_ = true;
          log_->warn(
              "received {} while stopping; the workers keep their grace period (a second signal "
              "kills them now)",
              SignalName(sig));
        }
      }
      continue;
    }
    log_->info("ignoring {} (not in --forward-signals)", SignalName(sig));
  }
}

void Supervisor::Reap() {
  int status = 0;
  pid_t pid;
  while ((pid = ::waitpid(-1, &status, WNOHANG | WUNTRACED)) > 0) {
    if (WIFSTOPPED(status)) {
      const int sig = WSTOPSIG(status);
      auto it = std::find_if(workers_.begin(), workers_.end(), [pid](const Worker& w) {
        return w.started && !w.child.reaped() && w.child.pid() == pid;
      });
      // Ctrl-Z (or reading the terminal in the background) stops the job as a whole, as a shell expects.
      // Without a terminal there is no shell to continue the job: the stop is the stopper's business.
      if (it != workers_.end() && (sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) &&
          phase_ == Phase::kRunning && terminal_fd_ >= 0) {
        SuspendJob(static_cast<size_t>(it - workers_.begin()), sig);
      }
      continue;
    }
    check_gone_ = true;
    if (pid == sentinel_.pid()) {
      sentinel_.SetReaped();
      if (sentinel_.released()) continue;  // as told
      log_->warn(
          "the sentinel process (pid {}) exited; if distrun is killed with SIGKILL, processes that "
          "left their worker's process group may survive",
          pid);
      continue;
    }
    auto it = std::find_if(workers_.begin(), workers_.end(), [pid](const Worker& w) {
      return w.started && !w.child.reaped() && w.child.pid() == pid;
    });
    if (it == workers_.end()) {
      log_->trace("reaped pid {} ({})", pid, DescribeWaitStatus(status));
      continue;
    }
    it->child.SetReaped(status);
    if (pid == terminal_owner_) TakeTerminal();
    OnWorkerExit(static_cast<size_t>(it - workers_.begin()));
  }
}

void Supervisor::OnWorkerExit(size_t slot) {
  Worker& w = workers_[slot];
  const int status = w.child.wait_status();
  const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  worker_watch_->Exited(slot);
  if (recovery_) recovery_->Exited(slot);
  log_->debug("rank {} (pid {}) exited: {}", w.plan.process_id, w.child.pid(), DescribeWaitStatus(status));
  if (phase_ != Phase::kRunning) return;
  if (failed && RestartFailedWorker(slot)) return;
  if (failed) {
    root_cause_ = RootCause{slot, w.plan.process_id, w.plan.local_rank, w.child.pid(), status};
    log_->error("rank {} (pid {}) failed with {}{}", w.plan.process_id, w.child.pid(),
                DescribeWaitStatus(status), workers_.size() > 1 ? "; stopping the other workers" : "");
    BeginStop(StopReason::kFailure, ExitCodeOf(status));
    if (link_) {
      // After the local stop began: this node's workers need not wait for the network.
      FailedWorker f;
      f.host = env_.hostname;
      f.process_id = w.plan.process_id;
      f.exit_code = ExitCodeOf(status);
      f.description = DescribeWaitStatus(status);
      root_cause_here_ = link_->ReportFailure(f);
    }
    return;
  }
  bool all_done = std::all_of(workers_.begin(), workers_.end(),
                              [](const Worker& x) { return x.started && x.child.reaped(); });
  if (all_done) {
    log_->debug("every worker exited with code 0");
    BeginStop(StopReason::kSuccess, 0);
    if (link_) link_->ReportSuccess();
  }
}

void Supervisor::ReadPipe(size_t slot, Stream stream, short revents) {
  Worker& w = workers_[slot];
  UniqueFd& fd = stream == Stream::kStdout ? w.child.stdout_pipe() : w.child.stderr_pipe();
  if (!fd) return;
  // A pipe with no writer left says POLLHUP, with POLLIN only while bytes remain: POLLHUP alone is the
  // end of the stream, and the read that would say so is spared (two per worker at every job's end).
  // One read per wake-up otherwise, so that one busy worker cannot starve the others.
  ssize_t n = revents == POLLHUP ? 0 : ::read(fd.get(), buffer_.data(), buffer_.size());
  if (n > 0) {
    worker_watch_->Output(slot, Clock::now());
    output_.Write(slot, stream, std::string_view(buffer_.data(), static_cast<size_t>(n)));
    if (output_.ConsoleBroken(stream)) CloseBrokenStreams();
    return;
  }
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  output_.Finish(slot, stream);
  fd.Reset();
}

void Supervisor::CloseBrokenStreams() {
  // Without distrun, `train.py | head` ends train.py with SIGPIPE when head exits; with distrun in between
  // the workers see the same: their stdout (or stderr) pipe loses its reader. With --log-dir the files
  // still want everything, so the workers keep writing and only the console misses it.
  if (options_.log_dir) return;
  for (size_t i = 0; i < workers_.size(); ++i) {
    for (Stream stream : {Stream::kStdout, Stream::kStderr}) {
      if (!output_.ConsoleBroken(stream)) continue;
      UniqueFd& fd =
          stream == Stream::kStdout ? workers_[i].child.stdout_pipe() : workers_[i].child.stderr_pipe();
      if (!fd) continue;
      output_.Finish(i, stream);
      fd.Reset();
    }
  }
}

void Supervisor::DrainPipes() {
  for (size_t i = 0; i < workers_.size(); ++i) {
    for (Stream stream : {Stream::kStdout, Stream::kStderr}) {
      UniqueFd& fd =
          stream == Stream::kStdout ? workers_[i].child.stdout_pipe() : workers_[i].child.stderr_pipe();
      while (fd) {
        ssize_t n = ::read(fd.get(), buffer_.data(), buffer_.size());
        if (n > 0) {
          output_.Write(i, stream, std::string_view(buffer_.data(), static_cast<size_t>(n)));
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        // EOF, or nothing more for now (a process distrun gave up on still holds the pipe).
        output_.Finish(i, stream);
        fd.Reset();
      }
    }
  }
}

bool Supervisor::JobGone() {
  Reap();
  if (gave_up_) return true;
  for (Worker& w : workers_) {
    if (!w.started) continue;
    if (!w.child.reaped()) return false;
    if (w.child.SignalGroup(0)) return false;
  }
  // Every worker is reaped and its group empty: what could be left are orphans, all on the main thread's
  // list (one file, not three system calls per thread).
  for (pid_t pid : AdoptedChildren()) {
    if (pid != sentinel_.pid()) return false;
  }
  seen_gone_ = true;
  return true;
}

void Supervisor::FinishRun() {
  DrainPipes();
  if (root_cause_ && root_cause_here_) PrintFailureSummary();
}

void Supervisor::PrintFailureSummary() {
  const RootCause& rc = *root_cause_;
  std::string text = fmt::format("rank {} failed first (local rank {}, host {}, pid {}): {}", rc.rank,
                                 rc.local_rank, env_.hostname, rc.pid, DescribeWaitStatus(rc.wait_status));
  std::string problem;
  std::optional<TorchError> error = error_files_ ? error_files_->Read(rc.rank, &problem) : std::nullopt;
  if (!problem.empty()) log_->warn("{}", problem);
  if (error) {
    text += FormatTorchError(rc.rank, *error);
    log_->error("{}", text);
    return;
  }
  std::vector<std::string> tail = output_.StderrTail(rc.slot);
  if (tail.empty()) {
    text += fmt::format("\n  rank {} wrote nothing to stderr", rc.rank);
  } else {
    text += fmt::format("\n  last {} line(s) of rank {}'s stderr:", tail.size(), rc.rank);
    for (const std::string& line : tail) text += "\n    " + line;
  }
  log_->error("{}", text);
}

void Supervisor::KillEverything() {
  // The last resort (an exception, or the destructor): no grace, nothing left behind.
  // The loop saw the job gone, and with no worker, group or orphan left nothing could start a process of
  // the job since: no second scan of every thread's children at the end of each job (0.1 ms).
  if (seen_gone_) return;
  for (Worker& w : workers_) {
    if (w.started) w.child.SignalGroup(SIGKILL);
  }
  for (int round = 0; round < 100; ++round) {
    bool any = false;
    for (pid_t pid : OwnChildren()) {
      if (pid == sentinel_.pid()) continue;
      any = true;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    for (Worker& w : workers_) {
      if (w.started && !w.child.reaped()) {
        any = true;
        w.child.Wait();
      }
    }
    if (!any) break;
  }
}

}  // namespace distrun
