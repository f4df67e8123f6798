#pragma once
// What the launcher uses (every distrun is an agent, also in local mode): connect to the coordination
// service (over the agent channel, runtime/transport/agent_channel.h; node 0 in process,
// in_process_stream.h), keep this node's liveness stream, join rendezvous, report failures and success, and
// learn of job stops. Events are queued and announced on an eventfd, so the supervisor's poll loop can watch
// it.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/service/types.h"
#include "runtime/transport/agent_channel.h"
#include "runtime/transport/grpc_client.h"
#include "runtime/transport/in_process_stream.h"

namespace distrun {

// Where an agent turns when its coordinator is lost in an elastic job (DESIGN §4.5): the epoch's standby.
struct FailoverTarget {
  std::string address;  // the standby's host:port: the job's coordinator address from now on
  // This node is the standby: its own service, rebuilt from its copy of the job, in this process.
  CoordinationService* in_process_service = nullptr;
  // Remote standbys: a fresh munge credential for each hello, made for the standby's port.
  std::function<std::string(int port)> credential;
};

struct AgentConfig {
  std::string coordinator_address;
  // Node 0's agent lives in the process that hosts the service: it calls it directly (InProcessStream).
  CoordinationService* in_process_service = nullptr;
  std::string token;
  // Remote agents: a fresh munge credential for each hello (AgentChannelOptions::credential).
  std::function<std::string(int port)> credential;
  NodeJoin join;  // this node; restart_round is filled in by the agent
  std::chrono::milliseconds initialization_timeout{300'000};
  std::chrono::milliseconds heartbeat_interval{1'000};
  // No answer from the coordinator for this long: it is considered dead and the job stops.
  std::chrono::milliseconds heartbeat_timeout{100'000};
  // Asked on the agent's heartbeat thread when the coordinator is lost (stream break or silence) before the
  // job ended: where to turn instead, or nullopt to stop as without a standby. The agent then waits up to
  // the heartbeat timeout for an answer there. Null: never.
  std::function<std::optional<FailoverTarget>(const std::string& why)> on_coordinator_lost;
};

// Ports node 0 proposes for a round (an elastic job's fresh ones per epoch); 0: none.
struct ProposedPorts {
  int master_port = 0;
  int jax_port = 0;
};

// How soon news of a node's progress may follow the last, given its heartbeat interval: at least a second
// apart, and no more than twice the heartbeats' rate, since node 0 hears from every node of a large job in
// turn and a rank that moves every step would otherwise send news every second.
std::chrono::milliseconds ProgressNewsInterval(std::chrono::milliseconds heartbeat_interval);

// The supervisor reads its board every 250 ms; a view older than this was not refreshed because this
// process was not running (SIGSTOP, a paused VM), and is not sent: aged by that time, a healthy rank would
// look stuck. Node 0 leaves the node's ranks out until a fresh view comes (HangWatchConfig::overdue).
inline constexpr std::chrono::milliseconds kProgressFreshFor{1'000};
// What a heartbeat at `now` carries of the progress the supervisor last set at `read_at`: aged to now, or
// nothing when there is none or it is older than kProgressFreshFor.
std::optional<NodeProgress> ProgressToSend(const std::optional<NodeProgress>& progress,
                                           std::chrono::steady_clock::time_point read_at,
                                           std::chrono::steady_clock::time_point now);

// How often each agent of a job of `num_nodes` sends a heartbeat, given the heartbeat timeout.
std::chrono::milliseconds HeartbeatInterval(std::chrono::milliseconds timeout, int num_nodes);

class Agent {
 public:
  // Opens the liveness stream at once, so that the wait for rendezvous is already watched.
  explicit Agent(AgentConfig config);
  // Closes the stream (a node that has not reported success is then lost to the service) and joins the
  // agent's threads.
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Rendezvous for `restart_round` (0 first, then the round a kRestart event named); blocks up to the
  // initialization timeout. `ports`: node 0's proposal for this round instead of its first one.
  // `fresh_local`: NodeJoin::fresh_local for this round (--recovery in-process).
  Status Join(int restart_round, NodeAssignment* assignment, std::optional<ProposedPorts> ports = {},
              const std::vector<int>& fresh_local = {});
  // Ends a Join blocked on another thread at once, with CANCELLED (this node gives up on the round).
  void CancelJoin();
  // Tells the service that this node leaves the job (instead of joining `restart_round`) for `reason`, and
  // waits (bounded) until it has heard it.
  void Leave(int restart_round, const std::string& reason);
  Status ReportFailure(const FailedWorker& failure, bool* root_cause);
  Status ReportSuccess();

  // This node's progress as the supervisor last read it (DESIGN §4.2): it goes with the next heartbeat, or
  // sooner (at most once a second, or once per half heartbeat interval in large jobs) when the node's least
  // advanced rank moved.
  void SetProgress(const NodeProgress& progress);
  // The answer to a kStacks event.
  void SendStacks(const StacksReply& reply);

  // Readable while events are queued. The loss of the coordinator arrives as a kStop event whose root
  // cause says so.
  int event_fd() const { return event_fd_; }
  std::vector<JobEvent> TakeEvents();
  // Waits up to `timeout` for an event other than heartbeats (for callers without a poll loop).
  std::optional<JobEvent> WaitForEvent(std::chrono::milliseconds timeout);

  // What this node holds of the job as the epoch's standby (DESIGN §4.5): the coordinator's updates, as
  // far as they were applied; unset while it never was the standby.
  std::optional<ServiceSnapshot> StandbyCopy() const;
  // The coordinator's address now: the configured one (of several: the one that answered), or the
  // standby's after a failover.
  std::string coordinator_address() const;

 private:
  // Opens the stream of generation `generation` to `target` (the configured coordinator when null).
  std::shared_ptr<AgentStream> OpenStream(uint64_t generation, const FailoverTarget* target,
                                          const std::optional<NodeJoin>& first_join);
  std::shared_ptr<AgentStream> Stream() const;
  void Push(const JobEvent& event);
  // Under mu_: for TakeEvents/WaitForEvent, and the event descriptor says "look".
  void QueueEventLocked(JobEvent event);
  // `generation`: the stream that said so; a replaced stream's end changes nothing. With on_coordinator_lost
  // the heartbeat thread asks where to turn (FailOver); without, the job ends for this node.
  void CoordinatorLost(const std::string& why, uint64_t generation);
  void StopForLostCoordinatorLocked(const std::string& why);  // queues the job's end for this node
  // On the heartbeat thread: turns to the standby the hook names, or ends the job as lost.
  void FailOver(std::unique_lock<std::mutex>& lock);
  void HeartbeatLoop();

  AgentConfig config_;
  int event_fd_ = -1;
  int round_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<JobEvent> events_;
  bool ended_ = false;    // a stop or completion arrived, or the coordinator was lost
  bool closing_ = false;  // the destructor runs
  std::chrono::steady_clock::time_point started_;
  std::optional<std::chrono::steady_clock::time_point> last_answer_;
  // Silence allowed beyond the heartbeat timeout until the next answer: after a failover, the standby may
  // hear the old coordinator for up to one more timeout before it serves (a bad link of the coordinator's
  // reaches each node at its own time).
  std::chrono::steady_clock::duration grace_{};
  // The oldest heartbeat still waiting for its answer, and the last round trip measured and not yet
  // reported (sent with the next heartbeat: node 0 keeps them, distrun_heartbeat_round_trip_seconds).
  std::optional<std::chrono::steady_clock::time_point> beat_out_;
  std::chrono::microseconds round_trip_{};
  std::string lost_reason_;  // why the liveness stream ended, once it has
  bool stream_closed_ = false;
  std::optional<JobEvent> join_answer_;  // the answer to the latest join
  bool join_cancelled_ = false;          // CancelJoin, for the join in progress
  int restart_seen_ = 0;                 // the latest round a restart event named

  std::optional<NodeProgress> progress_;
  std::chrono::steady_clock::time_point progress_read_;  // when the supervisor read progress_
  bool progress_news_ = false;                           // the least advanced rank moved since the last send
  std::chrono::steady_clock::time_point progress_sent_;

  // The standby's copy of the job; its acknowledgement goes out from the heartbeat thread, at once.
  StandbyReplica replica_;
  bool standby_ack_ = false;
  bool standby_needs_snapshot_ = false;

  // The failover (AgentConfig::on_coordinator_lost): the stream's generation (one more per failover),
  // why the coordinator was lost while the hook has yet to answer, and the address now.
  uint64_t generation_ = 0;
  std::optional<std::string> failover_why_;
  std::string coordinator_address_;
  std::string failed_over_;  // "the coordinator at A was lost (why)", once the agent turned to a standby
  std::string stopped_after_failover_;  // the stop's reason, once the standby was lost too
  int agent_number_ = -1;               // as the coordinator numbered this node (an arrival's, once admitted)

  // Node 0's agent calls the service in its own process (InProcessStream); every other one speaks the agent
  // channel. Replaced on a failover: callers hold their copy for the call.
  mutable std::mutex stream_mu_;
  std::shared_ptr<AgentStream> stream_;
  std::thread heartbeat_;
};

}  // namespace distrun
