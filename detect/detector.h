#pragma once
// The interface every cluster detector implements: a pure function of the environment.

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "detect/environment.h"
#include "detect/topology.h"

namespace distrun {

struct Detector {
  std::string_view name;
  // What this method needs that the environment lacks ("SLURM_STEP_NODELIST", "OMPI_MCA_orte_hnp_uri or
  // PRTE_LAUNCHED"); empty when the method applies.
  std::vector<std::string> (*missing)(const Environment&);
  // Reads the topology. Only called when missing() is empty. Throws UsageError on malformed values.
  Topology (*detect)(const Environment&);
};

// Every cluster detector in automatic detection order (DESIGN §2): ompi, pmi, slurm, tpu, k8s, lsf, flux,
// torchelastic. "local" is not in the list: it is what remains.
std::span<const Detector> ClusterDetectors();

// Methods used only when named: mpi (the MPI probe), which would otherwise shadow every MPI launcher's
// variables and use up the ranks' MPI identity. The probe also runs where a detected launcher's variables
// leave rank 0's host unknown (detection.cc).
std::span<const Detector> NamedOnlyDetectors();

// One entry per detector file.
Detector OmpiDetector();
Detector PmiDetector();
Detector SlurmDetector();
Detector TpuDetector();
Detector K8sDetector();
Detector LsfDetector();
Detector FluxDetector();
Detector TorchelasticDetector();
Detector MpiDetector();

}  // namespace distrun
