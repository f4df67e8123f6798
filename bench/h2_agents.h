#pragma once
// Simulated agents that speak gRPC over HTTP/2 written by hand: non-blocking sockets, a few epoll loops, no
// gRPC client library. On the wire each does what runtime/agent.cc does (liveness stream with the job token,
// whose first message joins round 0, then barrier "bench", heartbeats), so the coordinator cannot tell them
// from real agents. Their own code is a few percent of their CPU; the rest is the kernel's loopback TCP (~80
// us per agent with a connection each, against ~500 us for gRPC's client), so that `distrun-bench rendezvous`
// measures the coordinator rather than the simulation.

#include <atomic>
#include <memory>
#include <vector>

#include "sim_agents.h"

namespace distrun::bench {

class H2Agents {
 public:
  // Prepares every agent and starts the loops; nothing is sent before Start.
  explicit H2Agents(const SimAgentsOptions& options);
  ~H2Agents();  // closes every connection
  H2Agents(const H2Agents&) = delete;
  H2Agents& operator=(const H2Agents&) = delete;

  // Connects and starts every agent; returns at once.
  void Start();
  // Waits until every agent passed the barrier (or one failed); false on failure or timeout.
  bool WaitPassed(double timeout_s);
  void StopHeartbeats();
  // Waits until every agent's liveness stream (or its connection) ended, e.g. after the coordinator stopped.
  bool WaitFinished(double timeout_s);

  AgentProgress& progress() { return progress_; }
  int connections() const { return connections_; }

 private:
  class Loop;
  struct Shared;

  SimAgentsOptions options_;
  int connections_ = 0;
  AgentProgress progress_;
  std::atomic<double> start_{0};
  std::unique_ptr<Shared> shared_;
  std::vector<std::unique_ptr<Loop>> loops_;
};

}  // namespace distrun::bench
