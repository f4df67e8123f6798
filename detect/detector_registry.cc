#include <array>

#include "detect/detector.h"

namespace distrun {

std::span<const Detector> ClusterDetectors() {
  // Order matters: mpirun inside a Slurm allocation leaks SLURM_* into every rank, so MPI comes first;
  // torchelastic variables are often hand-set, so they come last.
  static const std::array<Detector, 8> kDetectors = {
      OmpiDetector(), PmiDetector(), SlurmDetector(), TpuDetector(),
      K8sDetector(),  LsfDetector(), FluxDetector(),  TorchelasticDetector(),
  };
  return kDetectors;
}

std::span<const Detector> NamedOnlyDetectors() {
  static const std::array<Detector, 1> kDetectors = {MpiDetector()};
  return kDetectors;
}

}  // namespace distrun
