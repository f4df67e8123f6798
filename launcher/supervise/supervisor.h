#pragma once
// Per-node supervision (DESIGN §3.2): starts the plan's workers and runs the one event loop that owns their
// output pipes, a signalfd and the timers (grace period, --timeout), until the job ends. Then every process
// the job started is gone: workers run in their own process groups with PR_SET_PDEATHSIG, distrun is a
// child subreaper that kills and reaps orphaned descendants at teardown, and a sentinel process covers a
// distrun killed with SIGKILL (launcher/supervise/sentinel.h).
//
// With a job link (launcher/job/job_link.h) the job spans nodes: each round of workers starts after
// rendezvous, a failure anywhere stops (or restarts) the workers everywhere, and distrun exits once the job
// has ended on every node.
//
// Exit codes: 0 when every worker exits 0; else the root cause's (the first worker to fail: its exit code,
// or 128 + N for signal N); 128 + N when distrun gets SIGINT, SIGTERM or SIGHUP; 124 for --timeout;
// 127 when the command is not found, 126 when it cannot be executed.

#include <poll.h>
#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "detect/environment.h"
#include "launcher/config/options.h"
#include "launcher/job/job_link.h"
#include "launcher/plan/plan.h"
#include "launcher/process/output.h"
#include "launcher/process/spawn.h"
#include "launcher/process/unique_fd.h"
#include "launcher/recovery/in_place_recovery.h"
#include "launcher/supervise/error_files.h"
#include "launcher/supervise/sentinel.h"
#include "launcher/supervise/worker_watch.h"

namespace spdlog {
class logger;
}

namespace distrun {

class RendezvousThread;
class WorkerChannel;

inline constexpr int kTimeoutExit = 124;

// The signals the supervisor reads from its signalfd: SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2 and
// `options.forward_signals`.
sigset_t SupervisedSignals(const Options& options);

// Blocks them in the calling thread for the rest of the process, before anything starts a thread: threads
// inherit the mask, and one that leaves SIGCHLD unblocked takes a worker's exit notice and drops it (the
// default action), so the signalfd never hears of that exit and the job never ends; a SIGTERM it takes
// ends distrun without stopping the workers. GPU discovery starts the CUDA driver's threads (cuInit), the
// MPI probe MPI's. Supervisor::Run blocks them too, for callers that did not.
void BlockSupervisedSignals(const Options& options);

// Made by Run once distrun's signals are blocked, so that threads the link starts never take them.
// `leaving` non-empty: this node's --node-check failed; the link says so to the job instead of joining it.
using JobLinkFactory = std::function<std::unique_ptr<JobLink>(const std::string& leaving)>;

// Under --recovery in-process the supervisor carries out what the node's recovery asks (RecoveryActions).
class Supervisor : private RecoveryActions {
 public:
  // `options.command` is what every worker runs. Without `make_link` this node is the whole job. Throws
  // UsageError for an unusable --log-dir.
  Supervisor(Plan plan, Options options, Environment env, std::shared_ptr<spdlog::logger> log,
             JobLinkFactory make_link = nullptr);
  ~Supervisor() override;
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // An extra event source for the loop (the runtime's connection): `on_ready` runs with poll's revents
  // whenever `events` are ready on `fd`. The caller keeps owning `fd`.
  void WatchFd(int fd, short events, std::function<void(short revents)> on_ready);
  void UnwatchFd(int fd);

  // Ends the job from outside (a failure on another node): the workers are stopped (SIGTERM, grace,
  // SIGKILL), there is no restart, and Run returns `exit_code`. Ignored when the job is already stopping.
  void StopJob(int exit_code, const std::string& reason);

  // The sentinel, started early by the caller (SentinelStart) so that its spawn overlaps detection and
  // planning; without one, Run starts it. Call before Run.
  void AdoptSentinel(std::shared_ptr<SentinelStart> starting) { sentinel_starting_ = std::move(starting); }

  // Starts the workers, supervises them (restarting up to --max-restarts times), tears everything down
  // and returns distrun's exit code. Throws JobLinkError when the job cannot be formed (rendezvous).
  int Run();
  // After Run: the job link, for the caller to finish and end (null without one).
  std::unique_ptr<JobLink> ReleaseLink() { return std::move(link_); }
  // After Run: the threads that started the workers, idle now. A caller that ends the process at once
  // (EndJob) leaves them to the exit instead of waking and joining each one.
  std::unique_ptr<Spawner> ReleaseSpawner() { return std::move(spawner_); }

 private:
  using Clock = std::chrono::steady_clock;
  enum class Phase { kIdle, kRunning, kStopping };
  enum class StopReason { kNone, kSuccess, kFailure, kSignal, kTimeout, kExternal, kSpawnError, kRestart };

  struct Worker {
    WorkerPlan plan;
    Child child;
    bool started = false;
    // Processes started in this slot: a slot started again alone (recovering in place) has new pipes,
    // perhaps on the old ones' descriptors, which poll's answer for the old ones must not close.
    uint64_t spawns = 0;
  };
  struct RootCause {
    size_t slot = 0;
    int rank = 0;
    int local_rank = 0;
    pid_t pid = 0;
    int wait_status = 0;
  };
  struct Watch {
    int fd;
    short events;
    std::function<void(short)> on_ready;
  };

  // Worker `slot`'s spawn from the plan (its output begins; `clear_error_file`: an earlier one's is gone),
  // and the child that started from it.
  void MakeSpec(size_t slot, SpawnSpec& spec, bool clear_error_file);
  // What the sentinel knows worker `slot` by (sentinel.h's FingerprintOf, and this node's channel).
  std::vector<std::string> FingerprintFor(size_t slot) const;
  void Adopt(size_t slot, Child child);

  // --recovery in-process (supervisor_recovery.cc; ARCHITECTURE.md, "Recovering in place"). The worker
  // channel and the node's recovery, made before the first workers start (a job without a link has none).
  void SetUpRecovery();
  bool Send(size_t slot, const WorkerMessage& message) override;
  void Restart(size_t slot, const std::string& why) override;
  void Join(int generation, const std::vector<int>& fresh_local) override;
  // Ends a join still in progress (the job ends, or a newer generation replaces it).
  void AbandonJoin();
  // Hands the recovery the workers' progress reports (often while it awaits their first steps) and returns
  // this node's phases of the latest recovery, for its progress report; unset before any.
  std::optional<NodeRecovery> RecoveryProgress(Clock::time_point now);
  void OnChannel();
  // A restart decision (or a failover to the standby) while the workers run: they keep running.
  void ChangeInPlace(const JobDecision& decision);
  void JoinInPlace(int generation, const std::vector<int>& fresh_local);
  void OnJoinedInPlace();
  // The world of `plan` to this node's workers (the recovery sends it, or keeps it for a worker's hello).
  void HandOutWorld(const Plan& plan);
  // Kills the worker in `slot` (if it runs) and starts it again, from the current plan.
  void RestartSlot(size_t slot, const std::string& why);
  // A worker that failed while the job runs: started again alone and reported to the job. False when the
  // job cannot take it in place (no --max-restarts), and the ordinary stop follows.
  bool RestartFailedWorker(size_t slot);

  void SetUpProcess();
  // The workers' scratch files: torch's error files, the progress board, the Python site, stacks.
  void PrepareScratch();
  // "" when the node is healthy (or has no --node-check); else why it is not.
  std::string CheckNode(int epoch);
  void ArmWatchdog(bool on);
  Clock::duration WatchdogPulse() const;
  // Tells the job that this node goes (its --node-check failed); distrun then exits with kFencedExitCode.
  void LeaveJob(const std::string& reason);
  void JoinRound(int round);
  void OnJobDecisions();
  // A change of the world is coming (a node arrived): tell the workers (--change-signal).
  void NoticeChange(const std::string& what);
  // Whether this node's part is over but the job's decision (stop, restart, complete) is still to come.
  bool AwaitingDecision() const;
  void StartWorkers();
  void Loop();
  void FinishRun();
  bool ShouldRestart() const;
  // Takes the sentinel started on a thread of its own, before anything needs it.
  void AwaitSentinel();
  // Whether this worker becomes the terminal's foreground group (it has distrun's stdin, a terminal).
  bool TakesTerminal(const WorkerPlan& plan) const;

  void BeginStop(StopReason reason, int exit_code, int first_signal = SIGTERM);
  // The stop kills at once (SIGKILL on the next turn, without the grace period); the caller said why.
  void HurryStop();
  // Sends `signal` to the process group of every worker that runs; returns how many got it.
  int SignalRunningWorkers(int signal);
  // Every group of workers, and the orphans this subreaper adopted (unless `orphans` is false).
  void SignalJob(int signal, bool orphans = true);
  void SignalNewOrphans();
  bool WorkersReaped() const;
  void HandleSignals();
  void Reap();
  void OnWorkerExit(size_t slot);
  // `revents`: what poll said of the pipe.
  void ReadPipe(size_t slot, Stream stream, short revents);
  void DrainPipes();
  void CloseBrokenStreams();
  void CheckTimers(Clock::time_point now);
  bool JobGone();
  int PollTimeoutMs(Clock::time_point now) const;
  void PrintFailureSummary();
  std::vector<std::string> WorkerEnvironment(size_t slot, const WorkerPlan& plan) const;
  // The hang watch's part on this node: progress to the job, stacks on request
  // (launcher/supervise/worker_watch.h).
  void WatchProgress(Clock::time_point now);
  void AnswerStacks();
  void KillEverything();
  // Job control when distrun's stdin is its terminal: rank 0, the worker that reads it, gets the
  // terminal (Ctrl-C and Ctrl-Z go to rank 0's group); distrun takes it back to stop the job.
  void TakeTerminal();
  void SuspendJob(size_t slot, int signal);

  Plan plan_;
  Options options_;
  Environment env_;
  std::shared_ptr<spdlog::logger> log_;
  JobLinkFactory make_link_;
  std::unique_ptr<JobLink> link_;
  std::optional<JobDecision> decision_;  // the job's, for this round
  bool root_cause_here_ = true;          // this node's failure was the job's first
  bool local_done_ = false;              // every process this node started in this round is gone
  Output output_;
  std::optional<ErrorFiles> error_files_;  // with the torch family of variables (after output_: --log-dir)
  // Declared before the workers: its threads end (and so fire their children's parent-death signal) only
  // after the workers are gone.
  std::unique_ptr<Spawner> spawner_;
  std::vector<Worker> workers_;
  std::vector<Watch> watches_;
  std::optional<WorkerWatch> worker_watch_;
  Clock::time_point next_progress_{};

  sigset_t handled_{};
  std::optional<rlimit> workers_descriptor_limit_;  // set when node 0 raised its own (SetUpProcess)
  std::vector<int> non_default_signals_;            // after SetUpProcess: what each worker resets (spawn.h)
  sigset_t old_mask_{};
  bool mask_saved_ = false;
  struct sigaction old_sigpipe_ {};
  struct sigaction old_sigttou_ {};
  int terminal_fd_ = -1;      // distrun's stdin, when it is the terminal and distrun is in the foreground
  pid_t terminal_owner_ = 0;  // the worker group that has the terminal
  UniqueFd signal_fd_;
  Sentinel sentinel_;
  std::shared_ptr<SentinelStart> sentinel_starting_;  // distrun-sentinel being started on a thread

  Phase phase_ = Phase::kIdle;
  StopReason stop_reason_ = StopReason::kNone;
  int exit_code_ = 0;
  bool watchdog_armed_ = false;  // the sentinel fences this node if distrun stops pulsing (ArmWatchdog)
  Clock::time_point next_pulse_;
  int restart_count_ = 0;     // the epoch: every start of the workers after the first
  int failure_restarts_ = 0;  // of those, the restarts after a worker failure (--max-restarts)
  int rounds_started_ = 0;    // StartWorkers calls in this process (an arrival's first may be epoch 3)
  bool no_restart_ = false;   // a signal, --timeout or StopJob ends the job whatever --max-restarts says
  std::optional<RootCause> root_cause_;
  std::optional<std::pair<int, std::string>> pending_stop_;  // StopJob before Run

  Clock::time_point start_;
  std::optional<Clock::time_point> timeout_at_;
  Clock::time_point kill_at_;
  int stop_signal_ = SIGTERM;
  std::set<pid_t> signalled_orphans_;  // during the grace period: each orphan gets the stop signal once
  bool killed_ = false;
  bool hurried_ = false;                   // HurryStop: the SIGKILL was announced, not a grace period's end
  bool signalled_while_stopping_ = false;  // a stop not begun by a signal got one: the next kills
  bool gave_up_ = false;                   // on processes that SIGKILL does not end
  bool seen_gone_ = false;  // JobGone found every group empty and no orphan since the workers' last start
  Clock::time_point give_up_at_;
  Clock::time_point next_check_;
  bool check_gone_ = false;
  std::vector<char> buffer_;

  std::unique_ptr<WorkerChannel> channel_;
  std::unique_ptr<InPlaceRecovery> recovery_;
  std::unique_ptr<RendezvousThread> joining_;  // this node's join of the generation being formed
  Clock::time_point next_first_steps_{};       // the next read of the board while first steps are awaited
};

}  // namespace distrun
