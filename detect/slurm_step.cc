#include "detect/slurm_step.h"

#include <algorithm>

#include "detect/coordinator_port.h"
#include "detect/detector_util.h"
#include "detect/devices.h"
#include "detect/errors.h"
#include "detect/hostlist.h"
#include "detect/parse.h"

namespace distrun {
namespace {

constexpr std::string_view kInconsistent =
    "the step's SLURM_* variables disagree; do not set them by hand (or copy them from another job), and "
    "start distrun with srun";

// Slurm's special step ids (slurm.h), as 32-bit unsigned values.
constexpr long long kFirstSpecialStep = 0xfffffff0LL;
constexpr long long kInteractiveStep = 0xfffffffaLL;

const std::string& Required(const Environment& env, std::string_view name) {
  const std::string* value = env.Get(name);
  if (value == nullptr) throw UsageError(std::string(name) + " is not set; srun sets it in every step");
  return *value;
}

// Heterogeneous jobs describe each component in *_HET_GROUP_n copies (PACK before Slurm 20.02), and
// the plain variables then describe only part of the job. A group 0 copy alone marks nothing: Slurm 22.05's
// srun sets SLURM_JOB_CPUS_PER_NODE_PACK_GROUP_0 in every step inside an sbatch or salloc allocation.
void RejectHeterogeneousJob(const Environment& env) {
  for (const auto& [name, value] : env.vars) {
    if (!name.starts_with("SLURM_")) continue;
    bool group_copy =
        name.find("_HET_GROUP_") != std::string::npos || name.find("_PACK_GROUP_") != std::string::npos;
    bool het =
        name == "SLURM_HET_SIZE" || name == "SLURM_PACK_SIZE" || (group_copy && !name.ends_with("_GROUP_0"));
    if (het) {
      ThrowBadVariable(name, value, "marks a heterogeneous Slurm job, which distrun does not support",
                       "run one srun per component in jobs of their own, or use --cluster-detection-method "
                       "deactivate with explicit --coordinator-address, --num-processes and --process-id");
    }
  }
}

// "-5" (Slurm >= 26.05 prints special steps as negative) or "4294967291".
long long ParseStepNumber(std::string_view name, std::string_view value) {
  bool negative = value.starts_with('-');
  std::string_view digits = negative ? value.substr(1) : value;
  bool plausible =
      !digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos &&
      (!negative || (digits.size() <= 2 && digits != "0" && std::stoi(std::string(digits)) <= 16));
  if (!plausible) {
    ThrowBadVariable(name, value, "is not a step number",
                     "srun sets a number such as 0; unset it if it was copied from another job");
  }
  long long number = ParseJobNumber(name, digits);
  return negative ? 0x100000000LL - number : number;
}

// SLURM_NODE_ALIASES="name:addr:hostname,..." names the address of cloud nodes that DNS may not know.
std::string AliasAddress(const Environment& env, const std::string& node) {
  const std::string* aliases = env.Get("SLURM_NODE_ALIASES");
  if (aliases == nullptr || aliases->empty() || *aliases == "(null)") return node;
  std::string_view rest = *aliases;
  auto bad = [&] {
    ThrowBadVariable("SLURM_NODE_ALIASES", *aliases, "is not a list of name:address:hostname entries",
                     "unset it or give entries such as n1:10.0.0.1:n1 separated by commas");
  };
  while (!rest.empty()) {
    size_t colon = rest.find(':');
    if (colon == 0 || colon == rest.npos) bad();
    std::string_view name = rest.substr(0, colon);
    rest.remove_prefix(colon + 1);
    std::string_view addr;
    if (rest.starts_with('[')) {  // IPv6 in brackets
      size_t close = rest.find(']');
      if (close == rest.npos || close == 1) bad();
      addr = rest.substr(1, close - 1);
      rest.remove_prefix(close + 1);
      if (!rest.starts_with(':')) bad();
      rest.remove_prefix(1);
    } else {
      colon = rest.find(':');
      if (colon == 0 || colon == rest.npos) bad();
      addr = rest.substr(0, colon);
      rest.remove_prefix(colon + 1);
    }
    size_t comma = rest.find(',');
    std::string_view hostname = rest.substr(0, comma);
    if (hostname.empty()) bad();
    rest.remove_prefix(comma == rest.npos ? rest.size() : comma + 1);
    if (name == node) return std::string(addr);
  }
  return node;
}

}  // namespace

std::vector<std::string> MissingSlurmStepVariables(const Environment& env) {
  return AbsentVariables(
      env, {"SLURM_STEP_NODELIST", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_JOB_ID"});
}

bool LaunchedByFlux(const Environment& env) { return env.Has("FLUX_TASK_RANK") && env.Has("FLUX_JOB_ID"); }

SlurmStep ReadSlurmStep(const Environment& env) {
  RejectHeterogeneousJob(env);
  SlurmStep s;

  const std::string& nodelist = Required(env, "SLURM_STEP_NODELIST");
  s.hosts = ExpandHostlist("SLURM_STEP_NODELIST", nodelist);
  if (s.hosts.empty()) ThrowBadVariable("SLURM_STEP_NODELIST", nodelist, "names no hosts", kInconsistent);
  const int num_hosts = static_cast<int>(s.hosts.size());
  auto hosts_text = [&] {
    return "SLURM_STEP_NODELIST='" + ShownValue(nodelist) + "' (" + std::to_string(num_hosts) + " hosts)";
  };

  s.num_tasks = RequireInt(env, "SLURM_STEP_NUM_TASKS");
  RequirePositive("SLURM_STEP_NUM_TASKS", s.num_tasks);
  s.task_id = RequireInt(env, "SLURM_PROCID");
  RequireBelow("SLURM_PROCID", s.task_id, "SLURM_STEP_NUM_TASKS", s.num_tasks);
  s.local_task = RequireInt(env, "SLURM_LOCALID");

  if (auto step_nodes = OptionalInt(env, "SLURM_STEP_NUM_NODES"); step_nodes && *step_nodes != num_hosts) {
    ThrowBadVariable("SLURM_STEP_NUM_NODES", *env.Get("SLURM_STEP_NUM_NODES"),
                     "does not match " + hosts_text(), kInconsistent);
  }

  if (auto node_id = OptionalInt(env, "SLURM_NODEID")) {
    s.node_id = *node_id;
    if (s.node_id >= num_hosts) {
      ThrowBadVariable("SLURM_NODEID", *env.Get("SLURM_NODEID"),
                       "is not below the host count of " + hosts_text(), kInconsistent);
    }
  } else if (num_hosts > 1) {
    throw UsageError("SLURM_NODEID is not set but " + hosts_text() +
                     " spans several hosts, so this task's node is unknown; start distrun with srun");
  }

  if (const std::string* per_node = env.Get("SLURM_STEP_TASKS_PER_NODE")) {
    std::vector<int> counts = ExpandTaskCounts("SLURM_STEP_TASKS_PER_NODE", *per_node);
    if (counts.size() != s.hosts.size()) {
      ThrowBadVariable("SLURM_STEP_TASKS_PER_NODE", *per_node,
                       "gives " + std::to_string(counts.size()) + " per-node counts for " + hosts_text(),
                       kInconsistent);
    }
    long long sum = 0;
    for (int count : counts) {
      if (count < 1) {
        ThrowBadVariable("SLURM_STEP_TASKS_PER_NODE", *per_node, "gives a node no tasks", kInconsistent);
      }
      sum += count;
    }
    if (sum != s.num_tasks) {
      ThrowBadVariable("SLURM_STEP_TASKS_PER_NODE", *per_node,
                       "adds up to " + std::to_string(sum) +
                           " tasks but SLURM_STEP_NUM_TASKS=" + std::to_string(s.num_tasks),
                       kInconsistent);
    }
    s.local_tasks = counts[static_cast<size_t>(s.node_id)];
  } else if (num_hosts == 1) {
    s.local_tasks = s.num_tasks;
  } else {
    throw UsageError("SLURM_STEP_TASKS_PER_NODE is not set but " + hosts_text() +
                     " spans several hosts, so the tasks per node are unknown; start distrun with srun");
  }
  if (s.local_task >= s.local_tasks) {
    ThrowBadVariable("SLURM_LOCALID", *env.Get("SLURM_LOCALID"),
                     "is not below the " + std::to_string(s.local_tasks) + " tasks of node " +
                         std::to_string(s.node_id) + " (SLURM_STEP_TASKS_PER_NODE='" +
                         ShownValue(env.GetOr("SLURM_STEP_TASKS_PER_NODE", "")) + "')",
                     kInconsistent);
  }

  // SLURM_GTIDS lists the global ids of the tasks on this node: this task must be one of them.
  if (const std::string* gtids = env.Get("SLURM_GTIDS")) {
    std::vector<std::string> ids = Split(*gtids, ',');
    std::vector<int> parsed;
    for (const std::string& id : ids) parsed.push_back(ParseCount("SLURM_GTIDS", id));
    bool has_self = std::find(parsed.begin(), parsed.end(), s.task_id) != parsed.end();
    if (static_cast<int>(parsed.size()) != s.local_tasks || !has_self) {
      ThrowBadVariable("SLURM_GTIDS", *gtids,
                       "does not list this node's " + std::to_string(s.local_tasks) +
                           " tasks including SLURM_PROCID=" + std::to_string(s.task_id),
                       kInconsistent);
    }
  }

  const std::string& job = Required(env, "SLURM_JOB_ID");
  s.job_number = ParseJobNumber("SLURM_JOB_ID", job);
  s.job_id = job;
  const char* step_name = env.Has("SLURM_STEP_ID") ? "SLURM_STEP_ID" : "SLURM_STEPID";
  if (const std::string* step = env.Get(step_name)) {
    s.step_number = ParseStepNumber(step_name, *step);
    s.job_id += "." + *step;
    if (s.step_number >= kFirstSpecialStep) {
      std::string what = s.step_number == kInteractiveStep ? "salloc's interactive step" : "a special step";
      s.warnings.push_back(std::string(step_name) + "=" + *step + " is " + what +
                           ", not an srun step: distrun sees only this one process; launch it with "
                           "`srun distrun ...` to use the whole allocation");
    }
  }

  // The node list holds Slurm NodeNames; SLURMD_NODENAME is this node's, so it must sit at SLURM_NODEID.
  if (const std::string* self = env.Get("SLURMD_NODENAME");
      self != nullptr && *self != s.hosts[static_cast<size_t>(s.node_id)]) {
    s.warnings.push_back("SLURMD_NODENAME=" + ShownValue(*self) +
                         " but SLURM_NODEID=" + std::to_string(s.node_id) + " names " +
                         s.hosts[static_cast<size_t>(s.node_id)] + " in SLURM_STEP_NODELIST; " +
                         "the SLURM_* variables may be stale copies from another step");
  }

  s.coordinator_host = AliasAddress(env, s.hosts.front());

  for (const char* name : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS"}) {
    if (const std::string* gpus = env.Get(name)) {
      // An empty value (a step without GPUs) gives none; anything else must be a valid token list.
      if (!gpus->empty()) s.gpus = ParseDeviceTokens(name, *gpus);
      s.gpu_variable = name;
      break;
    }
  }
  return s;
}

void FillFromSlurmStep(const SlurmStep& step, Topology& t) {
  // Node 0 of the step always runs a task, whichever task is process 0.
  t.coordinator_host = step.coordinator_host;
  t.coordinator_port = SlurmCoordinatorPort(step.job_number, step.step_number);
  t.launch_mode =
      step.num_tasks == static_cast<int>(step.hosts.size()) ? LaunchMode::kPerNode : LaunchMode::kPerTask;
  t.num_nodes = static_cast<int>(step.hosts.size());
  t.node_rank = step.node_id;
  t.hosts = step.hosts;
  t.num_tasks = step.num_tasks;
  t.task_id = step.task_id;
  t.local_task = step.local_task;
  t.local_tasks = step.local_tasks;
  t.visible_devices = step.gpus;
  t.device_variable = step.gpus.empty() ? "" : step.gpu_variable;
  t.job_id = step.job_id;
  t.warnings.insert(t.warnings.end(), step.warnings.begin(), step.warnings.end());
}

}  // namespace distrun
