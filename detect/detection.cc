#include "detect/detection.h"

#include <algorithm>
#include <cctype>

#include "detect/detector.h"
#include "detect/devices.h"
#include "detect/errors.h"
#include "detect/mpi_detector.h"
#include "detect/parse.h"
#include "detect/proxy_check.h"

namespace distrun {
namespace {

std::string JoinNames(const std::vector<std::string>& names, std::string_view sep) {
  std::string out;
  for (const auto& n : names) {
    if (!out.empty()) out += sep;
    out += n;
  }
  return out;
}

Topology LocalTopology(const Environment& env) {
  Topology t;
  t.method = "local";
  t.coordinator_host = "127.0.0.1";
  t.launch_mode = LaunchMode::kPerNode;
  t.hosts = {env.hostname.empty() ? std::string("localhost") : env.hostname};
  return t;
}

const Detector* FindDetector(std::string_view name) {
  for (std::span<const Detector> group : {ClusterDetectors(), NamedOnlyDetectors()}) {
    for (const Detector& d : group) {
      if (d.name == name) return &d;
    }
  }
  return nullptr;
}

// A batch script that runs distrun without srun looks like rank 0 of a job but nothing else runs. Ranks
// that another launcher started inside the batch script (mpirun, mpiexec) inherit the same variables and
// are not alone: only a job that nothing else detected gets the warning.
void WarnIfSlurmBatchStep(const Environment& env, Topology& t) {
  if (t.method != "local" && t.method != "explicit") return;
  if (!env.Has("SLURM_JOB_ID") || env.Has("SLURM_STEP_NODELIST")) return;
  if (!env.Has("SLURM_PROCID")) return;  // salloc shell: no task ids at all
  t.warnings.push_back(
      "SLURM_JOB_ID=" + env.GetOr("SLURM_JOB_ID", "") +
      " is set but no srun step is (SLURM_STEP_NODELIST is unset): this is the batch script itself, "
      "so distrun runs on this node alone; launch it with `srun distrun ...` to use the whole allocation");
}

// PMI_RANK/PMI_SIZE alone prove no launcher (pmi_detector.cc says why); a job that nothing claimed still
// deserves to hear that they were seen, since a launcher distrun does not know may have set them.
void WarnIfPmiUnclaimed(const Environment& env, const ExplicitTopology& ex, Topology& t) {
  if (ex.method != "auto" || t.method != "local") return;
  std::string seen;
  for (const char* name : {"PMI_RANK", "PMI_SIZE"}) {
    if (const std::string* v = env.Get(name))
      seen += (seen.empty() ? "" : " and ") + std::string(name) + "=" + *v;
  }
  if (seen.empty()) return;
  const Detector* pmi = FindDetector("pmi");
  t.warnings.push_back(seen + (seen.find(" and ") != std::string::npos ? " are" : " is") +
                       " set but no launcher distrun knows claims them (the pmi method also needs " +
                       JoinNames(pmi->missing(env), ", ") +
                       "), so distrun runs on this node alone; under an MPI launcher use "
                       "--cluster-detection-method mpi, or unset them if another job left them");
}

bool IsLoopbackName(std::string_view host) {
  std::string h(host);
  for (char& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return h == "localhost" || h.starts_with("localhost.") || h == "ip6-localhost" || h == "::1" ||
         h.starts_with("127.") || h.starts_with("::ffff:127.") || h == "0.0.0.0" || h == "::";
}

void ApplyExplicitValues(const ExplicitTopology& ex, Topology& t) {
  if (ex.coordinator_address) {
    HostPort hp = ParseHostPort("--coordinator-address", *ex.coordinator_address);
    t.coordinator_host = hp.host;
    if (hp.port) t.coordinator_port = hp.port;
  }
  if (ex.coordinator_port) t.coordinator_port = ex.coordinator_port;
  if (ex.num_nodes) {
    if (*ex.num_nodes < 1) throw UsageError("--num-nodes=0 is not allowed; give at least 1");
    t.num_nodes = *ex.num_nodes;
    if (t.hosts.size() != static_cast<size_t>(t.num_nodes)) t.hosts.clear();
  }
  if (ex.node_rank) t.node_rank = *ex.node_rank;
  if (ex.node_rank_auto) {
    t.node_rank = 0;
    t.node_rank_auto = true;
  }
  if (ex.num_nodes || ex.node_rank) {
    RequireBelow("--node-rank", t.node_rank, "--num-nodes", t.num_nodes);
  }
  if (ex.num_processes) {
    if (*ex.num_processes < 1) throw UsageError("--num-processes=0 is not allowed; give at least 1");
    t.num_tasks = *ex.num_processes;
  }
  if (ex.process_id) {
    t.task_id = *ex.process_id;
    // An explicit process id means the user runs one distrun per worker.
    if (t.method == "explicit") {
      t.launch_mode = LaunchMode::kPerTask;
      if (!ex.num_nodes) t.num_nodes = t.num_tasks;
      if (!ex.node_rank) t.node_rank = t.task_id;
      if (static_cast<size_t>(t.num_nodes) != t.hosts.size()) t.hosts.clear();
    }
  }
  if (ex.num_processes || ex.process_id) {
    RequireBelow("--process-id", t.task_id, "--num-processes", t.num_tasks);
  }
  if (ex.local_device_ids) {
    t.visible_devices = *ex.local_device_ids;
    t.device_variable = "--local-device-ids";
  }
}

// The Kubernetes detector reads distrun's own DISTRUN_NUM_NODES and DISTRUN_COORDINATOR_ADDRESS, which are
// the variables of --num-nodes and --coordinator-address: a value given as a flag or a config key reaches
// it as the variable it stands for, so that one option behaves one way however it is given. Nothing to
// add: nullopt, and the caller's environment is used as it is.
std::optional<Environment> WithExplicitVariables(const Environment& env, const ExplicitTopology& ex) {
  const bool nodes = ex.num_nodes && *ex.num_nodes >= 1;  // 0 is refused by ApplyExplicitValues
  if (!nodes && !ex.coordinator_address) return std::nullopt;
  Environment seen = env;
  if (nodes) seen.vars["DISTRUN_NUM_NODES"] = std::to_string(*ex.num_nodes);
  if (ex.coordinator_address) seen.vars["DISTRUN_COORDINATOR_ADDRESS"] = *ex.coordinator_address;
  return seen;
}

}  // namespace

std::vector<std::string> DetectionMethodNames() {
  std::vector<std::string> names = {"auto", "deactivate", "local"};
  for (const Detector& d : ClusterDetectors()) names.emplace_back(d.name);
  for (const Detector& d : NamedOnlyDetectors()) names.emplace_back(d.name);
  return names;
}

Topology DetectTopology(const Environment& env, const ExplicitTopology& ex) {
  const std::optional<Environment> with_explicit = WithExplicitVariables(env, ex);
  const Environment& seen = with_explicit ? *with_explicit : env;  // what the detectors read
  Topology t;
  if (ex.method == "auto") {
    t = LocalTopology(env);
    for (const Detector& d : ClusterDetectors()) {
      if (d.missing(seen).empty()) {
        t = d.detect(seen);
        t.method = std::string(d.name);
        break;
      }
    }
    // Explicit values come before every detector: with nothing detected, an explicit process id makes
    // this one process of an explicit job (as with deactivate), not a workstation's node.
    if (t.method == "local" && ex.process_id) t.method = "explicit";
  } else if (ex.method == "deactivate") {
    t = LocalTopology(env);
    t.method = "explicit";
  } else if (ex.method == "local") {
    t = LocalTopology(env);
  } else {
    const Detector* d = FindDetector(ex.method);
    if (d == nullptr) {
      throw UsageError("--cluster-detection-method='" + ex.method + "' is not a known method; use one of " +
                       JoinNames(DetectionMethodNames(), ", "));
    }
    std::vector<std::string> missing = d->missing(seen);
    if (!missing.empty()) {
      throw UsageError("--cluster-detection-method=" + ex.method +
                       " was named but its environment is absent: " + JoinNames(missing, ", ") +
                       " not set; run distrun under that launcher or pick another method");
    }
    t = d->detect(seen);
    t.method = ex.method;
  }

  // Only where the launcher's variables leave rank 0's host unknown (MPI ranks on several hosts) does
  // distrun ask the launcher's MPI library: on one host the variables suffice, --detect stays fast, and
  // the workers keep their ranks' MPI identity, which the probe would use up. Every rank of such a job
  // takes this path, as MPI_Init needs.
  if (t.coordinator_host.empty() && !ex.coordinator_address) {
    try {
      CompleteWithMpiProbe(env, t);
    } catch (const UsageError& e) {
      t.coordinator_problem = e.what();
      t.warnings.push_back(t.coordinator_problem);
    }
  }

  WarnIfSlurmBatchStep(env, t);
  WarnIfPmiUnclaimed(env, ex, t);

  // A variable that narrows this process's devices wins over what the detector inferred (for example
  // SLURM_STEP_GPUS), because it is what CUDA inside the workers will see.
  if (auto visible = ReadVisibleDevices(env)) {
    t.visible_devices = visible->tokens;
    t.device_variable = visible->variable;
    if (!visible->ignored.empty()) {
      t.warnings.push_back(visible->variable + "='" + env.GetOr(visible->variable, "") +
                           "' holds a negative index: CUDA ignores it and every entry after it, so only " +
                           std::to_string(visible->tokens.size()) +
                           " device(s) are used; remove the entries "
                           "from the negative one on if that is not what you meant");
    }
  }
  ApplyExplicitValues(ex, t);

  if (t.num_nodes > 1 && IsLoopbackName(t.coordinator_host)) {
    t.warnings.push_back(
        "coordinator address '" + t.coordinator_host + "' is a loopback name but the job spans " +
        std::to_string(t.num_nodes) +
        " hosts; other hosts cannot reach it: give --coordinator-address HOST with a routable name");
  }
  for (std::string& w : ProxyWarnings(env, t.coordinator_host)) t.warnings.push_back(std::move(w));
  return t;
}

}  // namespace distrun
