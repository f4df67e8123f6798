#pragma once
// Detection, layout and plan of one method for an injected environment, as `distrun --detect` makes them,
// with fixed ports (a fuzzer must not open sockets). UsageError is a correct answer to bad input; anything
// else escapes to the fuzzer as a finding.

#include <string>

#include "detect/detection.h"
#include "detect/errors.h"
#include "launcher/config/options.h"
#include "launcher/plan/plan.h"

namespace distrun {

inline void PlanWithoutSockets(const Environment& env, const std::string& method) {
  try {
    Options options = ResolveOptions({}, env.vars, {});
    options.topology.method = method;
    Topology topology = DetectTopology(env, options.topology);
    LocalLayout layout = ComputeLocalLayout(topology, options, env);
    JobAssignment assignment;
    assignment.num_processes = topology.num_tasks;
    assignment.process0_host = topology.coordinator_host;
    assignment.coordinator_address = topology.coordinator_host + ":1";
    assignment.master_port = 2;
    assignment.jax_port = 3;
    MakePlan(topology, layout, assignment, options, env);
  } catch (const UsageError&) {
  }
}

}  // namespace distrun
