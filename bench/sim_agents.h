#pragma once
// What `distrun-bench rendezvous`'s simulations of agents (h2_agents.h, framed_agents.h) are given and
// what they report.

#include <netinet/in.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace distrun::bench {

// Starts a non-blocking connect of `fd` to `coordinator`; false (errno set) when it failed at once. On
// loopback, connection `index` leaves from one of several 127.x addresses: one source address has about
// 28,000 ephemeral ports, and the kernel's search for a free one lengthens as they fill, which from 15,000
// connections up cost the simulated agents more CPU than the coordinator spent. Real agents each come from
// a host of their own.
bool ConnectSpread(int fd, const sockaddr_in& coordinator, size_t index);

// What simulated agents report to the benchmark; each of rendezvous_bench.cc's simulations fills one.
struct AgentProgress {
  std::mutex mu;
  std::condition_variable cv;
  int answered = 0, joined = 0, passed = 0, finished = 0, failed = 0;
  double answered_at = 0, joined_at = 0, passed_at = 0;  // seconds from the start to the last agent's
  std::string first_error;
  std::atomic<uint64_t> heartbeats_answered{0};
  // Each answered heartbeat's round trip (ms), while `record_heartbeats` is set (distrun-bench scrape).
  std::atomic<bool> record_heartbeats{false};
  std::mutex heartbeat_mu;
  std::vector<float> heartbeat_ms;
  // distrun-bench elastic: agents that joined the round after a lost agent, and when the last one did
  // (MonotonicSeconds()).
  int rejoin_round = 0, rejoin_total = 0, rejoined = 0;
  double rejoined_at = 0;

  // One more agent reached a step (answered, joined, passed); the last of `total` sets its time.
  void Count(int AgentProgress::*counter, double AgentProgress::*last_at, int total, double start);
  void Finish(int total);
  // Once per agent (the caller keeps that); the first failure's words are kept for the report.
  void Fail(int rank, const std::string& why);
  // Until every agent passed (true) or one failed or the time is up (false).
  bool WaitPassed(int total, double timeout_s);
  bool WaitFinished(int total, double timeout_s);
  // Counts agents from now on that join `round`, until `total` of them did.
  void ExpectRejoin(int round, int total);
  void CountRejoin(int round);
  bool WaitRejoined(double timeout_s);
};

struct SimAgentsOptions {
  std::string address;  // the coordinator's, IPv4 "a.b.c.d:port"
  std::string token;    // the job token the coordinator expects
  int agents = 0;
  int per_connection = 1;   // agents sharing one connection (HTTP/2: each on streams of its own)
  int threads = 2;          // epoll loops; a connection and its agents belong to one
  int heartbeat_ms = 1000;  // 0: none
  bool rejoin = false;      // answer a restart event by joining its round, as distrun's agents do
  int first_rank = 0;       // the agents are node ranks first_rank .. first_rank + agents - 1
  int job_nodes = 0;        // the nodes their joins say the job started; 0: agents
  // The first liveness message joins round 0 (a job's start); false: it only attaches, as an agent that
  // turned to the standby after node 0's loss does, and joins when a restart names the round.
  bool join_first = true;
  // distrun-bench scrape: every heartbeat carries the node's progress of this many ranks (steps and two
  // sections' medians), as a node's distrun sends it; 0: none.
  int progress_ranks = 0;
  bool in_place = false;  // --recovery in-process: the joins say so (the survivors' workers kept state)
};

// Each heartbeat interval is cut into this many slots so that heartbeats spread as in real life.
inline constexpr int kHeartbeatSlots = 100;

// A simulation's epoll loop: its epoll set, an eventfd to wake it (key kWakeKey) and a timer for the
// heartbeat slots (key kTimerKey); the caller's descriptors take keys from kFirstKey on.
class SimLoopFds {
 public:
  static constexpr uint64_t kWakeKey = 0, kTimerKey = 1, kFirstKey = 2;

  SimLoopFds();  // throws std::runtime_error
  ~SimLoopFds();
  SimLoopFds(const SimLoopFds&) = delete;
  SimLoopFds& operator=(const SimLoopFds&) = delete;

  bool Watch(int fd, uint32_t events, uint64_t key);
  void Wake();
  void DrainWake();
  // Thread-safe: one expiry per slot, interval_ms / kHeartbeatSlots apart; 0 stops it.
  void SetHeartbeatInterval(int interval_ms);
  // Slots due since the last call (at most one interval's worth).
  uint64_t TakeSlots();
  int epoll_fd() const { return epoll_fd_; }

 private:
  void Close();
  int epoll_fd_ = -1, wake_fd_ = -1, timer_fd_ = -1;
};

// The coordinator's address as the simulations connect to it; throws std::invalid_argument unless IPv4.
sockaddr_in ParseIpv4(const std::string& address);

// "what: strerror(errno)", the words a simulated connection ends with.
std::string ErrnoText(const char* what);

// One epoll loop of a simulation, as the driver below sees it.
class SimLoop {
 public:
  virtual ~SimLoop() = default;  // wakes its thread, joins it and closes its sockets
  virtual void Wake() = 0;
  virtual void SetHeartbeatInterval(int interval_ms) = 0;
};

// Where the run is; every loop of a simulation reads it.
struct SimControl {
  std::atomic<double> start{0};  // MonotonicSeconds() at Start
  std::atomic<bool> started{false};
  std::atomic<bool> heartbeats{false};
  std::atomic<bool> stopping{false};
  std::atomic<int> drop_rank{-1};     // the agent whose connection its loop closes when woken
  std::atomic<double> dropped_at{0};  // MonotonicSeconds() just before that close
};

// A simulation of agents on epoll loops (framed_agents.h, h2_agents.h). The subclass makes the loops and
// says how many connections they hold; this starts them, waits for the agents and stops them.
class SimAgents {
 public:
  virtual ~SimAgents() { StopLoops(); }
  SimAgents(const SimAgents&) = delete;
  SimAgents& operator=(const SimAgents&) = delete;

  // Connects and starts every agent; returns at once.
  void Start();
  // Waits until every agent passed the barrier (or one failed); false on failure or timeout.
  bool WaitPassed(double timeout_s) { return progress_.WaitPassed(options_.agents, timeout_s); }
  void StopHeartbeats();
  // Closes agent `rank`'s connection as the death of its distrun would (it must be alone on it); the
  // time it went is control().dropped_at.
  void Drop(int rank);
  const SimControl& control() const { return control_; }
  // Waits until every agent's liveness stream (or its connection) ended, e.g. after the coordinator stopped.
  bool WaitFinished(double timeout_s) { return progress_.WaitFinished(options_.agents, timeout_s); }

  AgentProgress& progress() { return progress_; }
  int connections() const { return connections_; }

 protected:
  explicit SimAgents(const SimAgentsOptions& options) : options_(options) {}
  // Ends every loop; a subclass calls it first in its destructor, while what its loops use still exists.
  void StopLoops();

  SimAgentsOptions options_;
  int connections_ = 0;
  AgentProgress progress_;
  SimControl control_;
  std::vector<std::unique_ptr<SimLoop>> loops_;
};

}  // namespace distrun::bench
