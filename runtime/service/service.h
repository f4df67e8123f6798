#pragma once
// The coordination service's logic (DESIGN §4): rendezvous, liveness bookkeeping, failure propagation,
// key-value store and barriers. No gRPC types here: runtime/transport/grpc_server.cc adapts it to the wire,
// and the tests drive it in-process with a fake clock.
//
// Calls that wait (Join, KvGet, Barrier) take a completion callback, run exactly once, outside the
// service's lock, possibly on another caller's thread. Waits end at their deadline when Tick() runs
// (the transport calls it on a timer). Event sinks run under the lock, so they must only queue.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "runtime/service/hang_watch.h"
#include "runtime/service/membership.h"
#include "runtime/service/service_snapshot.h"
#include "runtime/service/standby_coordinator.h"
#include "runtime/service/straggler_watch.h"
#include "runtime/service/takeover.h"
#include "runtime/service/types.h"

namespace distrun {

using RuntimeClock = std::function<std::chrono::steady_clock::time_point()>;

inline constexpr int kMaxWorkersPerNode = 1 << 16;

// What node 0's distrun makes of a hung job's stacks: the text it prints, and the ranks whose stacks stand
// apart from the majority's (the likely culprits), "rank 3 (host-b, pid 4242)".
struct HangExplanation {
  std::string text;
  std::vector<int> odd_ranks;
  std::string odd_summary;
};

struct ServiceConfig {
  int num_nodes = 1;  // the agents started, numbered by node rank for the job's life
  // The agent whose distrun hosts this service (node 0, or the standby that took over): it is in every
  // epoch, proposes the job's ports, and losing it ends the job as far as this service knows.
  int host_agent = 0;
  // Set: a standby's service, rebuilt from what the coordinator wrote through to it (DESIGN §4.5). Until
  // its decision it counts the agents that attach (StandbyCoordinator: their votes, within the heartbeat
  // timeout from its construction) and Tick decides: TakeOver, or the job's end naming the lost nodes.
  // num_nodes, run_id and worker_token must agree with it (the constructor checks).
  std::optional<ServiceSnapshot> resume;
  // Per-task jobs (one agent per task): the agents on one host are one node of an elastic job (its range,
  // seats and losses count hosts), learnt from the hosts of the first rendezvous.
  bool agents_share_hosts = false;
  // Elastic membership (runtime/service/membership.h). Unset: every node is needed and losing one ends the
  // job.
  std::optional<ElasticRange> elastic;
  // Elastic jobs: how long the first worker failure of an epoch waits before it is acted on, so that the
  // loss of a node that caused it (its peers' collectives fail when it dies) wins and the job goes on. After
  // it the failure still waits until every member of the epoch has been heard, hearing the coordinator,
  // since the report (a node cut off from node 0 kills its workers, and their peers fail before node 0
  // knows it lost that node), at most heartbeat_timeout + fence_wait.
  std::chrono::milliseconds failure_hold{0};
  // Elastic jobs: after a node is lost to heartbeat silence, the next epoch's workers start no sooner than
  // this, so that the lost node has fenced itself first (its sentinel and agent count the same timeout
  // from their own last contact, which may lag node 0's by a heartbeat interval).
  std::chrono::milliseconds fence_wait{0};
  // When Ticks stop for longer than half the heartbeat timeout, this process was frozen (a paused VM, a
  // stalled host), not the nodes: silence is judged no sooner than this after the next Tick, so that what
  // they sent meanwhile is read first (heartbeats, or the closed streams of nodes that went on without
  // it). 0: off (the unit tests' fake clocks jump).
  std::chrono::milliseconds freeze_grace{0};
  // Elastic jobs with scale-up now: how long after a node arrived (and the workers were told) the next epoch
  // begins with it.
  std::chrono::milliseconds scale_up_notice{0};
  int max_restarts = 0;
  // --recovery in-process: every join must say so, and each epoch's assignments carry the world's change
  // from the previous one (runtime/recovery/world_change.h).
  bool recovery_in_place = false;
  std::string run_id;
  // Handed to every node with its assignment, for its workers (DISTRUN_TOKEN); empty: none (the workers
  // use the token the nodes already share).
  std::string worker_token;
  std::vector<std::string> expected_hosts;  // by node rank, where known: names missing nodes in messages
  std::chrono::milliseconds initialization_timeout{300'000};
  std::chrono::milliseconds heartbeat_timeout{100'000};
  std::chrono::milliseconds max_wait{24 * 3600 * 1000};  // longer client timeouts are cut to this
  size_t max_key_bytes = 4096;
  size_t max_value_bytes = 1 << 20;
  size_t max_store_bytes = size_t{256} << 20;  // keys + values
  // The job's keys (kJobKeyPrefix) together, keys + values: each state change sends them all to the
  // standby in one message, which must stay under the agent channel's 4 MiB frames.
  size_t max_job_key_bytes = size_t{2} << 20;
  RuntimeClock clock;  // unset: steady_clock
  // The hang watch (runtime/service/hang_watch.h) and what it does on a hang: ask every node for its workers'
  // stacks (bounded by stacks_timeout), let `explain` turn them into what node 0's distrun prints (unset:
  // the one-line verdict only), then stop or restart the job with kHungExitCode.
  HangWatchConfig hang;
  std::chrono::milliseconds stacks_timeout{15'000};
  // Straggler detection (runtime/service/straggler_watch.h): judged once a window from the section
  // medians the nodes report; its events go to the host's distrun, and into Overview.
  StragglerConfig straggler;
  std::chrono::milliseconds straggler_window{5'000};
  std::function<HangExplanation(const std::string& verdict, const StacksReply& stacks)> explain;
};

class CoordinationService {
 public:
  using Clock = std::chrono::steady_clock;
  using JoinDone = std::function<void(const Status&, const NodeAssignment&)>;
  using ValueDone = std::function<void(const Status&, const std::string& value)>;
  using Done = std::function<void(const Status&)>;
  using EventSink = std::function<void(const JobEvent&)>;

  // Throws std::invalid_argument for a config that cannot work (no nodes).
  explicit CoordinationService(ServiceConfig config);
  ~CoordinationService();
  CoordinationService(const CoordinationService&) = delete;
  CoordinationService& operator=(const CoordinationService&) = delete;

  // Rendezvous: `done` runs when every node of the round joined, or with an error (bad request, timeout
  // naming the missing nodes, job stopped). A join that is `leaving` (its --node-check failed) loses the
  // node at once and is answered ABORTED.
  void Join(const NodeJoin& join, JoinDone done);

  // A node that arrives at a running elastic job (NodeJoin::arriving): admits it with the next node number
  // (*agent), or refuses it (no range, another run, the job full or over). The caller then attaches its
  // stream and sends its join as that node's: while an epoch runs it is answered at once as a spare (the
  // scale-up policy decides when it takes a seat, runtime/service/membership.h); while one forms, it takes
  // part. A node that claims a seat (NodeJoin::claims_seat: its rank is the coordinator's to give) gets the
  // first of the job's nodes (1 to N-1; node 0 is the service's host) that nobody took, in the order they
  // come, while the first rendezvous forms; after that, or with every seat taken, an elastic job admits it
  // as an arrival and any other refuses it.
  Status Admit(const NodeJoin& join, int* agent);

  // Liveness. An agent attaches its event stream once; `sink` gets every event for it, and the current
  // stop/complete event at once if the job already ended. Returns the stream's id for Heartbeat/Detach.
  // A node that was lost (elastic jobs go on without it) is fenced: whatever it sends, it is told to stop
  // with kFencedExitCode.
  Status AttachAgent(int node_rank, EventSink sink, uint64_t* stream_id);
  // Refreshes the node's deadline and answers with a heartbeat event. `unanswered`: how long the node had
  // heard nothing from the coordinator when it sent it (half the heartbeat timeout or more: it is about to
  // fence itself, so it does not vouch for its workers). `retransmitted`: the segments the transport had to
  // send the node again since its previous heartbeat (its link drops packets).
  // `round_trip`: how long the node's previous heartbeat waited for its answer (0: none measured).
  void Heartbeat(uint64_t stream_id, std::chrono::milliseconds unanswered = {}, uint32_t retransmitted = 0,
                 std::chrono::microseconds round_trip = {});
  // The stream broke: the node is dead at once unless it has finished or the job is over.
  void DetachAgent(uint64_t stream_id);

  // The first failure of a round is the root cause: every agent is told to stop (exit code of the root
  // cause) or, when restarts remain, to restart. `root_cause` says whether this report was the first.
  Status ReportFailure(int restart_round, const FailedWorker& failure, bool* root_cause);
  Status ReportSuccess(int node_rank, int restart_round);

  // Key-value store. Values are bytes; Add keeps a decimal int64.
  //
  // Writes (Set, Add, CompareAndSet, Delete) take `on_held`: when the write succeeded, it runs once the
  // write is held where a takeover finds it (DESIGN §4.5): at once for an epoch's key or where no
  // standby replicates, else when the standby acknowledged it, or lost it (the job then holds it on node 0
  // alone, as a job without a standby does). It never runs for a write that failed (the call's Status).
  Status KvSet(const std::string& key, const std::string& value, Done on_held = nullptr);
  void KvGet(const std::string& key, std::chrono::milliseconds timeout, ValueDone done);
  Status KvTryGet(const std::string& key, std::optional<std::string>* value);
  Status KvAdd(const std::string& key, int64_t delta, int64_t* value, Done on_held = nullptr);
  // `expected` unset: swap only when the key is absent.
  Status KvCompareAndSet(const std::string& key, const std::optional<std::string>& expected,
                         const std::string& desired, CasResult* result, Done on_held = nullptr);
  Status KvDelete(const std::string& key, bool* deleted, Done on_held = nullptr);
  Status KvList(const std::string& prefix, std::vector<std::pair<std::string, std::string>>* entries);

  // `count` 0: every worker of the current round, which must have finished rendezvous.
  void Barrier(const std::string& name, int process_id, int count, std::chrono::milliseconds timeout,
               Done done);

  // Progress and stacks (DESIGN §4.2, runtime/service/service_diagnosis.cc). A node's progress as of its
  // arrival.
  void ReportProgress(int node_rank, const NodeProgress& progress);
  using StacksDone = std::function<void(const StacksReply&)>;
  // Asks every attached agent for its workers' stacks; `done` runs once with what arrived when all answered
  // or `timeout` passed (the reply's `missing` names the nodes that did not answer).
  void CollectStacks(std::chrono::milliseconds timeout, StacksDone done);
  void ReportStacks(int node_rank, const StacksReply& reply);
  JobStatusView Overview() const;

  // The standby's side (runtime/service/service_standby.cc). What a standby must hold to take over now.
  ServiceSnapshot Snapshot() const;
  // The standby's agent applied every update up to `applied` (StandbyReplica::applied); `needs_snapshot`:
  // it refused one (a gap) and waits for a snapshot. From another stream than the standby's: ignored.
  void StandbyApplied(uint64_t stream_id, uint64_t applied, bool needs_snapshot = false);
  // A service built with `resume`: fences the nodes `decision` names (the old coordinator first) and
  // begins the next epoch without them, or ends the job when too few are left. Once, before any join; it
  // ends the service's own election (Tick takes over by itself once the agents decided it).
  Status TakeOver(const TakeoverDecision& decision);
  // A standby's service before its decision: attached agents are votes, not yet an epoch's nodes.
  bool Electing() const;

  // Ends every wait whose deadline passed and declares nodes dead whose heartbeats stopped.
  void Tick();
  // Fails every pending wait with UNAVAILABLE; later waits fail at once. For the transport's shutdown.
  void Shutdown();

  JobState State() const;
  bool RecoversInPlace() const { return config_.recovery_in_place; }
  int CurrentRound() const;
  std::optional<int> ExitCode() const;  // set once the job ended (0 when every node succeeded)
  std::optional<FailedWorker> RootCause() const;
  // The job's history so far: "3 epochs; 1 restart after a failure; 1 node lost: node 2 (host-c) in
  // epoch 1"; empty while the job is in its first epoch.
  std::string History() const;
  // "waiting for 2 of 3 nodes; missing: node 2 (host-c)"; empty outside rendezvous.
  std::string RendezvousProgress() const;
  // Liveness streams attached now. The host of the service waits for the other nodes' streams to end before
  // it takes the service down, so that the job's final event reaches every node.
  size_t AttachedAgents() const;

 private:
  using Completions = std::vector<std::function<void()>>;

  struct NodeState {
    std::optional<NodeJoin> join;  // this round
    std::string host;              // as it last joined, for messages after the round
    JoinDone join_done;
    std::optional<uint64_t> stream;
    std::optional<Clock::time_point> heartbeat_deadline;
    Clock::time_point heard_well{};  // last attached or heartbeat while it still heard the coordinator
    // The last heartbeat that said it had missed answers (nothing heard for 40 % of the timeout, two of
    // its heartbeat intervals): it hears the coordinator poorly, whose link may be the bad one.
    std::optional<Clock::time_point> heard_poorly;
    // Heartbeats that came only after the transport retransmitted: the last one, and the last one that
    // followed another within the heartbeat timeout (the link drops packets again and again; one lost
    // segment on a busy network is not a bad link).
    std::optional<Clock::time_point> retransmitted;
    std::optional<Clock::time_point> lossy;
    RoundTrips round_trips;
    bool succeeded = false;   // this round
    bool replicates = false;  // as it last joined
    bool claimed = false;     // a node that claimed its seat was given this one (Admit)
  };
  struct HeldFailure {
    FailedWorker failure;
    Clock::time_point reported;  // + failure_hold: the soonest it is acted on
  };
  struct KvWaiter {
    uint64_t id;
    Clock::time_point deadline;
    ValueDone done;
  };
  struct BarrierWaiter {
    Clock::time_point deadline;
    Done done;
  };
  struct BarrierState {
    int count = 0;  // resolved participant count
    bool all_workers = false;
    int first_process = 0;  // who set the count, for messages
    std::map<int, BarrierWaiter> arrived;
    Clock::time_point earliest_deadline = Clock::time_point::max();  // of `arrived`
  };

  Clock::time_point Now() const;
  std::string HostOf(int node_rank) const;  // as joined, else as expected; may be empty
  std::string NodeName(int node_rank) const;
  std::string WorkerName(int process_id) const;
  std::string MissingNodes() const;
  void SetHeartbeatDeadline(NodeState& node);
  // Whether a held failure is acted on now: every member of the epoch was heard well since it was
  // reported, or the longest a lost node can take to be declared lost has passed.
  bool HeldFailureIsDue(Clock::time_point now) const;
  void ExpireKvWaits(Clock::time_point now, Completions& completions);
  Status ValidateKey(const std::string& key) const;
  Status StoreValue(const std::string& key, const std::string& value, Completions& completions);
  void CompleteRendezvous(Completions& completions);
  void FailRendezvous(const Status& status, Completions& completions);
  void FailAllWaits(const Status& status, Completions& completions);
  void Broadcast(const JobEvent& event);
  void RecordFailure(const FailedWorker& failure, bool allow_restart, Completions& completions);
  // `silent`: lost to heartbeat silence, so it may still run until it fences itself (fence_wait).
  void LoseNode(int node_rank, const std::string& why, Completions& completions, bool silent = false);
  // Completes the rendezvous once every live agent joined, unless the epoch is held (fence_wait).
  void CompleteIfAllJoined(Completions& completions);
  // The current epoch's assignment of `agent`: its seat's, or a spare's.
  NodeAssignment AssignmentOf(int agent) const;
  // After LoseNode recorded a loss: the job stops (too few left), the epoch being formed goes on without the
  // node, or the next epoch begins (a member was lost while the workers ran).
  void GoOnWithout(const std::vector<int>& gone, bool member, Membership::Loss loss, FailedWorker f,
                   Completions& completions);
  void BeginEpoch(JobEvent event, Completions& completions);
  // After Admit: seat the arrival, or tell the job a change is coming and, with scale-up now, grow the world.
  void Arrived(int agent, Completions& completions);
  void GrowWorld(Completions& completions);
  int Agents() const { return static_cast<int>(nodes_.size()); }
  // `coordinator_lost`: the job ends because its coordinator was (a standby's election failed).
  // kHostOnly: only this service's host leaves (it fenced itself); the others, if any still hear it, turn
  // to the standby once its distrun exits, and a stream attached later is not told the job ended.
  enum class StopAudience { kEveryone, kHostOnly };
  void StopJob(const FailedWorker& failure, Completions& completions, bool coordinator_lost = false,
               StopAudience audience = StopAudience::kEveryone);
  bool Fenced(int node_rank) const;  // lost in an elastic job: what it says is refused
  JobEvent FencedEvent(int node_rank) const;
  static void Run(Completions& completions);
  // The constructor's part for a service built with `resume`.
  void Restore(const ServiceSnapshot& snapshot);
  void TakeOverLocked(const TakeoverDecision& decision, Completions& completions);
  // On Tick while electing: take over or end the job once the election decided. True while it waits.
  bool Elect(Clock::time_point now, Completions& completions);
  ServiceSnapshot SnapshotLocked() const;
  // Write-through (service_standby.cc). The epoch's standby can take updates now: it replicates, it is
  // not lost, and its stream is attached.
  bool Replicating() const;
  // Sends the standby a snapshot of the job (its state changed: an epoch, a loss, an arrival, a new
  // standby), or releases the held writes where no standby replicates.
  void ReplicateState(Completions& completions);
  // After a write of `key` (value unset: deleted): sends it to the standby if it is one of the job's keys
  // and holds `on_held` until the standby acknowledges it; otherwise `on_held` runs with the completions.
  void WriteThrough(const std::string& key, const std::optional<std::string>& value, Done on_held,
                    Completions& completions);
  void ReleaseHeldWrites(Completions& completions);
  // On the replicating standby's stream (Replicating() holds).
  void SendToStandby(StandbyUpdate update);
  // How `node` stands with this service's host for MayBeCutOff: lost, or it said within the heartbeat
  // timeout that it hardly hears the host, or its heartbeats came only after retransmissions twice, or it
  // has sent nothing for half the timeout.
  enum class Away { kNo, kLost, kHearsPoorly, kLossy, kLate };
  Away AwayFromHost(int node, Clock::time_point now) const;
  // After a loss: the nodes this service no longer hears, with those that said within the heartbeat timeout
  // that they hardly hear it, whose link dropped packets or who are late (a bad link of this host's: they
  // may turn to the standby next), include the standby that acknowledged the epoch `standby_epoch_` and are
  // a majority of its members, so the standby may be taking the job over on the other side. Those nodes,
  // each with how it is away (FenceHost names them so), or empty.
  std::vector<std::pair<int, Away>> MayBeCutOff() const;
  // This service's host leaves the job (fenced, exit code 75) rather than go on beside a standby's.
  void FenceHost(const std::vector<std::pair<int, Away>>& unheard, Completions& completions);
  // Records that `agent`'s node was lost (with every agent of it); returns the agents newly lost.
  std::vector<int> RecordLoss(int agent, Membership::Loss* loss);
  // service_diagnosis.cc: the hang and stall watch, and stack requests, on every Tick.
  void WatchProgress(Clock::time_point now, Completions& completions);
  uint64_t RequestStacks(std::chrono::milliseconds timeout, StacksDone done, Completions& completions);
  void ExpireStackRequests(Clock::time_point now, Completions& completions);
  void FinishStackRequest(uint64_t id, Completions& completions);
  void Hung(const HangVerdict& verdict, const std::string& headline, int round, const StacksReply& stacks);
  void SendToHost(const JobEvent& event);  // to node 0's agent: what its distrun prints
  // service_diagnosis.cc: straggler detection once a window, and what the job's page shows of the job.
  void WatchStragglers(Clock::time_point now);
  void Note(const std::string& line);  // a line of the job's recent events (Overview)
  // service_recoveries.cc: each recovery's record (runtime/recovery/recovery_ledger.h) from its decision
  // to every worker's first step, and node 0's line when it completes.
  void RecoveryBegan(const JobEvent& restart);
  // Why `who`, which recovers in place or not, cannot join this job (which does the other).
  std::string RecoveryMismatch(const std::string& who, bool in_place) const;
  // --recovery in-process, as a rendezvous completes: the world's change from the last world, into every
  // assignment of this epoch's.
  void ChangeWorld();
  void RecoveryAgreed(const WorldChange& change);
  void RecoveryReported(int node, const NodeRecovery& report);
  void ExpireRecoveries(Clock::time_point now);
  void AnnounceRecovery(const RecoveryRecord& record);
  void EpochBegan();
  void EpochEnded(const std::string& why);
  int64_t SinceStart(Clock::time_point t) const;

  ServiceConfig config_;
  mutable std::mutex mu_;
  bool shut_down_ = false;
  JobState state_ = JobState::kRendezvous;
  // The epoch; one more after each restart or lost member. Written under mu_; atomic so that CurrentRound,
  // which the torch store's loops read before each request, takes no lock.
  std::atomic<int> round_ = 0;
  int restarts_ = 0;                           // epochs begun after a worker failure (--max-restarts)
  std::vector<std::pair<int, int>> losses_;    // (node rank, epoch it was lost in)
  std::vector<std::pair<int, int>> arrivals_;  // (node rank, epoch it arrived in)
  std::optional<Clock::time_point> grow_at_;   // scale-up now: when the arrivals' epoch begins
  Clock::time_point hold_epoch_until_{};       // a silent node's fence_wait
  std::optional<Clock::time_point> last_tick_;
  std::optional<HeldFailure> held_failure_;
  Clock::time_point round_deadline_;
  std::vector<NodeState> nodes_;  // by node rank (the agent's number): the started nodes, then arrivals
  Membership membership_;
  bool grouped_ = false;  // agents_share_hosts: the nodes were learnt
  bool taken_over_ = false;
  // A standby's service until its decision: the agents that attach vote (resume).
  std::optional<StandbyCoordinator> election_;
  // Write-through to the epoch's standby (assignment's standby_agent): the last update sent and the last
  // acknowledged, and the writes held until an acknowledgement covers them.
  std::optional<int> standby_;
  uint64_t standby_sent_ = 0;
  uint64_t standby_acked_ = 0;
  std::vector<std::pair<uint64_t, Done>> held_writes_;
  // What a standby could take over with: the members (nodes) of the epoch of each snapshot sent, and of the
  // latest one the standby acknowledged.
  struct StandbyEpoch {
    uint64_t seq = 0;
    int standby_node = -1;
    int epoch = 0;
    std::vector<int> members;
  };
  std::vector<StandbyEpoch> sent_epochs_;
  std::optional<StandbyEpoch> standby_epoch_;
  int joined_ = 0;     // nodes with a join this round
  int succeeded_ = 0;  // nodes that reported success this round
  // Lower bounds of the heartbeat and key-value wait deadlines, so that Tick scans only when one passed.
  Clock::time_point earliest_heartbeat_deadline_ = Clock::time_point::max();
  Clock::time_point earliest_kv_deadline_ = Clock::time_point::max();
  std::map<uint64_t, int> streams_;  // stream id → node rank
  std::map<uint64_t, EventSink> sinks_;
  uint64_t next_id_ = 1;
  std::vector<NodeAssignment> assignments_;  // by node rank of the epoch (seat), once rendezvous completed
  std::map<int, AgentRanks> world_ranks_;    // the last completed world's, by agent (recovery in place)
  std::optional<FailedWorker> root_cause_;
  std::optional<int> exit_code_;
  std::optional<JobEvent> final_event_;
  std::optional<JobEvent> restart_event_;  // the latest restart, for streams that attach after it

  struct StacksRequest {
    std::set<int> waiting;  // nodes asked that have not answered
    StacksReply reply;
    Clock::time_point deadline;
    StacksDone done;
  };
  HangWatch hang_watch_;
  bool diagnosing_ = false;  // a hang was declared; its stacks are being collected
  Clock::time_point next_watch_{};
  bool stall_said_ = false;  // the current stall was reported
  std::map<uint64_t, StacksRequest> stack_requests_;
  uint64_t next_stacks_id_ = 1;
  std::optional<int> hung_round_;        // the round the hang watch declared hung
  std::optional<int64_t> hung_at_step_;  // its least advanced ranks' step, when others were ahead

  RecoveryLedger ledger_{Clock::time_point{}};  // counted from started_ (the constructor)
  StragglerWatch straggler_watch_;
  std::map<int, std::vector<RankSectionMedians>> node_sections_;  // by node: its latest report's
  Clock::time_point next_straggler_window_{};
  Clock::time_point started_;
  std::deque<std::pair<int64_t, std::string>> events_;  // (ms since start, line), the latest kEventsKept
  std::vector<EpochSpan> epochs_;

  std::map<std::string, std::string> store_;
  size_t store_bytes_ = 0;
  size_t job_key_bytes_ = 0;  // of store_'s job keys
  std::map<std::string, std::vector<KvWaiter>> kv_waiters_;
  std::map<std::string, BarrierState> barriers_;
};

}  // namespace distrun
