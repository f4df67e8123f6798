#pragma once
// The plan: which workers this distrun starts and the environment each gets (DESIGN §3.1). --detect prints
// it and the launcher executes it, so both always agree.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "detect/devices.h"
#include "detect/environment.h"
#include "detect/topology.h"
#include "launcher/config/options.h"
#include "runtime/recovery/world_change.h"

namespace distrun {

struct WorkerPlan {
  int process_id = 0;
  int local_rank = 0;
  std::vector<std::string> device_tokens;  // the devices given to this worker, as tokens
  std::vector<int> local_device_ids;       // their indices as the worker sees them
  std::vector<int> cpus;                   // --cpu-bind: the CPUs it is pinned to; empty: not pinned
  // Exactly the variables distrun sets or changes for this worker, in a stable order.
  std::vector<std::pair<std::string, std::string>> env;
  // Inherited variables the worker does not get (the launcher's MPI variables,
  // launcher/plan/task_variables.h).
  std::vector<std::string> unset;
  bool launcher_task = false;  // the worker is its launcher's task: its rank and world are the task's
};

// What this node's workers look like before any other node is heard from.
struct LocalLayout {
  LaunchMode mode = LaunchMode::kPerNode;
  int unit_index = 0;  // per-node mode: which distrun this is among `units`
  int units = 1;
  int local_workers = 1;
  std::vector<std::string> node_devices;                 // every device this distrun may hand out, as tokens
  std::string device_source;                             // the variable or discovery source they came from
  std::vector<std::vector<std::string>> worker_devices;  // per local worker; empty: no narrowing
  std::vector<ResolvedDevice> node_gpus;                 // node_devices resolved to this node's GPUs
  std::string gpu_source;                                // where node_gpus came from (DeviceResolution)
  std::vector<std::vector<int>> worker_cpus;             // per local worker, --cpu-bind; empty: not pinned
  std::vector<std::string> warnings;
};

LocalLayout ComputeLocalLayout(const Topology& topology, const Options& options, const Environment& env);

// Where PyTorch's Flight Recorder dumps go (TORCH_FR_DUMP_TEMP_FILE, TORCH_NCCL_DEBUG_INFO_TEMP_FILE: the
// prefix of one file per rank): DIR/flight-recorder-rank- with --log-dir, else
// TMPDIR/distrun-RUN_ID-flight-recorder-rank-. Files appear only when torch dumps.
std::string FlightRecorderPrefix(const Options& options, const Environment& env, const std::string& run_id);

// What rendezvous settles for the whole job; --detect shows what this node would choose alone.
struct JobAssignment {
  int rank_offset = 0;    // global rank of this node's first worker
  int num_processes = 1;  // workers in the job
  int num_nodes = 1;
  int node_rank = 0;
  std::string process0_host;        // where MASTER_ADDR and JAX's coordinator point
  std::string coordinator_address;  // distrun's runtime, host:port
  std::optional<int> master_port;
  std::optional<int> jax_port;
  std::string run_id;
  int restart_count = 0;  // the epoch: every start of the job's workers after the first counts one
  bool spare = false;     // a hot spare this epoch (elastic jobs): no workers here
  // --recovery in-process: how this epoch's world follows the previous one (runtime/recovery/world_change.h).
  WorldChange change;

  bool operator==(const JobAssignment&) const = default;
};

// The assignment when this node decides alone: uniform worker counts, ports chosen free here.
JobAssignment ProvisionalAssignment(const Topology& topology, const LocalLayout& layout,
                                    const Options& options);

struct Plan {
  Topology topology;
  LocalLayout layout;
  JobAssignment assignment;
  std::vector<WorkerPlan> workers;
  std::vector<std::string> warnings;  // topology's and the layout's
};

Plan MakePlan(const Topology& topology, const LocalLayout& layout, const JobAssignment& assignment,
              const Options& options, const Environment& env);

// A free TCP port on this host, chosen by the OS (bind to port 0).
int PickFreePort();

}  // namespace distrun
