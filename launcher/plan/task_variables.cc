#include "launcher/plan/task_variables.h"

#include <algorithm>
#include <array>
#include <string_view>

namespace distrun {
namespace {

// What MPI libraries read to join their launcher's job (checked with Open MPI 4.1 under mpirun and srun
// --mpi=pmix, MPICH 4 under Hydra and srun --mpi=pmi2): without them MPI_Init is a singleton.
constexpr std::array<std::string_view, 11> kMpiPrefixes = {
    "PMIX_",             // PMIx: server URIs, namespace, rank (Open MPI 4/5, PRRTE, Slurm's mpi/pmix)
    "PMI_",              // PMI-1/2: PMI_FD, PMI_PORT, PMI_RANK, PMI_SIZE (Hydra, Slurm's pmi2, Flux, Cray)
    "OMPI_COMM_WORLD_",  // Open MPI's ranks
    "OMPI_MCA_orte_",    // Open MPI 4's daemon URIs and job facts
    "OMPI_MCA_ess",      // Open MPI's choice of the launcher component and the job id/vpid it knows
    "OMPI_MCA_pmix",
    "PALS_",            // Cray PALS
    "MV2_COMM_WORLD_",  // MVAPICH2
    "MVP_COMM_WORLD_",  // MVAPICH 3
    "HYDI_",            // MPICH Hydra's control descriptor
    "PRTE_",            // PRRTE (Open MPI 5's launcher)
};
constexpr std::array<std::string_view, 11> kMpiNames = {
    "OMPI_UNIVERSE_SIZE",
    "OMPI_NUM_APP_CTX",
    "OMPI_FIRST_RANKS",
    "OMPI_APP_CTX_NUM_PROCS",
    "OMPI_FILE_LOCATION",
    "OMPI_COMMAND",
    "OMPI_ARGV",
    "MPI_LOCALRANKID",
    "MPI_LOCALNRANKS",
    // Open MPI takes a process with a Slurm step id (and SLURM_NODELIST) for a task srun started, and then
    // aborts without the step's PMIx; the worker is no task of the step. The job's id and nodes stay.
    "SLURM_STEP_ID",
    "SLURM_STEPID",
};
// The user's tuning of PMIx components, not the launcher's job.
constexpr std::string_view kKeptPrefix = "PMIX_MCA_";

// Slurm's per-node task counts, compressed as Slurm writes them ("2(x3)"); empty when nodes differ.
std::string TasksPerNode(const WorkerPlace& p) {
  if (p.num_nodes <= 0 || p.local_world * p.num_nodes != p.world) return {};
  const std::string count = std::to_string(p.local_world);
  return p.num_nodes == 1 ? count : count + "(x" + std::to_string(p.num_nodes) + ")";
}

class Changes {
 public:
  Changes(const Environment& env, TaskVariableChanges& out) : env_(env), out_(out) {}

  // Sets `name` when it differs from the inherited value.
  void Set(const std::string& name, const std::string& value) {
    auto it = env_.vars.find(name);
    if (it == env_.vars.end() || it->second != value) out_.set.emplace_back(name, value);
  }
  // Sets `name` only when the launcher set it: a per-task launch would have it, but nothing reads it absent.
  void Replace(const std::string& name, const std::string& value) {
    if (env_.Has(name)) Set(name, value);
  }
  void Unset(const std::string& name) {
    if (env_.Has(name)) out_.unset.push_back(name);
  }

 private:
  const Environment& env_;
  TaskVariableChanges& out_;
};

void RewriteSlurm(const WorkerPlace& p, Changes& c) {
  const std::string world = std::to_string(p.world);
  c.Set("SLURM_PROCID", std::to_string(p.rank));
  c.Set("SLURM_NTASKS", world);
  c.Replace("SLURM_NPROCS", world);
  c.Replace("SLURM_STEP_NUM_TASKS", world);
  c.Set("SLURM_LOCALID", std::to_string(p.local_rank));
  c.Set("SLURM_NODEID", std::to_string(p.node_rank));
  // Lightning refuses SLURM_NTASKS > 1 without it.
  c.Set("SLURM_NTASKS_PER_NODE", std::to_string(p.local_world));
  c.Replace("SLURM_STEP_NUM_NODES", std::to_string(p.num_nodes));
  const std::string per_node = TasksPerNode(p);
  if (per_node.empty()) {
    c.Unset("SLURM_STEP_TASKS_PER_NODE");
  } else {
    c.Replace("SLURM_STEP_TASKS_PER_NODE", per_node);
  }
  if (p.node_first_rank < 0) {
    c.Unset("SLURM_GTIDS");
  } else {
    std::string ids;
    for (int i = 0; i < p.local_world; ++i) ids += (i ? "," : "") + std::to_string(p.node_first_rank + i);
    c.Replace("SLURM_GTIDS", ids);
  }
}

}  // namespace

bool IsMpiLauncherVariable(const std::string& name) {
  if (name.starts_with(kKeptPrefix)) return false;
  for (std::string_view prefix : kMpiPrefixes) {
    if (name.starts_with(prefix)) return true;
  }
  return std::find(kMpiNames.begin(), kMpiNames.end(), name) != kMpiNames.end();
}

bool WorkerIsLauncherTask(const Topology& t, int local_workers, const WorkerPlace& place) {
  return local_workers == 1 && place.rank == t.task_id && place.world == t.num_tasks;
}

std::vector<std::string> MpiLauncherVariables(const Environment& env) {
  std::vector<std::string> out;
  for (const auto& [name, value] : env.vars) {
    if (IsMpiLauncherVariable(name)) out.push_back(name);
  }
  return out;
}

TaskVariableChanges TaskVariablesFor(const Environment& env, const Topology& t, int local_workers,
                                     const WorkerPlace& place,
                                     const std::vector<std::string>* mpi_variables) {
  TaskVariableChanges out;
  if (WorkerIsLauncherTask(t, local_workers, place)) return out;
  Changes c(env, out);
  // Inside a Slurm job (a step's task, or a shell of an allocation): whatever reads Slurm sees the plan.
  if (env.Has("SLURM_JOB_ID")) RewriteSlurm(place, c);
  // LSF's jsrun, read by Lightning's LSFEnvironment.
  c.Replace("JSM_NAMESPACE_RANK", std::to_string(place.rank));
  c.Replace("JSM_NAMESPACE_SIZE", std::to_string(place.world));
  c.Replace("JSM_NAMESPACE_LOCAL_RANK", std::to_string(place.local_rank));
  c.Replace("JSM_NAMESPACE_LOCAL_SIZE", std::to_string(place.local_world));
  // Flux's task variables.
  c.Replace("FLUX_TASK_RANK", std::to_string(place.rank));
  c.Replace("FLUX_TASK_LOCAL_ID", std::to_string(place.local_rank));
  c.Replace("FLUX_JOB_SIZE", std::to_string(place.world));
  const std::vector<std::string> taken_here =
      mpi_variables ? std::vector<std::string>() : MpiLauncherVariables(env);
  const std::vector<std::string>& mpi = mpi_variables ? *mpi_variables : taken_here;
  out.unset.insert(out.unset.end(), mpi.begin(), mpi.end());
  std::sort(out.unset.begin(), out.unset.end());
  out.unset.erase(std::unique(out.unset.begin(), out.unset.end()), out.unset.end());
  return out;
}

}  // namespace distrun
