#pragma once
// An srun step as one of its tasks sees it. Shared by the slurm detector and by the pmi detector under
// `srun --mpi=pmi2`, which runs inside the same kind of step.

#include <string>
#include <vector>

#include "detect/environment.h"
#include "detect/topology.h"

namespace distrun {

struct SlurmStep {
  std::vector<std::string> hosts;  // SLURM_STEP_NODELIST, fully expanded, node order
  std::string coordinator_host;    // hosts[0], or its address from SLURM_NODE_ALIASES
  int num_tasks = 1;
  int task_id = 0;
  int local_task = 0;
  int local_tasks = 1;
  int node_id = 0;
  long long job_number = 0;
  long long step_number = 0;  // 2^32-based: Slurm's special steps (batch, interactive) are near 2^32
  std::string job_id;         // "<job>.<step>" as Slurm prints steps
  std::vector<std::string> gpus;
  std::string gpu_variable;
  std::vector<std::string> warnings;
};

// The step variables that are absent (SLURM_STEP_NODELIST, SLURM_STEP_NUM_TASKS, SLURM_PROCID,
// SLURM_LOCALID, SLURM_JOB_ID); empty inside an srun step.
std::vector<std::string> MissingSlurmStepVariables(const Environment& env);

// True when Flux launched this process: SLURM_* variables then belong to the Flux instance that srun
// started (`srun flux start`), not to this process.
bool LaunchedByFlux(const Environment& env);

// Reads and cross-checks the step. Throws UsageError on any malformed or inconsistent variable and on
// heterogeneous jobs.
SlurmStep ReadSlurmStep(const Environment& env);

// Topology fields the step determines (everything but `method`).
void FillFromSlurmStep(const SlurmStep& step, Topology& t);

}  // namespace distrun
