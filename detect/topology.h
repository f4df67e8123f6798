#pragma once
// What detection learned: the shape of the job and this process's place in it. Pure data.

#include <optional>
#include <string>
#include <vector>

namespace distrun {

enum class LaunchMode {
  kPerTask,  // the launcher made one distrun per worker: run exactly one worker with the detected id
  kPerNode,  // one distrun per node: spawn the node's workers
};

const char* LaunchModeName(LaunchMode mode);

struct Topology {
  std::string method;  // "slurm", "ompi", "pmi", "mpi", "tpu", "k8s", "torchelastic", "lsf", "flux", "local"

  // Where distrun's runtime service runs (the host of local rank 0 on the coordinator node). The port is
  // empty when the method gives no job identity to derive one from; the plan then picks one.
  std::string coordinator_host;
  std::optional<int> coordinator_port;
  // Why coordinator_host is empty when the launcher's variables left it to the MPI probe and the probe had no
  // usable answer: --detect still shows what the variables said, and a launch stops with this message.
  std::string coordinator_problem;

  LaunchMode launch_mode = LaunchMode::kPerNode;  // the mode the launcher's layout implies
  int num_nodes = 1;
  int node_rank = 0;
  // --node-rank auto (torchrun's c10d rendezvous): node 0 is the distrun that can serve the coordinator's
  // address (on its host, and first there); the others take the ranks it gives them when they join
  // (node_rank says 0 until then).
  bool node_rank_auto = false;
  std::vector<std::string> hosts;  // the job's hosts in node order (may be empty when unknown)

  // The launcher's processes (tasks/ranks): how many in the job, which one this is, and its place on the
  // node. In per-node layouts these describe the distrun processes, one per node.
  int num_tasks = 1;
  int task_id = 0;
  int local_task = 0;
  int local_tasks = 1;

  // Devices this process may use, as tokens exactly as given ("0", "GPU-8c3d…", "MIG-…"). Empty when
  // nothing narrows them (the plan then uses the GPUs discovered on the node, or none).
  std::vector<std::string> visible_devices;
  std::string device_variable;  // which variable visible_devices came from, for messages

  std::string job_id;              // the launcher's job identity, for the run id and the coordinator port
  std::optional<int> slice_index;  // TPU multislice
  std::vector<std::string> warnings;

  // The ports the workers' frameworks meet on (MASTER_PORT, JAX's), when one choice reached every process of
  // the job (the MPI probe's rank 0); unset, the plan picks them.
  std::optional<int> master_port;
  std::optional<int> jax_port;
  // The job's secret for distrun's runtime, when one choice reached every process (the MPI probe's rank
  // 0). Never printed.
  std::optional<std::string> job_token;
};

}  // namespace distrun
