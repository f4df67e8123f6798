#pragma once
// Every user-settable option, resolved from one table into flags, DISTRUN_<NAME> variables and config keys
// with precedence flag > environment > config file > default.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "detect/detection.h"
#include "detect/parse.h"
#include "detect/topology.h"
#include "launcher/config/host_list.h"
#include "launcher/process/stream_choice.h"
#include "runtime/service/membership.h"

namespace distrun {

enum class OptionSource { kDefault, kConfig, kEnvironment, kFlag };
const char* OptionSourceName(OptionSource source);

enum class DetectFormat { kText, kJson, kYaml, kEnv };
enum class TagOutput { kAuto, kOn, kOff };
enum class CpuBind { kNone, kGpu, kNuma };
// Who serves PyTorch's store (MASTER_ADDR:MASTER_PORT): node 0's distrun on its coordinator port (torch's
// agent-store mode), or worker rank 0 (torch's own TCPStore server, bound by the worker).
enum class TorchStoreHost { kDistrun, kRank0 };
// How a command without "--" runs (launcher/plan/worker_command.h): torchrun's way (a Python script with
// Python), -m/--module (a module: python -m), --no-python (the command itself).
enum class ScriptForm { kScript, kModule, kProgram };
// Whether agents prove their user with munge (launcher/job/job_protection.h): where it works and no job token
// was given (auto), never (off), or always, failing where munge does not work (require).
enum class MungeUse { kAuto, kOff, kRequire };
// What a change of the job's world (a lost node, a failed worker, an arrival) does to the workers
// (ARCHITECTURE.md, "Recovering in place"): every worker is stopped and started again (restart), or the
// survivors keep their processes and are handed the next world (in-process).
enum class RecoveryMode { kRestart, kInProcess };
const char* RecoveryModeName(RecoveryMode mode);

struct Options {
  ExplicitTopology topology;              // detection method and explicit values
  std::string nproc_per_node = "auto";    // N | gpu | cpu | auto
  std::optional<LaunchMode> launch_mode;  // unset: the launcher's layout decides
  int gpus_per_worker = 1;
  bool device_binding = true;  // narrow CUDA_VISIBLE_DEVICES per worker
  bool export_torch = true, export_jax = true, export_keras = true, export_distrun = true;
  TorchStoreHost torch_store = TorchStoreHost::kDistrun;
  std::optional<std::string> run_id;
  int max_restarts = 0;
  // Elastic membership (--nnodes MIN:MAX, --elastic-policy): unset, losing any node ends the job.
  std::optional<ElasticRange> elastic;
  std::optional<int> nnodes;                              // --nnodes N (torchrun's spelling of --num-nodes N)
  ElasticPolicy elastic_policy = ElasticPolicy::kResize;  // folded into `elastic` once every source is read
  ScaleUp scale_up = ScaleUp::kNextRestart;               // likewise
  double scale_up_notice_s = 0;      // scale-up now: from the change notice to the next epoch
  std::optional<int> change_signal;  // sent to the workers when a change of the world is coming
  RecoveryMode recovery = RecoveryMode::kRestart;
  // In-process: how long a survivor has, from the notice, to reach the next world (it calls
  // distrun.torch.recover()) before it is killed and started again; unset: 3 x --heartbeat-timeout.
  std::optional<double> recovery_timeout_s;
  double RecoveryTimeoutSeconds() const { return recovery_timeout_s.value_or(3 * heartbeat_timeout_s); }
  // --join HOST:PORT[,HOST:PORT...]: this distrun arrives at a running elastic job whose coordinator is
  // there (or at one of these: node 0's and its standbys' addresses, tried in turn).
  std::optional<std::string> join;
  // Elastic jobs: the port a node's distrun reserves to serve the job as its standby (DESIGN §4.5); unset:
  // one the OS picks.
  std::optional<int> standby_port;
  std::optional<std::string> node_check;  // sh -c command run before each epoch; failing, the node leaves
  double node_check_timeout_s = 60;
  DetectFormat format = DetectFormat::kText;
  std::string log_level = "info";

  // JAX's own variables, honoured as JAX users expect: they name JAX's coordinator service.
  std::optional<std::string> jax_coordinator_host;
  std::optional<int> jax_coordinator_port;

  std::vector<std::string> command;       // after "--", or the config's `command:`
  std::optional<ScriptForm> script_form;  // torchrun's -m or --no-python (also PET_MODULE, PET_NO_PYTHON)

  // For each option name: the effective value as text and where it came from.
  struct Effective {
    std::string value;
    OptionSource source = OptionSource::kDefault;
  };
  std::map<std::string, Effective> effective;

  // Supervision and output of launched workers (launcher/supervise/supervisor.h, launcher/process/output.h).
  double grace_period_s = 30;        // SIGTERM → SIGKILL
  double timeout_s = 0;              // wall time of the job; 0: none
  std::vector<int> forward_signals;  // forwarded to workers without stopping the job
  TagOutput tag_output = TagOutput::kAuto;
  std::string tag_template = "[{rank}] ";
  std::optional<std::string> log_dir;
  std::optional<std::vector<int>> ranks_filter;        // console only
  std::optional<std::vector<int>> local_ranks_filter;  // console only, by local rank (torchrun's)
  StreamChoice redirects;                              // streams to files only (torchrun's -r)
  StreamChoice tee;                                    // streams to files as well (torchrun's -t)
  std::string role = "default";                        // ROLE_NAME (torchrun's --role)

  // The runtime (runtime/): the coordination service hosted by node 0 and this node's agent.
  std::optional<std::string> token_file;  // the job token, when DISTRUN_TOKEN is not set
  MungeUse munge = MungeUse::kAuto;
  std::optional<std::string> munge_socket;              // munged's socket; unset: libmunge's default
  double heartbeat_timeout_s = 10;                      // silence after which a node counts as lost
  double initialization_timeout_s = 300;                // how long rendezvous waits for every node
  std::optional<std::string> coordinator_bind_address;  // where node 0's service listens

  // The hang watch (runtime/service/hang_watch.h): armed by the workers' progress reports.
  std::optional<double> hang_timeout_s;  // unset: learned from the step interval; 0: off
  double stall_warning_s = 300;          // without progress reports: warn after this much quiet; 0: never
  double straggler_threshold = 0.75;     // a rank's section score below it, window after window: a straggler

  // What node 0 shows of the job (runtime/metrics/): Prometheus' /metrics, the page, /job.json.
  std::optional<HostPort> metrics_address;        // port 0: one the OS picks; unset: none
  std::optional<std::string> metrics_token_file;  // a bearer token every request must carry

  CpuBind cpu_bind = CpuBind::kNone;  // CPU affinity of each worker

  // A job started over ssh from this machine (launcher/remote/ssh_launch.h): empty hosts, none.
  std::vector<HostEntry> hosts;
  std::optional<std::string> hostfile;        // where they came from, when a file
  std::vector<std::string> ssh_args;          // more options for every ssh
  int ssh_concurrency = 10;                   // connections being opened at once
  double ssh_connect_timeout_s = 10;          // connect, log in and start distrun within this
  std::optional<std::string> remote_distrun;  // distrun's path on the hosts; unset: this one's
  std::vector<std::string> forward_env;       // -x: NAME, NAME=VALUE or PREFIX*
};

// One row of the option table.
struct OptionSpec {
  const char* name;        // flag name without dashes: "nproc-per-node"
  const char* value_name;  // for --help: "N|gpu|cpu|auto"
  const char* help;
  const char* default_value;  // nullptr: unset unless given
  // Parses `value` into `options`; `where` names the input for error messages.
  void (*apply)(Options& options, const std::string& where, const std::string& value);
};

const std::vector<OptionSpec>& OptionTable();

// --heartbeat-timeout of an elastic job (--nnodes) that does not set it.
inline constexpr double kElasticHeartbeatTimeoutS = 3;

// "nproc-per-node" → "DISTRUN_NPROC_PER_NODE" and "nproc_per_node".
std::string EnvNameFor(const char* option_name);
std::string ConfigKeyFor(const char* option_name);

// Raw values gathered from one source, keyed by option name, with a description of where each came from
// (e.g. "--nproc-per-node", "DISTRUN_NPROC_PER_NODE", "distrun.yaml:3:17: nproc_per_node").
struct RawValue {
  std::string value;
  std::string where;
};
using RawValues = std::map<std::string, RawValue>;

// Applies defaults (the table's, then `defaults`: what torchrun's options imply, CommandLine::defaults), then
// config, environment (DISTRUN_* over torchrun's PET_*) and flags in rising precedence.
Options ResolveOptions(const RawValues& flags,
                       const std::map<std::string, std::string, std::less<>>& env_vars,
                       const RawValues& config, const RawValues& defaults = {});

}  // namespace distrun
