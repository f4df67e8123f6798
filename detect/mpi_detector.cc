// The `mpi` method: what mpi4py would tell a program, from the launcher's own MPI library (rank, size,
// ranks per node, nodes, rank 0's host), plus ports, a job id and a token chosen once on rank 0. It works
// under any launcher whose MPI the probe can load, and is the only method that makes the processes of a
// job agree on the workers' ports without distrun's runtime.
#include "detect/mpi_detector.h"

#include <array>
#include <string_view>

#include "detect/detector.h"
#include "detect/errors.h"
#include "detect/mpi_probe.h"
#include "detect/parse.h"

namespace distrun {
namespace {

constexpr std::string_view kCoordinatorFix =
    "give --coordinator-address HOST (or DISTRUN_COORDINATOR_ADDRESS) naming the host of rank 0";

// Each MPI launcher's rank and size variables; one of them shows that an MPI launcher started distrun.
struct LauncherVariables {
  std::string_view rank;
  std::string_view size;
};
constexpr std::array<LauncherVariables, 5> kLaunchers = {{
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},  // Open MPI
    {"PMI_RANK", "PMI_SIZE"},                          // MPICH/Hydra, Intel MPI, Cray PMI, srun --mpi=pmi2
    {"MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE"},    // MVAPICH2
    {"MVP_COMM_WORLD_RANK", "MVP_COMM_WORLD_SIZE"},    // MVAPICH 3
    {"PALS_RANKID", "PMI_SIZE"},                       // Cray PALS
}};

std::vector<std::string> Missing(const Environment& env) {
  for (const LauncherVariables& v : kLaunchers) {
    if (env.Has(v.rank)) return {};
  }
  if (env.Has("PMIX_RANK")) return {};  // any PMIx launcher (Open MPI 5, srun --mpi=pmix, jsrun)
  return {
      "an MPI launcher's rank variable (OMPI_COMM_WORLD_RANK from Open MPI's mpirun, PMI_RANK from "
      "MPICH's or Intel MPI's mpiexec, PMIX_RANK, MV2_COMM_WORLD_RANK, MVP_COMM_WORLD_RANK or PALS_RANKID)"};
}

std::string Describe(const MpiProbeResult& r) {
  return r.library + (r.version.empty() ? "" : " (" + r.version + ")");
}

constexpr std::string_view kOtherMpi =
    "it is not the MPI of the launcher that started distrun; set DISTRUN_MPI_LIBRARY to that MPI's library";

// An answer that cannot describe a job means a broken or foreign library, not a job to run.
void RequirePlausible(const MpiProbeResult& r) {
  auto port_ok = [](int port) { return port >= 1 && port <= 65535; };
  const bool ok = r.size >= 1 && r.rank >= 0 && r.rank < r.size && r.local_size >= 1 &&
                  r.local_size <= r.size && r.local_rank >= 0 && r.local_rank < r.local_size &&
                  r.num_nodes >= 1 && r.num_nodes <= r.size && r.node_rank >= 0 &&
                  r.node_rank < r.num_nodes && r.hosts.size() == static_cast<size_t>(r.num_nodes) &&
                  !r.hosts.front().empty() && port_ok(r.coordinator_port) && port_ok(r.master_port) &&
                  port_ok(r.jax_port) && !r.job_id.empty() && !r.token.empty();
  if (!ok) {
    throw UsageError("the MPI probe's answer from " + Describe(r) + " is inconsistent (rank " +
                     std::to_string(r.rank) + " of " + std::to_string(r.size) + ", local rank " +
                     std::to_string(r.local_rank) + " of " + std::to_string(r.local_size) + ", node " +
                     std::to_string(r.node_rank) + " of " + std::to_string(r.num_nodes) + "); " +
                     std::string(kOtherMpi));
  }
}

// Two views of one job must agree: a library other than the launcher's runs this process as a singleton.
void RequireSameJob(const MpiProbeResult& r, int rank, int size, const std::string& source) {
  if (r.rank == rank && r.size == size) return;
  throw UsageError(Describe(r) + " says this is rank " + std::to_string(r.rank) + " of " +
                   std::to_string(r.size) + " but " + source + " say " + std::to_string(rank) + " of " +
                   std::to_string(size) + ": " + std::string(kOtherMpi));
}

Topology FromProbe(const MpiProbeResult& r) {
  Topology t;
  t.method = "mpi";
  t.num_tasks = r.size;
  t.task_id = r.rank;
  t.local_task = r.local_rank;
  t.local_tasks = r.local_size;
  t.launch_mode = r.local_size == 1 ? LaunchMode::kPerNode : LaunchMode::kPerTask;
  t.num_nodes = r.num_nodes;
  t.node_rank = r.node_rank;
  t.hosts = r.hosts;
  // On one node loopback reaches rank 0, as with the launchers' variables.
  t.coordinator_host = r.num_nodes == 1 ? "127.0.0.1" : r.hosts.front();
  t.coordinator_port = r.coordinator_port;
  t.master_port = r.master_port;
  t.jax_port = r.jax_port;
  t.job_id = r.job_id;
  t.job_token = r.token;
  return t;
}

std::string WithLibraryVariable(const Environment& env, std::string message) {
  if (const std::string* chosen = env.Get("DISTRUN_MPI_LIBRARY"); chosen != nullptr && !chosen->empty()) {
    return "with DISTRUN_MPI_LIBRARY='" + *chosen + "': " + message;
  }
  return message;
}

Topology Detect(const Environment& env) {
  const std::string context = "--cluster-detection-method=mpi: ";
  if (!env.mpi_probe) throw UsageError(context + "MPI cannot be used in this process; pick another method");
  MpiProbeOutcome outcome = env.mpi_probe(MpiLibraries(env));
  if (!outcome.result) throw UsageError(context + WithLibraryVariable(env, outcome.error));
  const MpiProbeResult& r = *outcome.result;
  RequirePlausible(r);
  for (const LauncherVariables& v : kLaunchers) {
    if (!env.Has(v.rank) || !env.Has(v.size)) continue;
    int rank = RequireInt(env, v.rank);
    int size = RequireInt(env, v.size);
    RequireSameJob(r, rank, size, std::string(v.rank) + "/" + std::string(v.size));
    break;
  }
  return FromProbe(r);
}

}  // namespace

void CompleteWithMpiProbe(const Environment& env, Topology& t) {
  const std::string context = "the " + t.method + " ranks span " +
                              std::to_string(t.num_nodes > 1 ? t.num_nodes : 2) +
                              "+ hosts and the launcher's variables do not say which host runs rank 0";
  if (!env.mpi_probe) throw UsageError(context + "; " + std::string(kCoordinatorFix));
  MpiProbeOutcome outcome = env.mpi_probe(MpiLibraries(env));
  if (!outcome.result) {
    throw UsageError(context + ", and the MPI probe that would find it failed: " +
                     WithLibraryVariable(env, outcome.error) + "; or " + std::string(kCoordinatorFix));
  }
  const MpiProbeResult& r = *outcome.result;
  RequirePlausible(r);
  RequireSameJob(r, t.task_id, t.num_tasks, "the " + t.method + " launcher's variables");

  Topology probed = FromProbe(r);
  probed.method = t.method;
  if (!t.job_id.empty()) probed.job_id = t.job_id;
  probed.visible_devices = t.visible_devices;
  probed.device_variable = t.device_variable;
  probed.slice_index = t.slice_index;
  // The detector's warnings in this case are about the node layout it had to guess; the probe knows it.
  t = std::move(probed);
}

Detector MpiDetector() { return {"mpi", Missing, Detect}; }

}  // namespace distrun
