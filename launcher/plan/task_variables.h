#pragma once
// What a worker sees of the variables its launcher set for the distrun process that starts it (DESIGN §4.6).
//
// Frameworks find their world in the launcher's variables: Lightning's SLURMEnvironment and JAX's Slurm
// cluster read SLURM_PROCID and SLURM_NTASKS, JAX's Open MPI cluster OMPI_COMM_WORLD_*, and MPI_Init joins
// the launcher's process manager through PMI or PMIx. Those variables describe the launcher's task, a
// distrun, which is the worker only when that distrun runs one worker whose rank and world are the task's
// (a per-task launch before any elastic change). For every other worker:
//  - the schedulers' task variables (Slurm's, LSF jsrun's, Flux's) are rewritten to the worker's place in
//    the plan, as a per-task launch would have set them, so whatever reads them finds distrun's world;
//  - MPI's (the process manager's address and the rank it knows: PMI, PMIx, Open MPI, MPICH, MVAPICH, Cray
//    PALS) are removed: the worker is no process of the launcher's MPI job, and MPI_Init in it makes a world
//    of its own (one process) at once, where the inherited ones would make it join as another process's
//    rank, or fail, or wait. distrun's Python hook stops mpi4py when its world differs from the plan.

#include <string>
#include <utility>
#include <vector>

#include "detect/environment.h"
#include "detect/topology.h"

namespace distrun {

struct WorkerPlace {
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  int local_world = 1;
  int node_rank = 0;
  int num_nodes = 1;
  // This node's ranks, when they are consecutive from `node_first_rank` (per-node mode); -1: unknown.
  int node_first_rank = -1;
};

struct TaskVariableChanges {
  std::vector<std::pair<std::string, std::string>> set;  // only values that differ from the environment's
  std::vector<std::string> unset;                        // sorted
};

// True when the worker is the launcher's task: its distrun runs only it, with the task's rank and world.
bool WorkerIsLauncherTask(const Topology& t, int local_workers, const WorkerPlace& place);

// The changes to the inherited environment `env` that make the launcher's variables agree with the worker's
// place; none when the worker is the launcher's task. `mpi_variables`: MpiLauncherVariables(env), taken
// once by a caller that plans many workers (null: taken here).
TaskVariableChanges TaskVariablesFor(const Environment& env, const Topology& t, int local_workers,
                                     const WorkerPlace& place,
                                     const std::vector<std::string>* mpi_variables = nullptr);

// Whether `name` is one of the MPI variables removed from a worker that is not the launcher's task.
bool IsMpiLauncherVariable(const std::string& name);
// The names in `env` that IsMpiLauncherVariable picks, in order.
std::vector<std::string> MpiLauncherVariables(const Environment& env);

}  // namespace distrun
