#pragma once
// Simulated agents that speak gRPC over HTTP/2 written by hand: non-blocking sockets, a few epoll loops, no
// gRPC client library. On the wire each does what runtime/agent/agent.cc does (liveness stream with the job
// token, whose first message joins round 0, then barrier "bench", heartbeats), so the coordinator cannot tell
// them from real agents. Their own code is a few percent of their CPU; the rest is the kernel's loopback TCP
// (~80 us per agent with a connection each, against ~500 us for gRPC's client), so that `distrun-bench
// rendezvous` measures the coordinator rather than the simulation.

#include <memory>

#include "sim_agents.h"

namespace distrun::bench {

class H2Agents final : public SimAgents {
 public:
  // Prepares every agent and starts the loops; nothing is sent before Start.
  explicit H2Agents(const SimAgentsOptions& options);
  ~H2Agents() override;

 private:
  class Loop;
  struct Shared;

  std::unique_ptr<Shared> shared_;
};

}  // namespace distrun::bench
