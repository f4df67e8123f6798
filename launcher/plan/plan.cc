#include "launcher/plan/plan.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <tuple>

#include "detect/devices.h"
#include "detect/errors.h"
#include "detect/parse.h"
#include "detect/random_hex.h"
#include "launcher/plan/cpu_binding.h"
#include "launcher/plan/task_variables.h"

namespace distrun {
namespace {

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ",") + item;
  return out;
}

std::string JoinInts(const std::vector<int>& items) {
  std::string out;
  for (int item : items) out += (out.empty() ? "" : ",") + std::to_string(item);
  return out;
}

// The workers' PATH with `program`'s directory appended, or "" when PATH holds it already.
std::string WorkerPath(const Environment& env, const std::string& program) {
  const std::string dir = program.substr(0, program.rfind('/'));
  if (dir.empty()) return {};
  const std::string* path = env.Get("PATH");
  if (path == nullptr || path->empty()) return dir;
  for (size_t start = 0; start <= path->size();) {
    size_t end = path->find(':', start);
    if (end == std::string::npos) end = path->size();
    std::string entry = path->substr(start, end - start);
    while (entry.size() > 1 && entry.back() == '/') entry.pop_back();
    if (entry == dir) return {};
    start = end + 1;
  }
  return *path + ":" + dir;
}

const char* LocalRankVariable(const std::string& method) {
  if (method == "slurm") return "SLURM_LOCALID";
  if (method == "ompi") return "OMPI_COMM_WORLD_LOCAL_RANK";
  if (method == "pmi") return "MPI_LOCALRANKID";
  if (method == "torchelastic") return "LOCAL_RANK";
  if (method == "lsf") return "JSM_NAMESPACE_LOCAL_RANK";
  if (method == "flux") return "FLUX_TASK_LOCAL_ID";
  return "local rank";
}

// The devices this distrun may hand out: those a variable (or --local-device-ids) narrows it to, else
// every GPU found on the node; each resolved to the GPU it names where that can be known.
struct NodeDeviceList {
  std::vector<std::string> tokens;
  std::string source;
  DeviceResolution resolution;
  std::string searched;  // where GPUs were looked for, when discovery ran
};
NodeDeviceList NodeDevices(const Topology& t, const Environment& env) {
  if (!t.device_variable.empty()) {
    return {
        t.visible_devices, t.device_variable, ResolveDevices(env, t.visible_devices, t.device_variable), {}};
  }
  DiscoveredGpus found = DiscoverGpus(env);
  NodeDeviceList out{{}, found.source, {{}, found.source}, found.searched};
  for (size_t i = 0; i < found.gpus.size(); ++i) {
    out.tokens.push_back(std::to_string(i));
    out.resolution.devices.push_back({out.tokens.back(), found.gpus[i], {}});
  }
  return out;
}

// --cpu-bind gpu|numa: the CPUs of each worker's GPUs (before --device-binding none clears the
// narrowing: those workers still use their share).
void BindCpus(const Topology& t, const Options& o, const Environment& env, const NodeDeviceList& node,
              LocalLayout& layout) {
  layout.worker_cpus.assign(layout.worker_devices.size(), {});
  if (o.cpu_bind == CpuBind::kNone) return;
  const std::string option = std::string("--cpu-bind=") + CpuBindName(o.cpu_bind);
  if (node.tokens.empty()) {
    // As --nproc-per-node=gpu: asked for, impossible, and better said before anything starts.
    throw UsageError(
        option + " but " +
        (!t.device_variable.empty()
             ? t.device_variable + " leaves no GPU"
             : "no GPU was found (" + (node.searched.empty() ? node.source : node.searched) + ")") +
        "; use --cpu-bind none on a machine without GPUs");
  }
  std::vector<std::vector<ResolvedDevice>> per_worker;
  std::vector<int> local_ranks;
  for (size_t i = 0; i < layout.worker_devices.size(); ++i) {
    std::vector<ResolvedDevice> devices;
    for (const std::string& token : layout.worker_devices[i]) {
      auto it = std::find_if(node.resolution.devices.begin(), node.resolution.devices.end(),
                             [&token](const ResolvedDevice& d) { return d.token == token; });
      devices.push_back(it != node.resolution.devices.end() ? *it : ResolvedDevice{token, std::nullopt, {}});
    }
    per_worker.push_back(std::move(devices));
    local_ranks.push_back(layout.mode == LaunchMode::kPerTask ? t.local_task : static_cast<int>(i));
  }
  CpuBinding binding = ComputeCpuBinding(env, o.cpu_bind, per_worker, local_ranks);
  layout.worker_cpus = std::move(binding.worker_cpus);
  layout.warnings.insert(layout.warnings.end(), binding.warnings.begin(), binding.warnings.end());
}

// Devices of worker `slot` when workers take `per_worker` consecutive devices each; workers beyond the
// supply share them round-robin (a warning says so).
std::vector<std::string> SliceDevices(const std::vector<std::string>& tokens, int slot, int per_worker) {
  std::vector<std::string> out;
  if (tokens.empty()) return out;
  for (int k = 0; k < per_worker && k < static_cast<int>(tokens.size()); ++k) {
    out.push_back(tokens[static_cast<size_t>(slot * per_worker + k) % tokens.size()]);
  }
  return out;
}

int WorkersPerNode(const Options& o, const Environment& env, size_t gpu_count, const std::string& source) {
  const std::string& n = o.nproc_per_node;
  // auto never makes workers share GPUs: leftover GPUs stay idle (ComputeLocalLayout says so).
  if (n == "auto") return gpu_count > 0 ? std::max(1, static_cast<int>(gpu_count) / o.gpus_per_worker) : 1;
  if (n == "gpu") {
    if (gpu_count == 0) {
      throw UsageError(
          "--nproc-per-node=gpu but no GPU was found (" +
          (source == "none" ? std::string("no CUDA driver, /proc/driver/nvidia or /dev/nvidia*") : source) +
          "); use --nproc-per-node N or auto on a machine without GPUs");
    }
    return static_cast<int>(gpu_count);
  }
  if (n == "cpu") return env.cpu_count > 0 ? env.cpu_count : 1;
  return ParseCount("--nproc-per-node", n);
}

}  // namespace

int PickFreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

std::string FlightRecorderPrefix(const Options& o, const Environment& env, const std::string& run_id) {
  if (o.log_dir) return *o.log_dir + "/flight-recorder-rank-";
  std::string safe = run_id;
  for (char& c : safe) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  }
  return env.GetOr("TMPDIR", "/tmp") + "/distrun-" + safe + "-flight-recorder-rank-";
}

LocalLayout ComputeLocalLayout(const Topology& t, const Options& o, const Environment& env) {
  LocalLayout layout;
  layout.mode = o.launch_mode.value_or(t.launch_mode);
  NodeDeviceList node = NodeDevices(t, env);
  layout.node_devices = node.tokens;
  layout.device_source = node.source;
  layout.node_gpus = node.resolution.devices;
  layout.gpu_source = node.resolution.source;
  const std::vector<std::string>& tokens = layout.node_devices;
  const std::string& source = layout.device_source;
  const int gpw = o.gpus_per_worker;

  if (layout.mode == LaunchMode::kPerTask) {
    layout.local_workers = 1;
    layout.unit_index = t.task_id;
    layout.units = t.num_tasks;
    // Each task either sees only its own devices (srun --gpus-per-task) and keeps them, or sees the
    // node's devices and takes its share by local rank: never SLURM_LOCALID as a device index blindly.
    int slot = static_cast<int>(tokens.size()) <= gpw ? 0 : t.local_task;
    if (!tokens.empty() && static_cast<size_t>(gpw) > tokens.size()) {
      layout.warnings.push_back("--gpus-per-worker=" + std::to_string(gpw) + " but only " +
                                std::to_string(tokens.size()) + " GPU(s) are visible in " + source + "=" +
                                Join(tokens) + ": the worker gets those; request more GPUs per task");
    } else if (!tokens.empty() && static_cast<size_t>((slot + 1) * gpw) > tokens.size()) {
      layout.warnings.push_back(std::string(LocalRankVariable(t.method)) + "=" +
                                std::to_string(t.local_task) + " is beyond the " +
                                std::to_string(tokens.size()) + " GPUs in " + source + "=" + Join(tokens) +
                                ": tasks on this node will share GPUs; request one GPU per task "
                                "(srun --gpus-per-task=1) or fewer tasks per node");
    }
    layout.worker_devices.push_back(SliceDevices(tokens, slot, gpw));
  } else {
    layout.local_workers = WorkersPerNode(o, env, tokens.size(), source);
    bool one_per_node = t.launch_mode == LaunchMode::kPerNode;
    layout.unit_index = one_per_node ? t.node_rank : t.task_id;
    layout.units = one_per_node ? t.num_nodes : t.num_tasks;
    const size_t wanted = static_cast<size_t>(layout.local_workers) * static_cast<size_t>(gpw);
    if (!tokens.empty() && wanted > tokens.size()) {
      layout.warnings.push_back(std::to_string(layout.local_workers) + " workers with " +
                                std::to_string(gpw) + " GPU(s) each need more than the " +
                                std::to_string(tokens.size()) + " GPUs of this node (" + source +
                                "): workers will share GPUs; lower --nproc-per-node or --gpus-per-worker");
    } else if (!tokens.empty() && wanted < tokens.size() && o.nproc_per_node == "auto") {
      layout.warnings.push_back(
          std::to_string(tokens.size() - wanted) + " of the " + std::to_string(tokens.size()) + " GPUs (" +
          source + ") stay idle: they do not fill a worker of --gpus-per-worker=" + std::to_string(gpw));
    }
    for (int i = 0; i < layout.local_workers; ++i)
      layout.worker_devices.push_back(SliceDevices(tokens, i, gpw));
  }
  BindCpus(t, o, env, node, layout);
  if (!o.device_binding) {
    // Workers keep every device this distrun has; JAX learns its share from JAX_LOCAL_DEVICE_IDS.
    for (auto& devices : layout.worker_devices) devices.clear();
  }
  return layout;
}

JobAssignment ProvisionalAssignment(const Topology& t, const LocalLayout& layout, const Options& o) {
  JobAssignment a;
  a.num_nodes = t.num_nodes;
  a.node_rank = t.node_rank;
  if (layout.mode == LaunchMode::kPerTask) {
    a.rank_offset = t.task_id;
    a.num_processes = t.num_tasks;
  } else {
    // Rendezvous replaces this with prefix sums of every node's real count.
    a.rank_offset = layout.unit_index * layout.local_workers;
    a.num_processes = layout.units * layout.local_workers;
  }
  // Process 0 runs on the node that hosts the coordinator unless rendezvous learns otherwise.
  a.process0_host = t.coordinator_host;
  int port = t.coordinator_port ? *t.coordinator_port : PickFreePort();
  // An unknown host (Topology::coordinator_problem) leaves the address empty: --detect shows it as unknown.
  if (!t.coordinator_host.empty()) a.coordinator_address = FormatHostPort(t.coordinator_host, port);
  // Ports one choice gave every process (the MPI probe) keep the job's workers on the same ones.
  a.master_port = t.master_port ? *t.master_port : PickFreePort();
  a.jax_port = o.jax_coordinator_port ? *o.jax_coordinator_port : t.jax_port ? *t.jax_port : PickFreePort();
  a.run_id = o.run_id ? *o.run_id : (!t.job_id.empty() ? t.job_id : RandomHex(12));
  return a;
}

Plan MakePlan(const Topology& t, const LocalLayout& layout, const JobAssignment& a, const Options& o,
              const Environment& env) {
  Plan plan;
  plan.topology = t;
  plan.layout = layout;
  plan.assignment = a;
  plan.warnings = t.warnings;
  plan.warnings.insert(plan.warnings.end(), layout.warnings.begin(), layout.warnings.end());
  // Slurm ends a step whose node fails unless it runs with --no-kill, and says nothing of it to the tasks.
  if (o.elastic && t.method == "slurm") {
    plan.warnings.push_back(
        "--nnodes " + std::to_string(o.elastic->min_nodes) + ":" + std::to_string(o.elastic->max_nodes) +
        " in a Slurm step: Slurm ends the whole step when a node fails unless it runs with srun --no-kill "
        "(and the allocation with sbatch --no-kill); the step's variables do not say whether it does");
  }

  const std::vector<std::string>& node_tokens = layout.node_devices;
  const std::string device_variable = t.device_variable.empty() || t.device_variable.starts_with("SLURM_") ||
                                              t.device_variable.starts_with("--")
                                          ? "CUDA_VISIBLE_DEVICES"
                                          : t.device_variable;
  const std::string jax_host = o.jax_coordinator_host.value_or(a.process0_host);
  const std::string jax_address =
      jax_host.empty() || !a.jax_port ? jax_host : FormatHostPort(jax_host, *a.jax_port);
  const std::string nproc = std::to_string(layout.local_workers);
  // What every worker gets alike, worked out once rather than per worker.
  const std::string worker_path = env.program.empty() ? std::string() : WorkerPath(env, env.program);
  const std::string flight_recorder = FlightRecorderPrefix(o, env, a.run_id);
  std::optional<HostPort> agent_store;
  if (o.export_torch && o.torch_store == TorchStoreHost::kDistrun && !a.coordinator_address.empty() &&
      !a.spare && layout.local_workers > 0) {
    agent_store = ParseHostPort("coordinator address", a.coordinator_address);
  }
  const std::vector<std::string> mpi_variables = MpiLauncherVariables(env);

  // A hot spare holds no workers until it takes a lost node's seat; under --recovery in-process its workers
  // start at once and wait for a world (warm: their imports done), with this epoch's variables until then.
  const int local_workers = a.spare && o.recovery != RecoveryMode::kInProcess ? 0 : layout.local_workers;
  plan.workers.reserve(static_cast<size_t>(std::max(local_workers, 0)));
  for (int i = 0; i < local_workers; ++i) {
    WorkerPlan w;
    w.env.reserve(64);  // what the families below set, and the launcher's task variables: one allocation
    w.process_id = a.rank_offset + i;
    w.local_rank = layout.mode == LaunchMode::kPerTask ? t.local_task : i;
    const int local_world = layout.mode == LaunchMode::kPerTask ? t.local_tasks : layout.local_workers;
    w.device_tokens = layout.worker_devices[static_cast<size_t>(i)];
    if (static_cast<size_t>(i) < layout.worker_cpus.size())
      w.cpus = layout.worker_cpus[static_cast<size_t>(i)];
    if (!w.device_tokens.empty()) {
      for (size_t k = 0; k < w.device_tokens.size(); ++k) w.local_device_ids.push_back(static_cast<int>(k));
    } else if (!o.device_binding) {
      // Unnarrowed: the worker sees all of the node's devices; its share is by local rank.
      auto share = SliceDevices(node_tokens, w.local_rank, o.gpus_per_worker);
      for (const auto& token : share) {
        for (size_t k = 0; k < node_tokens.size(); ++k) {
          if (node_tokens[k] == token) w.local_device_ids.push_back(static_cast<int>(k));
        }
      }
    }
    auto set = [&w](std::string name, std::string value) {
      w.env.emplace_back(std::move(name), std::move(value));
    };
    // An address is left out while its host is unknown (Topology::coordinator_problem; only --detect gets
    // that far).
    auto set_address = [&set](std::string name, std::string value) {
      if (!value.empty()) set(std::move(name), std::move(value));
    };
    const std::string rank = std::to_string(w.process_id);
    const std::string world = std::to_string(a.num_processes);
    if (o.export_distrun) {
      set("DISTRUN_PROCESS_ID", rank);
      set("DISTRUN_NUM_PROCESSES", world);
      set("DISTRUN_LOCAL_RANK", std::to_string(w.local_rank));
      set("DISTRUN_LOCAL_WORLD_SIZE", std::to_string(local_world));
      set("DISTRUN_NODE_RANK", std::to_string(a.node_rank));
      set("DISTRUN_NUM_NODES", std::to_string(a.num_nodes));
      set("DISTRUN_LOCAL_DEVICE_IDS", JoinInts(w.local_device_ids));
      set_address("DISTRUN_COORDINATOR_ADDRESS", a.coordinator_address);
      set("DISTRUN_RUN_ID", a.run_id);
      set("DISTRUN_RESTART_COUNT", std::to_string(a.restart_count));
      set("DISTRUN_EPOCH", std::to_string(a.restart_count));
      set("DISTRUN_CLUSTER", t.method);
      if (o.recovery == RecoveryMode::kInProcess) {
        // distrun.torch reads these (and DISTRUN_RECOVERY_SOCKET, which the running distrun adds).
        set("DISTRUN_RECOVERY", RecoveryModeName(o.recovery));
        set("DISTRUN_RECOVERY_TIMEOUT", FormatSeconds(o.RecoveryTimeoutSeconds()));
      }
      // Scripts' `distrun kv`, `barrier` and `progress` reach the distrun that launched them even when it
      // is not on PATH (/opt/x/bin/distrun, a venv's bin not activated): its path, and its directory last
      // on PATH where PATH does not hold it (what PATH finds first still wins).
      if (!env.program.empty()) {
        set("DISTRUN_PROGRAM", env.program);
        if (!worker_path.empty()) set("PATH", worker_path);
      }
    }
    if (o.export_torch) {
      set("RANK", rank);
      set("WORLD_SIZE", world);
      set("LOCAL_RANK", std::to_string(w.local_rank));
      set("LOCAL_WORLD_SIZE", std::to_string(local_world));
      set("GROUP_RANK", std::to_string(a.node_rank));
      set("GROUP_WORLD_SIZE", std::to_string(a.num_nodes));
      set("ROLE_RANK", rank);
      set("ROLE_WORLD_SIZE", world);
      set("ROLE_NAME", o.role);
      if (o.torch_store == TorchStoreHost::kDistrun) {
        // torch's agent-store mode: init_process_group("env://") dials node 0's runtime, which serves the
        // TCPStore protocol (a fresh keyspace each epoch); no worker binds a port.
        if (agent_store) {
          set("MASTER_ADDR", agent_store->host);
          if (agent_store->port) set("MASTER_PORT", std::to_string(*agent_store->port));
        }
        set("TORCHELASTIC_USE_AGENT_STORE", "True");
      } else {
        set_address("MASTER_ADDR", a.process0_host);
        if (a.master_port) set("MASTER_PORT", std::to_string(*a.master_port));
      }
      set("TORCHELASTIC_RUN_ID", a.run_id);
      set("TORCHELASTIC_RESTART_COUNT", std::to_string(a.restart_count));
      set("TORCHELASTIC_MAX_RESTARTS", std::to_string(o.max_restarts));
      // 1 tears the process down on a failed collective; recovering in place needs it alive: 2 aborts the
      // communicators and raises in the worker, whose recover() forms the next group.
      if (!env.Has("TORCH_NCCL_ASYNC_ERROR_HANDLING"))
        set("TORCH_NCCL_ASYNC_ERROR_HANDLING", o.recovery == RecoveryMode::kInProcess ? "2" : "1");
      // PyTorch's Flight Recorder: a ring buffer of each rank's recent collectives, dumped when NCCL's
      // watchdog times out (or on a write to the rank's pipe), next to distrun's logs. Releases without it
      // ignore the variables; what the user set stays.
      // The names every 2.x reads; torch 2.8 renamed them and warns on each rank for the old ones, so
      // DISTRUN_TORCH_RENAME lists those distrun set itself and distrun's sitecustomize.py moves them to
      // the new names where the worker's torch is 2.8 or later (launcher/supervise/stack_collector.cc).
      std::string renamed;
      if (!env.Has("TORCH_NCCL_TRACE_BUFFER_SIZE") && !env.Has("TORCH_FR_BUFFER_SIZE")) {
        set("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000");
        renamed = "TORCH_NCCL_TRACE_BUFFER_SIZE";
      }
      if (!env.Has("TORCH_NCCL_DUMP_ON_TIMEOUT")) set("TORCH_NCCL_DUMP_ON_TIMEOUT", "1");
      const std::string& fr = flight_recorder;
      if (!env.Has("TORCH_NCCL_DEBUG_INFO_TEMP_FILE") && !env.Has("TORCH_FR_DUMP_TEMP_FILE")) {
        set("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", fr);
        set("TORCH_FR_DUMP_TEMP_FILE", fr);
        renamed += (renamed.empty() ? "" : ",") + std::string("TORCH_NCCL_DEBUG_INFO_TEMP_FILE");
      }
      // Only with distrun's own family (--export): without it torch reads the old names, and 2.8+ warns.
      if (!renamed.empty() && o.export_distrun) set("DISTRUN_TORCH_RENAME", renamed);
      if (!env.Has("OMP_NUM_THREADS")) set("OMP_NUM_THREADS", "1");
    }
    if (o.export_jax) {
      set_address("JAX_COORDINATOR_ADDRESS", jax_address);
      // JAX has no variable for the count and id: distrun's JAX cluster (python/distrun/jax.py), which
      // distrun's sitecustomize registers first in JAX's detection order, reads these.
      if (!o.export_distrun) {
        set("DISTRUN_PROCESS_ID", rank);
        set("DISTRUN_NUM_PROCESSES", world);
      }
      if (!o.device_binding && !w.local_device_ids.empty()) {
        set("JAX_LOCAL_DEVICE_IDS", JoinInts(w.local_device_ids));
      }
    }
    if (o.export_keras) {
      set_address("KERAS_DISTRIBUTION_JOB_ADDRESSES", jax_address);
      set("KERAS_DISTRIBUTION_NUM_PROCESSES", world);
      set("KERAS_DISTRIBUTION_PROCESS_ID", rank);
    }
    if (o.device_binding && !w.device_tokens.empty()) set(device_variable, Join(w.device_tokens));
    WorkerPlace place{w.process_id,
                      a.num_processes,
                      w.local_rank,
                      local_world,
                      a.node_rank,
                      a.num_nodes,
                      layout.mode == LaunchMode::kPerNode ? a.rank_offset : -1};
    w.launcher_task = WorkerIsLauncherTask(t, layout.local_workers, place);
    TaskVariableChanges task = TaskVariablesFor(env, t, layout.local_workers, place, &mpi_variables);
    for (auto& [name, value] : task.set) set(std::move(name), std::move(value));
    w.unset = std::move(task.unset);
    plan.workers.push_back(std::move(w));
  }
  return plan;
}

}  // namespace distrun
