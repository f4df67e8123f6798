// Slurm: a task of an srun step. The batch script itself (SLURM_JOB_ID and SLURM_PROCID but no step
// variables) is not a step: the detection driver warns about it.
#include "detect/detector.h"
#include "detect/slurm_step.h"

namespace distrun {
namespace {

std::vector<std::string> Missing(const Environment& env) {
  std::vector<std::string> missing = MissingSlurmStepVariables(env);
  // `srun flux start` hands its step variables to every Flux job inside; the flux method reads those.
  if (missing.empty() && LaunchedByFlux(env)) {
    missing.emplace_back(
        "an srun step of this process's own (FLUX_TASK_RANK is set: Flux launched it, and the SLURM_* "
        "variables belong to the Flux instance)");
  }
  return missing;
}

Topology Detect(const Environment& env) {
  Topology t;
  t.method = "slurm";
  FillFromSlurmStep(ReadSlurmStep(env), t);
  return t;
}

}  // namespace

Detector SlurmDetector() { return {"slurm", Missing, Detect}; }

}  // namespace distrun
