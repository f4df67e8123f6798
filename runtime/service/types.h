#pragma once
// Plain values exchanged by the runtime's parts: the service, the transport, the agent and the client. The
// wire form of each is in runtime/distrun.proto; these carry no gRPC or protobuf types, so code using them
// compiles without those headers.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/recovery/recovery_ledger.h"
#include "runtime/recovery/world_change.h"
#include "runtime/service/round_trips.h"
#include "runtime/service/service_snapshot.h"

namespace distrun {

enum class StatusCode {
  kOk,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kFailedPrecondition,
  kOutOfRange,
  kDeadlineExceeded,
  kResourceExhausted,
  kAborted,
  kUnavailable,
  kUnauthenticated,
  kCancelled,
};

struct Status {
  StatusCode code = StatusCode::kOk;
  std::string message;

  bool ok() const { return code == StatusCode::kOk; }
  static Status Ok() { return {}; }
};

const char* StatusCodeName(StatusCode code);

// A node's agent ends the job with this exit code when it is lost (broken stream, missed heartbeats):
// no worker exit code exists for it.
inline constexpr int kLostAgentExitCode = 1;
// A node that an elastic job went on without (lost, then heard from again) stops its workers and exits with
// this code (EX_TEMPFAIL: the node may join a later job).
inline constexpr int kFencedExitCode = 75;
// How the service's refusals of a fenced node begin, so that its agent can tell them from other failures.
inline constexpr char kFencedPrefix[] = "fenced: ";
// The key of an epoch's store that says a change of the world is coming (a node arrived and joins it at the
// next restart): workers may watch it and checkpoint first. Absent while nothing is coming.
inline constexpr char kChangeKey[] = "distrun/change";
// Keys under this prefix live as long as the job: restarts, lost nodes and a takeover keep them (a model's
// step, a checkpoint's path, a flag an operator set). Every other key is its epoch's and is dropped when
// the next one begins, so that a re-initialised worker never reads a dead epoch's address or NCCL id.
inline constexpr char kJobKeyPrefix[] = "job/";
inline bool IsJobKey(std::string_view key) { return key.starts_with(kJobKeyPrefix); }

struct NodeJoin {
  int node_rank = 0;
  int num_nodes = 0;
  std::string host;
  int local_workers = 0;
  std::vector<std::string> device_tokens;
  std::string run_id;
  int restart_round = 0;
  int proposed_master_port = 0;  // 0: none
  int proposed_jax_port = 0;
  std::string leaving;  // non-empty: the node leaves the job instead, for this reason (--node-check)
  // The node arrives at a running elastic job (distrun --join): its node_rank is unknown until the
  // coordinator admits it and gives it one; restart_round is the job's current one, whatever it says.
  bool arriving = false;
  // Its node_rank is unknown until the coordinator gives it the first free one of the job's nodes (torchrun's
  // c10d rendezvous: distrun --node-rank auto), or admits it as an arrival where all are there (elastic).
  bool claims_seat = false;
  std::string machine;  // gethostname: per-task jobs group their distrun processes by it (host may differ)
  // The host's name everywhere a host is shown or grouped by (labels, status, messages, the standby's
  // choice): node 0's `host` is the coordinator's address its workers reach (127.0.0.1,
  // --coordinator-address), so one machine would otherwise carry two names.
  const std::string& name() const { return machine.empty() ? host : machine; }
  // Its distrun keeps a standby's copy of the job when it is the epoch's standby (JobEvent kStandby) and
  // acknowledges each update (CoordinationService::StandbyApplied). A node that does not is never waited for.
  bool replicates = false;
  // host:port where this node's distrun would serve the job as its standby after a takeover (bound when it
  // started); empty: it cannot (a job without --nnodes, node 0).
  std::string standby_address;
  // --recovery in-process (ARCHITECTURE.md, "Recovering in place"): this node hands the next world to its
  // live workers instead of restarting them; every node of a job must say the same. `fresh_local`: its
  // local ranks held by processes that hold no training state (started again, or a spare's).
  bool recovers_in_place = false;
  std::vector<int> fresh_local;
};

struct NodeAssignment {
  int rank_offset = 0;
  int num_processes = 0;
  int num_nodes = 0;
  int node_rank = 0;
  std::string process0_host;
  int master_port = 0;
  int jax_port = 0;
  std::string run_id;
  int restart_round = 0;
  bool spare = false;  // a hot spare this epoch: no workers; node_rank is -1
  int agent = 0;       // the node's identity for the job's life: its launch node rank, or an arrival's number
  std::string worker_token;  // node 0's token for the workers (munge-protected jobs); empty: the agents'
  // The epoch's standby coordinator (DESIGN §4.5): the agent that holds a copy of the job and takes over
  // when the service's host is lost. Unset: none (a job without --nnodes, or an epoch of one node).
  std::optional<int> standby_agent;
  // Where the agents turn when the service's host is lost (host:port of the standby's distrun); empty: the
  // standby cannot serve (it gave no port), or there is none.
  std::string standby_address;
  // --recovery in-process: how this epoch's world follows the previous one (the same for every node).
  WorldChange change;
};

struct FailedWorker {
  int node_rank = -1;
  std::string host;
  int process_id = -1;  // -1: no single worker
  int exit_code = 1;
  std::string description;
};

// "rank 3 on node 1 (host-b): exited with code 7"
std::string DescribeFailure(const FailedWorker& failure);

// Progress (DESIGN §4.2): a rank that reported a step, as its node's distrun last read it.
struct RankProgress {
  int rank = 0;
  int64_t step = 0;
  int64_t advanced_ms_ago = 0;  // since the step last changed
  int64_t reported_ms_ago = 0;  // since the last report
  double steps_per_second = 0;  // over the last minute
  int pid = 0;
  std::string host;  // node 0's view (JobStatusView) only: where the rank runs
};
// A rank's sections (runtime/progress/progress_board.h): the median of each one's recent runs. In node 0's
// view (JobStatusView) also where it runs and its straggler score (runtime/service/straggler_watch.h;
// negative: not judged yet), from its worst section.
struct RankSectionMedians {
  int rank = 0;
  std::map<std::string, double> median_s;
  std::string host;
  double score = -1;
  bool straggler = false;
  std::string section;
  bool operator==(const RankSectionMedians&) const = default;
};
struct NodeProgress {
  std::vector<RankProgress> ranks;           // those that reported
  std::vector<RankSectionMedians> sections;  // ranks that ran sections lately
  int64_t slowest_interval_ms = 0;           // the slowest recent step interval once learned; 0 before
  int64_t quiet_ms = 0;  // every worker without CPU time or output for this long; 0: not quiet
  int workers = 0;       // running now
  int epoch = 0;         // the round they run in
  // --recovery in-process: this node's phases of the latest recovery (runtime/recovery/recovery_ledger.h).
  std::optional<NodeRecovery> recovery;
};

// `progress` as it stands `ms` milliseconds after it was read: every age (advanced, reported, quiet) grows.
NodeProgress AgedBy(NodeProgress progress, int64_t ms);

// One worker's stack as its node collected it (launcher/supervise/stack_collector.h).
struct WorkerStack {
  int rank = 0;
  std::string host;
  int pid = 0;
  std::string gpu;
  std::string mechanism;  // "python" or "native"
  std::string text;       // the raw dump
  std::string error;      // non-empty: no stack, and why
};
struct StacksReply {
  uint64_t id = 0;
  std::vector<WorkerStack> workers;
  std::vector<std::string> missing;  // nodes that did not answer in time
};

struct JobEvent {
  // kFailover is the agent's own, never on the wire: its coordinator was lost and it turned to the standby
  // (`notice` says so); the node's workers cannot go on in the lost coordinator's world.
  enum class Kind {
    kHeartbeat,
    kStop,
    kRestart,
    kComplete,
    kJoined,
    kNotice,
    kStacks,
    kDiagnosis,
    kStandby,
    kFailover
  };
  Kind kind = Kind::kHeartbeat;
  int exit_code = 0;          // kStop
  int restart_round = 0;      // kRestart: the round to join next
  bool node_lost = false;     // kRestart: a member was lost (elastic), not a worker failure
  bool node_arrived = false;  // kRestart: the world grows by nodes that arrived (elastic)
  bool warning = false;       // kDiagnosis: a warning (a stall, a straggler), not an error
  bool info = false;          // kDiagnosis: an ordinary line (a recovery's account), neither
  std::string notice;         // kNotice: a change of the world is coming (a node arrived), for the workers;
                              // kDiagnosis: what node 0's distrun prints (a hung or stalled job);
                              // kFailover: where the node turned
  uint64_t stacks_id = 0;     // kStacks: collect every worker's stack and answer with this id
  bool coordinator_lost = false;  // kStop: the agent itself lost the coordinator (cut off, or node 0 gone)
  FailedWorker root_cause;
  Status join_status;                           // kJoined: the answer to a join sent on the stream
  NodeAssignment assignment;                    // kJoined, when join_status is OK
  std::optional<StandbyUpdate> standby_update;  // kStandby: for the epoch's standby alone
};

struct CasResult {
  bool swapped = false;
  bool found = false;
  std::string current;  // the value before the call
};

enum class JobState { kRendezvous, kRunning, kSucceeded, kStopped };

// A job the hang watch found hung ends with this code (or restarts, when --max-restarts allows).
inline constexpr int kHungExitCode = 125;

// The job as node 0 sees it, for `distrun status`.
// One epoch of the job, for the job's page: when it began and ended (since the service started), and why it
// ended ("" while it runs).
struct EpochSpan {
  int epoch = 0;
  int64_t start_ms = 0;
  std::optional<int64_t> end_ms;
  int ranks = 0;
  std::string end;
};
// "rendezvous", "running", "succeeded", "stopped": the state's name on the wire and in node 0's JSON.
const char* JobStateName(JobState state);

// What each heartbeat says of the node's link to the coordinator (AgentHeartbeat.unanswered_ms and
// round_trip_us).
struct LinkNews {
  std::chrono::milliseconds unanswered{};  // how long this node has heard nothing from the coordinator
  std::chrono::microseconds
      round_trip{};  // its previous heartbeat's answer came this long after it (0: none)
};

// One node's heartbeat round trips (node 0's view).
struct NodeRoundTrips {
  int node = 0;
  std::string host;
  RoundTrips round_trips;
};

struct JobStatusView {
  JobState state = JobState::kRendezvous;
  int epoch = 0;
  int num_nodes = 0;
  std::string history;
  std::vector<RankProgress> ranks;           // ages as of now; with host and straggler score
  std::vector<RankSectionMedians> sections;  // ranks that ran sections lately
  std::string run_id;
  int64_t uptime_ms = 0;  // since the service started
  int restarts = 0;
  int nodes_lost = 0;
  bool hung = false;  // the hang watch declared the current epoch hung
  // Where the least advanced ranks were stuck, when some ranks were ahead of them (they are the hung ones);
  // unset: every rank alike.
  std::optional<int64_t> hung_at_step;
  double straggler_threshold = 0;
  std::vector<EpochSpan> epochs;                        // oldest first
  std::vector<std::pair<int64_t, std::string>> events;  // (ms since start, line), oldest first
  std::optional<std::chrono::milliseconds> hang_timeout;
  bool hang_timeout_learned = false;
  std::vector<std::string> nodes;  // "node 1 (host-b): 4 workers, quiet 12 s"
  // Each generation begun after a loss, a failure or an arrival (the latest, oldest first), and how many in
  // place (--recovery in-process) and by restart in all.
  std::vector<RecoveryRecord> recoveries;
  uint64_t recoveries_in_place = 0;
  uint64_t recoveries_restart = 0;
  std::vector<NodeRoundTrips> round_trips;  // nodes of the job that reported any, by node rank
};

}  // namespace distrun
