#pragma once
// The job's shape as the launcher's MPI library tells it (the MPI probe, injected as Environment::mpi_probe):
// the `mpi` method (detector.h), and the fallback for launchers whose variables do not name rank 0's host.

#include "detect/environment.h"
#include "detect/topology.h"

namespace distrun {

// `t` came from a launcher's variables that leave the coordinator host unknown (MPI ranks on several
// hosts): fills it, the nodes, the hosts, the ports and the token from the probe, keeping the method and the
// launcher's job id. Throws UsageError naming --coordinator-address when the probe has no answer or a
// different one (DetectTopology keeps that message as Topology::coordinator_problem).
void CompleteWithMpiProbe(const Environment& env, Topology& t);

}  // namespace distrun
