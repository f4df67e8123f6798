// PyTorch's env:// convention, as torchrun, Kubeflow PyTorchJob, Kubeflow Trainer or a hand-written
// script sets it.
//
//  - LOCAL_RANK set: torchrun (or something like it) already started one process per worker, and this
//    distrun is one of them (per-task). RANK/WORLD_SIZE count workers; GROUP_RANK/GROUP_WORLD_SIZE nodes.
//  - no LOCAL_RANK: Kubeflow PyTorchJob, where WORLD_SIZE counts pods and RANK is the pod's index
//    (per-node; distrun then starts the pod's workers).
//  - PET_MASTER_ADDR, PET_MASTER_PORT, PET_NNODES, PET_NODE_RANK without MASTER_ADDR: the torchrun
//    arguments Kubeflow Trainer gives a TrainJob's pods (per-node). An elastic PET_NNODES ("1:4") is refused:
//    node ranks are then decided at torchrun's rendezvous, which distrun does not take part in.
//
// MASTER_PORT belongs to PyTorch's store, so distrun's own service gets a different port.
#include <algorithm>

#include "detect/coordinator_port.h"
#include "detect/detector.h"
#include "detect/detector_util.h"
#include "detect/errors.h"
#include "detect/parse.h"

namespace distrun {
namespace {

std::vector<std::string> AbsentClassic(const Environment& env) {
  return AbsentVariables(env, {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"});
}

std::vector<std::string> Missing(const Environment& env) {
  std::vector<std::string> classic = AbsentClassic(env);
  if (classic.empty()) return {};
  if (AbsentVariables(env, {"PET_MASTER_ADDR", "PET_MASTER_PORT", "PET_NNODES", "PET_NODE_RANK"}).empty())
    return {};
  return classic;
}

// MASTER_ADDR is a host: a name, an IPv4 address, or an IPv6 address with or without brackets.
std::string ReadMasterHost(std::string_view name, const std::string& value) {
  std::string_view v = Trim(value);
  if (v.size() > 2 && v.front() == '[' && v.back() == ']') v = v.substr(1, v.size() - 2);
  size_t colons = static_cast<size_t>(std::count(v.begin(), v.end(), ':'));
  if (v.empty() || v.find_first_of(" \t/[]") != std::string_view::npos) {
    ThrowBadVariable(name, value, "is not a host name or address",
                     "set it to the host of rank 0, such as node001 or 10.0.0.1");
  }
  if (colons == 1) {
    ThrowBadVariable(name, value, "carries a port",
                     "put the host alone in " + std::string(name) + " and the port in " +
                         (name.starts_with("PET_") ? "PET_" : "") + "MASTER_PORT");
  }
  return std::string(v);
}

bool IsLoopback(std::string_view host) {
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

int RequireCount(const Environment& env, std::string_view name, std::string_view what) {
  int n = RequireInt(env, name);
  if (n == 0) {
    throw UsageError(std::string(name) + "=0 is not a count; set it to the number of " + std::string(what) +
                     " (1 or more)");
  }
  return n;
}

// torchrun's --nnodes: "N" or "MIN:MAX"; only a fixed size can be used.
int ReadPetNodeCount(const Environment& env) {
  const std::string& value = *env.Get("PET_NNODES");
  std::vector<std::string> range = Split(value, ':');
  if (range.size() == 2 && range[0] == range[1]) range.pop_back();
  if (range.size() != 1) {
    ThrowBadVariable(
        "PET_NNODES", value,
        "is an elastic range: node ranks are then assigned at torchrun's rendezvous, which distrun "
        "cannot see",
        "run distrun under torchrun, or use a fixed node count");
  }
  int n = ParseCount("PET_NNODES", range[0]);
  if (n == 0) throw UsageError("PET_NNODES=0 is not a node count; set it to the number of nodes (1 or more)");
  return n;
}

void ReadPerTask(const Environment& env, Topology& t) {
  t.launch_mode = LaunchMode::kPerTask;
  t.num_tasks = RequireCount(env, "WORLD_SIZE", "processes in the job");
  t.task_id = RequireInt(env, "RANK");
  RequireBelow("RANK", t.task_id, "WORLD_SIZE", t.num_tasks);
  t.local_task = RequireInt(env, "LOCAL_RANK");
  if (!env.Has("LOCAL_WORLD_SIZE")) {
    throw UsageError("LOCAL_RANK=" + std::to_string(t.local_task) +
                     " is set but LOCAL_WORLD_SIZE is not; set " +
                     "LOCAL_WORLD_SIZE to the number of processes on this node (torchrun sets both)");
  }
  t.local_tasks = RequireCount(env, "LOCAL_WORLD_SIZE", "processes on this node");
  RequireBelow("LOCAL_RANK", t.local_task, "LOCAL_WORLD_SIZE", t.local_tasks);
  if (t.local_tasks > t.num_tasks) {
    throw UsageError("LOCAL_WORLD_SIZE=" + std::to_string(t.local_tasks) + " exceeds WORLD_SIZE=" +
                     std::to_string(t.num_tasks) + "; a node cannot run more processes than the whole job");
  }

  if (env.Has("GROUP_WORLD_SIZE")) {
    t.num_nodes = RequireCount(env, "GROUP_WORLD_SIZE", "nodes");
  } else if (t.num_tasks % t.local_tasks == 0) {
    t.num_nodes = t.num_tasks / t.local_tasks;
  } else {
    throw UsageError("WORLD_SIZE=" + std::to_string(t.num_tasks) +
                     " is not a multiple of LOCAL_WORLD_SIZE=" + std::to_string(t.local_tasks) +
                     " and GROUP_WORLD_SIZE is not set; set GROUP_WORLD_SIZE to " + "the number of nodes");
  }
  if (env.Has("GROUP_RANK")) {
    t.node_rank = RequireInt(env, "GROUP_RANK");
    RequireBelow("GROUP_RANK", t.node_rank, env.Has("GROUP_WORLD_SIZE") ? "GROUP_WORLD_SIZE" : "nodes",
                 t.num_nodes);
  } else if (t.task_id % t.local_tasks == t.local_task && t.num_tasks % t.local_tasks == 0) {
    t.node_rank = t.task_id / t.local_tasks;  // torchrun numbers ranks node by node
  } else {
    throw UsageError(
        "RANK=" + std::to_string(t.task_id) + " and LOCAL_RANK=" + std::to_string(t.local_task) +
        " do not follow RANK = node × LOCAL_WORLD_SIZE + LOCAL_RANK and GROUP_RANK is not set; set " +
        "GROUP_RANK to this node's index");
  }
}

Topology Detect(const Environment& env) {
  const bool classic = AbsentClassic(env).empty();
  const std::string_view addr_name = classic ? "MASTER_ADDR" : "PET_MASTER_ADDR";
  const std::string_view port_name = classic ? "MASTER_PORT" : "PET_MASTER_PORT";
  const std::string master_host = ReadMasterHost(addr_name, *env.Get(addr_name));
  const int master_port = ParsePort(port_name, *env.Get(port_name));

  Topology t;
  t.method = "torchelastic";
  if (classic && env.Has("LOCAL_RANK")) {
    ReadPerTask(env, t);
  } else {
    t.launch_mode = LaunchMode::kPerNode;
    if (classic) {
      t.num_nodes = RequireCount(env, "WORLD_SIZE", "pods (nodes) in the job");
      t.node_rank = RequireInt(env, "RANK");
      RequireBelow("RANK", t.node_rank, "WORLD_SIZE", t.num_nodes);
    } else {
      t.num_nodes = ReadPetNodeCount(env);
      t.node_rank = RequireInt(env, "PET_NODE_RANK");
      RequireBelow("PET_NODE_RANK", t.node_rank, "PET_NNODES", t.num_nodes);
    }
    t.num_tasks = t.num_nodes;
    t.task_id = t.node_rank;
  }

  t.coordinator_host = master_host;
  // PyTorchJob gives its master pod MASTER_ADDR=localhost and the workers the master pod's hostname;
  // node 0 is the master, so its own hostname is what the others use.
  if (IsLoopback(master_host) && t.node_rank == 0 && t.num_nodes > 1 && !env.hostname.empty()) {
    t.coordinator_host = env.hostname;
  }
  const std::string* run_id = env.Get("TORCHELASTIC_RUN_ID");
  if (run_id) t.job_id = *run_id;
  // The master's name differs between pods (see above), so only the port and run id identify the job.
  const std::string identity =
      "torchelastic:" + std::to_string(master_port) + (run_id ? ":" + *run_id : std::string());
  int port = HashedCoordinatorPort(identity);
  if (port == master_port)
    port = kCoordinatorPortBase + (port - kCoordinatorPortBase + 1) % kCoordinatorPortRange;
  t.coordinator_port = port;
  return t;
}

}  // namespace

Detector TorchelasticDetector() { return {"torchelastic", Missing, Detect}; }

}  // namespace distrun
