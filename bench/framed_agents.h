#pragma once
// Simulated agents that speak the agent channel (runtime/distrun.proto, top) as
// runtime/transport/agent_channel.cc does: one connection each (or --agents-per-connection sharing one, told
// apart by node rank), the preface, a hello with the job token, the first liveness message joining round 0,
// then a barrier call "bench" over every worker and heartbeats. Non-blocking sockets on a few epoll loops, so
// that 10,000 of them fit in one process and the coordinator is what is measured.

#include <memory>

#include "sim_agents.h"

namespace distrun::bench {

class FramedAgents final : public SimAgents {
 public:
  // Prepares every agent and starts the loops; nothing is sent before Start.
  explicit FramedAgents(const SimAgentsOptions& options);
  ~FramedAgents() override;

 private:
  class Loop;
  struct Shared;

  std::unique_ptr<Shared> shared_;
};

}  // namespace distrun::bench
