#pragma once
// Simulated agents that speak the agent channel (runtime/distrun.proto, top) as runtime/agent_channel.cc
// does: one connection each (or --agents-per-connection sharing one, told apart by node rank), the preface, a hello with the job token, the first liveness message joining
// round 0, then a barrier call "bench" over every worker and heartbeats. Non-blocking sockets on a few epoll
// loops, so that 10,000 of them fit in one process and the coordinator is what is measured.

#include <atomic>
#include <memory>
#include <vector>

#include "sim_agents.h"

namespace distrun::bench {

class FramedAgents {
 public:
  // Prepares every agent and starts the loops; nothing is sent before Start.
  explicit FramedAgents(const SimAgentsOptions& options);
  ~FramedAgents();  // closes every connection
  FramedAgents(const FramedAgents&) = delete;
  FramedAgents& operator=(const FramedAgents&) = delete;

  void Start();
  bool WaitPassed(double timeout_s);
  void StopHeartbeats();
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
