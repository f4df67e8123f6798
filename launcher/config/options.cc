#include "launcher/config/options.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "detect/devices.h"
#include "detect/errors.h"
#include "detect/parse.h"
#include "launcher/config/host_list.h"
#include "launcher/config/torchrun_dialect.h"
#include "launcher/process/output.h"
#include "launcher/process/signal_names.h"

namespace distrun {

const char* RecoveryModeName(RecoveryMode mode) {
  return mode == RecoveryMode::kInProcess ? "in-process" : "restart";
}

namespace {

[[noreturn]] void Bad(const std::string& where, const std::string& value, const std::string& expected) {
  throw UsageError(where + "='" + value + "' is not valid; " + expected);
}

int PositiveInt(const std::string& where, const std::string& value,
                const char* expected = "use a number of at least 1") {
  int n = 0;
  try {
    n = ParseCount(where, value);
  } catch (const UsageError&) {
    Bad(where, value, expected);
  }
  if (n < 1) Bad(where, value, expected);
  return n;
}

// "MIN:MAX" (torchrun's spelling), "MIN..MAX", or "N" (a job of exactly N nodes: no range).
ElasticRange ParseNodeRange(const std::string& where, const std::string& value) {
  const char* expected = "use MIN:MAX (or MIN..MAX) with 1 <= MIN <= MAX, e.g. 2:4";
  size_t sep = value.find(':');
  size_t sep_len = 1;
  if (sep == std::string::npos && (sep = value.find("..")) != std::string::npos) sep_len = 2;
  auto count = [&](const std::string& part) {
    try {
      return PositiveInt(where, part);
    } catch (const UsageError&) {
      Bad(where, value, expected);  // the whole value in the message, not the part
    }
  };
  ElasticRange r;
  r.min_nodes = count(value.substr(0, sep));
  r.max_nodes = sep == std::string::npos ? r.min_nodes : count(value.substr(sep + sep_len));
  if (r.max_nodes < r.min_nodes) Bad(where, value, expected);
  return r;
}

// ssh's extra options as one string: words split at blanks, '...' and "..." keep blanks (no expansion).
std::vector<std::string> ShellWords(const std::string& where, const std::string& value) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (char c : value) {
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else {
        word += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quote) Bad(where, value, std::string("close the quote ") + quote);
  if (in_word) words.push_back(std::move(word));
  return words;
}

std::vector<std::string> CommaList(const std::string& where, const std::string& value) {
  std::vector<std::string> items;
  for (const std::string& item : Split(value, ',')) {
    std::string_view t = Trim(item);
    if (t.empty()) Bad(where, value, "use a comma-separated list without empty items");
    items.emplace_back(t);
  }
  return items;
}

const std::vector<OptionSpec> kTable = {
    {"cluster-detection-method", "NAME",
     "auto (detect), deactivate (use only explicit values), or one of local, ompi, pmi, slurm, tpu, k8s, "
     "lsf, flux, torchelastic, mpi (ask the launcher's MPI library; DISTRUN_MPI_LIBRARY names another)",
     "auto",
     [](Options& o, const std::string& where, const std::string& v) {
       std::vector<std::string> names = DetectionMethodNames();
       if (std::find(names.begin(), names.end(), v) == names.end()) {
         std::string list;
         for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
         Bad(where, v, "use one of " + list);
       }
       o.topology.method = v;
     }},
    {"coordinator-address", "HOST[:PORT]", "host (and port) of distrun's runtime service", nullptr,
     [](Options& o, const std::string& where, const std::string& v) {
       ParseHostPort(where, v);
       o.topology.coordinator_address = v;
     }},
    {"coordinator-port", "PORT", "port of distrun's runtime service (default: derived from the job id)",
     nullptr,
     [](Options& o, const std::string& where, const std::string& v) {
       o.topology.coordinator_port = ParsePort(where, v);
     }},
    {"num-processes", "N", "workers in the whole job (explicit; overrides detection)", nullptr,
     [](Options& o, const std::string& where, const std::string& v) {
       o.topology.num_processes = PositiveInt(where, v);
     }},
    {"process-id", "ID", "this process's id, 0..N-1 (explicit; overrides detection)", nullptr,
     [](Options& o, const std::string& where, const std::string& v) {
       o.topology.process_id = ParseCount(where, v);
     }},
    {"num-nodes", "N", "nodes in the job (explicit; overrides detection)", nullptr,
     [](Options& o, const std::string& where, const std::string& v) {
       o.topology.num_nodes = PositiveInt(where, v);
     }},
    {"node-rank", "ID|auto",
     "this node's index, 0..N-1 (explicit; overrides detection); auto: node 0 is the distrun that serves the "
     "coordinator address, the others get theirs from it in the order they come (torchrun's c10d)",
     nullptr,
     [](Options& o, const std::string& where, const std::string& v) {
       o.topology.node_rank_auto = v == "auto";
       if (o.topology.node_rank_auto)
         o.topology.node_rank.reset();
       else
         o.topology.node_rank = ParseCount(where, v);
     }},
    {"local-device-ids", "LIST",
     "devices this node may use, as tokens: 0,1 or GPU-<uuid>,... (overrides "
     "CUDA_VISIBLE_DEVICES for planning)",
     nullptr,
     [](Options& o, const std::string& where, const std::string& v) {
       o.topology.local_device_ids = ParseDeviceTokens(where, v);
     }},
    {"nproc-per-node", "N|gpu|cpu|auto", "workers per node in per-node mode (auto: one per GPU, or 1)",
     "auto",
     [](Options& o, const std::string& where, const std::string& v) {
       if (v != "auto" && v != "gpu" && v != "cpu")
         PositiveInt(where, v, "use a number of at least 1, gpu, cpu or auto");
       o.nproc_per_node = v;
     }},
    {"launch-mode", "auto|per-task|per-node",
     "per-task: run one worker as the detected process; per-node: spawn the node's workers", "auto",
     [](Options& o, const std::string& where, const std::string& v) {
       if (v == "auto")
         o.launch_mode.reset();
       else if (v == "per-task")
         o.launch_mode = LaunchMode::kPerTask;
       else if (v == "per-node")
         o.launch_mode = LaunchMode::kPerNode;
       else
         Bad(where, v, "use auto, per-task or per-node");
     }},
    {"gpus-per-worker", "K", "GPUs each worker gets when CUDA_VISIBLE_DEVICES is narrowed", "1",
     [](Options& o, const std::string& where, const std::string& v) {
       o.gpus_per_worker = PositiveInt(where, v);
     }},
    {"device-binding", "auto|none", "auto: narrow each worker's CUDA_VISIBLE_DEVICES; none: leave it", "auto",
     [](Options& o, const std::string& where, const std::string& v) {
       if (v != "auto" && v != "none") Bad(where, v, "use auto or none");
       o.device_binding = v == "auto";
     }},
    {"export", "LIST", "variable families set for workers: any of torch,jax,keras,distrun",
     "torch,jax,keras,distrun",
     [](Options& o, const std::string& where, const std::string& v) {
       o.export_torch = o.export_jax = o.export_keras = o.export_distrun = false;
       for (const std::string& family : CommaList(where, v)) {
         if (family == "torch")
           o.export_torch = true;
         else if (family == "jax")
           o.export_jax = true;
         else if (family == "keras")
           o.export_keras = true;
         else if (family == "distrun")
           o.export_distrun = true;
         else
           Bad(where, v, "'" + family + "' is not a family; use torch, jax, keras and/or distrun");
       }
     }},
    {"torch-store", "distrun|rank0",
     "who serves PyTorch's store (MASTER_ADDR:MASTER_PORT): distrun (node 0's runtime port; survives "
     "restarts) or rank0 (worker rank 0 binds MASTER_PORT, as plain env:// does)",
     "distrun",
     [](Options& o, const std::string& where, const std::string& v) {
       if (v == "distrun")
         o.torch_store = TorchStoreHost::kDistrun;
       else if (v == "rank0")
         o.torch_store = TorchStoreHost::kRank0;
       else
         Bad(where, v, "use distrun or rank0");
     }},
    {"run-id", "ID", "job identity given to workers (default: the launcher's job id, else random)", nullptr,
     [](Options& o, const std::string& where, const std::string& v) {
       bool ok = !v.empty() && v.size() <= 128 && std::all_of(v.begin(), v.end(), [](char c) {
         return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
       });
       if (!ok) Bad(where, v, "use up to 128 letters, digits, '-', '_' or '.'");
       o.run_id = v;
     }},
    {"max-restarts", "N", "restart all workers up to N times after a failure", "0",
     [](Options& o, const std::string& where, const std::string& v) {
       o.max_restarts = ParseCount(where, v);
     }},
    {"nnodes", "N|MIN:MAX",
     "N: a job of N nodes (as --num-nodes); MIN:MAX: an elastic job, which goes on while at least MIN of "
     "its nodes live (MIN..MAX also works)",
     nullptr,
     [](Options& o, const std::string& where, const std::string& v) {
       ElasticRange range = ParseNodeRange(where, v);
       if (v.find(':') == std::string::npos && v.find("..") == std::string::npos) {
         o.nnodes = range.min_nodes;  // torchrun's --nnodes N: N nodes, no range
       } else {
         o.elastic = range;
       }
     }},
    {"elastic-policy", "resize|spares",
     "with --nnodes: resize (every live node works) or spares (MIN nodes work, the others wait to replace a "
     "lost one)",
     "resize",
     [](Options& o, const std::string& where, const std::string& v) {
       ElasticPolicy policy = ElasticPolicy::kResize;
       if (v == "spares")
         policy = ElasticPolicy::kSpares;
       else if (v != "resize")
         Bad(where, v, "use resize or spares");
       o.elastic_policy = policy;
     }},
    {"scale-up", "never|next-restart|now",
     "with --nnodes and --elastic-policy resize: when a node that arrives later (--join) joins the world: "
     "never "
     "(only in a lost node's place), at the next restart, or now (the job restarts with it)",
     "next-restart",
     [](Options& o, const std::string& where, const std::string& v) {
       if (v == "never")
         o.scale_up = ScaleUp::kNever;
       else if (v == "next-restart")
         o.scale_up = ScaleUp::kNextRestart;
       else if (v == "now")
         o.scale_up = ScaleUp::kNow;
       else
         Bad(where, v, "use never, next-restart or now");
     }},
    {"scale-up-notice", "SECONDS",
     "with --scale-up now: how long the workers have, after they were told that a node arrived, before the "
     "job restarts with it",
     "0",
     [](Options& o, const std::string& where, const std::string& v) {
       o.scale_up_notice_s = ParseSeconds(where, v);
     }},
    {"change-signal", "SIGNAL",
     "sent to every worker when a change of the world is coming (a node arrived; the key distrun/change "
     "says so too), so that it can checkpoint first: a name like USR1, or none",
     "none",
     [](Options& o, const std::string& where, const std::string& v) {
       if (v == "none") {
         o.change_signal.reset();
         return;
       }
       std::vector<int> sig = ParseForwardSignals(where, v);
       if (sig.size() != 1) Bad(where, v, "name one signal, e.g. USR1, or none");
       o.change_signal = sig.front();
     }},
    {"recovery", "restart|in-process",
     "what a change of the world (a lost node, a failed worker, an arrival) does to the workers: restart "
     "stops and starts every one; in-process keeps the survivors' processes and hands them the next world "
     "(distrun.torch.recover()), starts a failed worker again alone, and lets spares wait with their imports "
     "done",
     "restart",
     [](Options& o, const std::string& where, const std::string& v) {
       if (v == "restart")
         o.recovery = RecoveryMode::kRestart;
       else if (v == "in-process")
         o.recovery = RecoveryMode::kInProcess;
       else
         Bad(where, v, "use restart or in-process");
     }},
    {"recovery-timeout", "SECONDS",
     "with --recovery in-process: how long a worker has, after it was told of a change, to reach the next "
     "world (distrun.torch.recover()) before it is killed and started again (default: 3 x "
     "--heartbeat-timeout)",
     nullptr,
     [](Options& o, const std::string& where, const std::string& v) {
       o.recovery_timeout_s = ParseSeconds(where, v);
       if (*o.recovery_timeout_s < 0.1) Bad(where, v, "use at least 0.1 seconds");
     }},
    {"join", "HOST:PORT[,HOST:PORT...]",
     "arrive at a running elastic job whose coordinator listens on HOST:PORT, as a new node (a repaired or "
     "replacement host); several addresses (node 0's, then its standbys' --standby-port) are tried in turn, "
     "so that an arrival finds the job after node 0's loss; needs the job's --nnodes, --run-id and token",
     nullptr,
     [](Options& o, const std::string& where, const std::string& v) {
       size_t begin = 0;
       while (begin <= v.size()) {
         size_t end = std::min(v.find(',', begin), v.size());
         HostPort hp = ParseHostPort(where, v.substr(begin, end - begin));
         if (hp.host.empty() || !hp.port) Bad(where, v, "give the job's coordinator as HOST:PORT");
         begin = end + 1;
       }
       o.join = v;
     }},
    {"standby-port", "PORT",
     "elastic jobs: the port on which each node but node 0 would serve the job as its standby coordinator "
     "after node 0's loss, for --join arrivals to name (default: one the OS picks)",
     nullptr,
     [](Options& o, const std::string& where, const std::string& v) { o.standby_port = ParsePort(where, v); }},
    {"node-check", "CMD",
     "a health check (sh -c CMD) run before this node joins the job and before every later epoch; a non-zero "
     "exit makes the node leave the job (with --nnodes the job goes on without it)",
     nullptr,
     [](Options& o, const std::string& where, const std::string& v) {
       if (v.empty()) Bad(where, v, "give a command, e.g. nvidia-smi -L");
       o.node_check = v;
     }},
    {"node-check-timeout", "SECONDS", "a --node-check still running after this long has failed", "60",
     [](Options& o, const std::string& where, const std::string& v) {
       o.node_check_timeout_s = ParseSeconds(where, v);
       if (o.node_check_timeout_s < 0.1) Bad(where, v, "use at least 0.1 seconds");
     }},
    // A job started over ssh from this machine (launcher/remote/ssh_launch.h).
    {"hosts", "HOST[:SLOTS],...",
     "start the job on these hosts over ssh, SLOTS workers on each (without :SLOTS --nproc-per-node decides "
     "there); user@host as ssh takes it; this machine's names need no ssh",
     nullptr,
     [](Options& o, const std::string& where, const std::string& v) { o.hosts = ParseHostList(where, v); }},
    {"hostfile", "FILE",
     "as --hosts, from a file: `host slots=N` lines (Open MPI, DeepSpeed, Horovod), `host:N` (MPICH), a bare "
     "host, user@host, # comments; a host on several lines gets the sum (PBS_NODEFILE's one line a process)",
     nullptr,
     [](Options& o, const std::string& where, const std::string& v) {
       if (v.empty()) Bad(where, v, "name a file of hosts");
       o.hosts = ReadHostfile(where, v);
       o.hostfile = v;
     }},
    {"ssh-args", "ARGS",
     "more options for every ssh, as one string (\"-p 2222 -i ~/.ssh/lab\"); ~/.ssh/config is read as ever",
     nullptr,
     [](Options& o, const std::string& where, const std::string& v) { o.ssh_args = ShellWords(where, v); }},
    {"ssh-concurrency", "N",
     "ssh connections being opened at once (each stays open for the job): sshd's MaxStartups drops "
     "unauthenticated connections beyond 10 at random, which a jump host in ~/.ssh/config would see",
     "10",
     [](Options& o, const std::string& where, const std::string& v) {
       o.ssh_concurrency = PositiveInt(where, v);
     }},
    {"ssh-connect-timeout", "SECONDS",
     "a host whose ssh has not connected, logged in and started distrun within this long has failed the "
     "check before the launch",
     "10",
     [](Options& o, const std::string& where, const std::string& v) {
       o.ssh_connect_timeout_s = ParseSeconds(where, v);
       if (o.ssh_connect_timeout_s < 1) Bad(where, v, "use at least 1 second");
     }},
    {"remote-distrun", "PATH",
     "the distrun each host runs (default: this distrun's absolute path, the same on every host)", nullptr,
     [](Options& o, const std::string& where, const std::string& v) {
       if (v.empty()) Bad(where, v, "name distrun's path on the hosts");
       o.remote_distrun = v;
     }},
    {"forward-env", "NAME[=VALUE]",
     "a variable every host's workers get besides the default set (this machine's value, or VALUE; PREFIX* "
     "for every variable set here that starts with PREFIX); "
     "repeatable as -x NAME (mpirun's), comma-separated in the variable and config key",
     nullptr,
     [](Options& o, const std::string& where, const std::string& v) {
       // Flags (-x, --forward-env) arrive as one value of lines (command_line.cc), so that a VALUE may hold
       // commas; the variable and the config key are comma-separated lists.
       const bool flags = where.starts_with("--");
       for (const std::string& item : Split(v, flags ? '\n' : ',')) {
         const std::string name = item.substr(0, item.find('='));
         if (name.empty() || name == "*" || name.find_first_of(" \t") != std::string::npos)
           Bad(where, item, "use NAME, NAME=VALUE or PREFIX*");
         o.forward_env.push_back(item);
       }
     }},
    {"format", "text|json|yaml|env", "output format of --detect and --dry-run", "text",
     [](Options& o, const std::string& where, const std::string& v) {
       if (v == "text")
         o.format = DetectFormat::kText;
       else if (v == "json")
         o.format = DetectFormat::kJson;
       else if (v == "yaml")
         o.format = DetectFormat::kYaml;
       else if (v == "env")
         o.format = DetectFormat::kEnv;
       else
         Bad(where, v, "use text, json, yaml or env");
     }},
    {"log-level", "LEVEL", "distrun's own messages: trace, debug, info, warn, error, off", "info",
     [](Options& o, const std::string& where, const std::string& v) {
       static const char* kLevels[] = {"trace", "debug", "info", "warn", "error", "off"};
       if (std::find(std::begin(kLevels), std::end(kLevels), v) == std::end(kLevels)) {
         Bad(where, v, "use trace, debug, info, warn, error or off");
       }
       o.log_level = v;
     }},
    {"grace-period", "SECONDS",
     "how long workers get between SIGTERM and SIGKILL when the job stops (fractions allowed: 0.5)", "30",
     [](Options& o, const std::string& where, const std::string& v) {
       o.grace_period_s = ParseSeconds(where, v);
     }},
    {"timeout", "SECONDS", "stop the job after this much wall time and exit with code 124 (90s, 2h; 0: none)",
     "0",
     [](Options& o, const std::string& where, const std::string& v) {
       o.timeout_s = ParseSeconds(where, v);
     }},
    {"forward-signals", "LIST",
     "signals passed on to every worker without stopping the job: names like USR1,USR2, or none", "USR1,USR2",
     [](Options& o, const std::string& where, const std::string& v) {
       o.forward_signals = ParseForwardSignals(where, v);
     }},
    {"tag-output", "auto|on|off",
     "prefix each line of worker output (auto: when the job has several workers)", "auto",
     [](Options& o, const std::string& where, const std::string& v) {
       if (v == "auto")
         o.tag_output = TagOutput::kAuto;
       else if (v == "on")
         o.tag_output = TagOutput::kOn;
       else if (v == "off")
         o.tag_output = TagOutput::kOff;
       else
         Bad(where, v, "use auto, on or off");
     }},
    {"tag-template", "TEMPLATE", "the prefix of each output line, with {rank}, {local_rank} and {host}",
     "[{rank}] ",
     [](Options& o, const std::string& where, const std::string& v) {
       ValidateTagTemplate(where, v);
       o.tag_template = v;
     }},
    {"log-dir", "DIR", "also write each rank's output to DIR/rank-N.out and DIR/rank-N.err (all ranks)",
     nullptr,
     [](Options& o, const std::string& where, const std::string& v) {
       if (v.empty()) Bad(where, v, "name a directory");
       o.log_dir = v;
     }},
    {"ranks-filter", "LIST", "show only these ranks' output on the console: 0,3 or 0-3,8 (files keep all)",
     nullptr,
     [](Options& o, const std::string& where, const std::string& v) {
       o.ranks_filter = ParseRankList(where, v);
     }},
    {"local-ranks-filter", "LIST", "show only these local ranks' output on the console (torchrun's), as --ranks-filter",
     nullptr,
     [](Options& o, const std::string& where, const std::string& v) {
       o.local_ranks_filter = ParseRankList(where, v);
     }},
    {"redirects", "0|1|2|3|LR:V,...",
     "these streams (1 stdout, 2 stderr, 3 both; per local rank: 0:3,1:2) go to --log-dir's files only, not "
     "to the console (torchrun's -r; without --log-dir, to a new directory under TMPDIR)",
     nullptr,
     [](Options& o, const std::string& where, const std::string& v) {
       o.redirects = ParseStreamChoice(where, v);
     }},
    {"tee", "0|1|2|3|LR:V,...",
     "these streams go to --log-dir's files as well as the console (torchrun's -t); with --redirects or "
     "--tee, the files hold only the streams they name (with neither, --log-dir holds every stream)",
     nullptr,
     [](Options& o, const std::string& where, const std::string& v) {
       o.tee = ParseStreamChoice(where, v);
     }},
    {"role", "NAME", "the workers' ROLE_NAME (torchrun's --role)", "default",
     [](Options& o, const std::string& where, const std::string& v) {
       if (v.empty()) Bad(where, v, "name the role");
       o.role = v;
     }},
    {"token-file", "FILE",
     "read the job token from FILE (when DISTRUN_TOKEN is not set); every node of the job must use the same",
     nullptr,
     [](Options& o, const std::string& where, const std::string& v) {
       if (v.empty()) Bad(where, v, "name a file that holds the job token");
       o.token_file = v;
     }},
    {"heartbeat-timeout", "SECONDS",
     "a node silent for this long (frozen, partitioned) is lost and the job ends (with --nnodes it goes on "
     "without it; there the default is 3)",
     "10",
     [](Options& o, const std::string& where, const std::string& v) {
       o.heartbeat_timeout_s = ParseSeconds(where, v);
       if (o.heartbeat_timeout_s < 0.1) Bad(where, v, "use at least 0.1 seconds");
     }},
    {"hang-timeout", "auto|off|SECONDS",
     "the job is hung when its least advanced rank reported no new step (distrun progress) for this long: "
     "the stacks of every worker are shown and the job stops with exit code 125, or restarts (auto: 5 "
     "times the slowest recent step, at least 60 s; 10 min until learned)",
     "auto",
     [](Options& o, const std::string& where, const std::string& v) {
       if (v == "auto") {
         o.hang_timeout_s.reset();
       } else if (v == "off") {
         o.hang_timeout_s = 0;
       } else {
         constexpr const char* kUse = "use auto, off, or at least 1 second (90, 2m)";
         try {
           o.hang_timeout_s = ParseSeconds(where, v);
         } catch (const UsageError&) {
           Bad(where, v, kUse);
         }
         if (*o.hang_timeout_s < 1) Bad(where, v, kUse);
       }
     }},
    {"stall-warning", "SECONDS|off",
     "for workers that report no progress: warn when none has used CPU time or written output for this "
     "long (a warning only)",
     "300",
     [](Options& o, const std::string& where, const std::string& v) {
       constexpr const char* kUse = "use off, or at least 1 second (300, 10m)";
       if (v == "off") {
         o.stall_warning_s = 0;
         return;
       }
       try {
         o.stall_warning_s = ParseSeconds(where, v);
       } catch (const UsageError&) {
         Bad(where, v, kUse);
       }
       if (o.stall_warning_s < 1) Bad(where, v, kUse);
     }},
    {"straggler-threshold", "SCORE",
     "a rank is a straggler when its score (the fastest rank's median time in a section / its own, from "
     "distrun.section) stays below SCORE for 3 windows of 5 s (default 0.75)",
     nullptr,
     [](Options& o, const std::string& where, const std::string& v) {
       char* end = nullptr;
       const double score = std::strtod(v.c_str(), &end);
       if (v.empty() || *end != '\0' || !(score > 0 && score < 1)) {
         Bad(where, v, "use a score between 0 and 1, such as 0.75");
       }
       o.straggler_threshold = score;
     }},
    {"metrics-address", "HOST:PORT",
     "node 0 serves the job there over HTTP: Prometheus metrics (/metrics), a live page (/) and /job.json; "
     "port 0: one the OS picks (off by default)",
     nullptr,
     [](Options& o, const std::string& where, const std::string& v) {
       HostPort hp;
       try {
         hp = ParseHostPort(where, v, PortZero::kAllowed);
       } catch (const std::exception&) {
         Bad(where, v, "use HOST:PORT, such as 127.0.0.1:9400 or 0.0.0.0:9400");
       }
       if (hp.host.empty() || !hp.port) Bad(where, v, "use HOST:PORT, such as 127.0.0.1:9400 or 0.0.0.0:9400");
       o.metrics_address = hp;
     }},
    {"metrics-token-file", "FILE",
     "every request to --metrics-address must carry `Authorization: Bearer TOKEN`, TOKEN being FILE's content",
     nullptr,
     [](Options& o, const std::string& where, const std::string& v) {
       if (v.empty()) Bad(where, v, "name a file that holds the token");
       o.metrics_token_file = v;
     }},
    {"initialization-timeout", "SECONDS", "how long rendezvous waits for every node to join", "300",
     [](Options& o, const std::string& where, const std::string& v) {
       o.initialization_timeout_s = ParseSeconds(where, v);
       if (o.initialization_timeout_s < 0.1) Bad(where, v, "use at least 0.1 seconds");
     }},
    {"munge", "auto|off|require",
     "agents prove their user to node 0 with munge: auto (multi-host jobs without a job token, where munged "
     "answers), off, require (fail where munge does not work)",
     "auto",
     [](Options& o, const std::string& where, const std::string& v) {
       if (v == "auto")
         o.munge = MungeUse::kAuto;
       else if (v == "off")
         o.munge = MungeUse::kOff;
       else if (v == "require")
         o.munge = MungeUse::kRequire;
       else
         Bad(where, v, "use auto, off or require");
     }},
    {"munge-socket", "PATH",
     "munged's socket (default: AuthInfo=socket= of Slurm's configuration, else libmunge's "
     "/run/munge/munge.socket.2)",
     nullptr,
     [](Options& o, const std::string& where, const std::string& v) {
       if (v.empty()) Bad(where, v, "give the path of munged's socket");
       o.munge_socket = v;
     }},
    {"coordinator-bind-address", "ADDRESS",
     "where node 0's runtime service listens (default: the coordinator host; loopback in local mode)",
     nullptr,
     [](Options& o, const std::string& where, const std::string& v) {
       HostPort hp = ParseHostPort(where, v);
       if (hp.port) Bad(where, v, "give an address without a port; the port is --coordinator-port");
       o.coordinator_bind_address = hp.host;
     }},
    {"cpu-bind", "none|gpu|numa",
     "pin each worker to CPUs: gpu (those local to its GPUs), numa (its NUMA node), none", "none",
     [](Options& o, const std::string& where, const std::string& v) {
       if (v == "none")
         o.cpu_bind = CpuBind::kNone;
       else if (v == "gpu")
         o.cpu_bind = CpuBind::kGpu;
       else if (v == "numa")
         o.cpu_bind = CpuBind::kNuma;
       else
         Bad(where, v, "use none, gpu or numa");
     }},
};

}  // namespace

const char* OptionSourceName(OptionSource source) {
  switch (source) {
    case OptionSource::kDefault:
      return "default";
    case OptionSource::kConfig:
      return "config";
    case OptionSource::kEnvironment:
      return "environment";
    case OptionSource::kFlag:
      return "flag";
  }
  return "default";
}

const std::vector<OptionSpec>& OptionTable() { return kTable; }

std::string EnvNameFor(const char* option_name) {
  std::string out = "DISTRUN_";
  for (const char* c = option_name; *c; ++c) {
    out += *c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(*c)));
  }
  return out;
}

std::string ConfigKeyFor(const char* option_name) {
  std::string out = option_name;
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

Options ResolveOptions(const RawValues& flags,
                       const std::map<std::string, std::string, std::less<>>& env_vars,
                       const RawValues& config, const RawValues& defaults) {
  Options options;
  // torchrun's PET_* variables (what Kubeflow's PyTorchJob sets): beneath distrun's own variables.
  const TorchrunMeaning pet = TranslateTorchrun(TorchrunVariables(env_vars));
  RawValues implied = defaults;
  implied.insert(pet.defaults.begin(), pet.defaults.end());
  options.script_form = pet.form;
  for (const OptionSpec& spec : kTable) {
    std::optional<RawValue> chosen;
    OptionSource source = OptionSource::kDefault;
    std::string env_name = EnvNameFor(spec.name);
    if (auto it = flags.find(spec.name); it != flags.end()) {
      chosen = it->second;
      source = OptionSource::kFlag;
    } else if (auto e = env_vars.find(env_name); e != env_vars.end()) {
      chosen = RawValue{e->second, env_name};
      source = OptionSource::kEnvironment;
    } else if (auto t = pet.options.find(spec.name); t != pet.options.end()) {
      chosen = t->second;
      source = OptionSource::kEnvironment;
    } else if (auto c = config.find(spec.name); c != config.end()) {
      chosen = c->second;
      source = OptionSource::kConfig;
    } else if (auto d = implied.find(spec.name); d != implied.end()) {
      chosen = d->second;
    } else if (spec.default_value != nullptr) {
      chosen = RawValue{spec.default_value, std::string("default of --") + spec.name};
    }
    if (!chosen) continue;
    spec.apply(options, chosen->where, chosen->value);
    options.effective[spec.name] = {chosen->value, source};
  }

  // An elastic job whose ranks come from the coordinator (torchrun's c10d) starts once MIN nodes are there;
  // more arrive as an elastic job's late nodes do.
  if (options.topology.node_rank_auto && options.elastic && !options.topology.num_nodes && !options.nnodes) {
    options.topology.num_nodes = options.elastic->min_nodes;
  }
  if (options.nnodes) {
    if (options.topology.num_nodes && *options.topology.num_nodes != *options.nnodes) {
      throw UsageError("--nnodes " + std::to_string(*options.nnodes) + " and --num-nodes " +
                       std::to_string(*options.topology.num_nodes) + " disagree; give one of them");
    }
    options.topology.num_nodes = options.nnodes;
  }
  if (options.effective.contains("hosts") && options.effective.contains("hostfile")) {
    throw UsageError("--hosts and --hostfile both name the job's hosts; give one of them");
  }
  if (options.join) {
    if (!options.elastic) {
      throw UsageError(
          "--join needs the job's node range: give the same --nnodes MIN:MAX as the job's other "
          "distrun processes");
    }
    if (!options.run_id) {
      throw UsageError(
          "--join needs the job's run id: give the same --run-id as the job's other distrun "
          "processes (a late node cannot guess it)");
    }
    // The first address is the coordinator as detection knows it; the agent tries them all.
    const std::string first = options.join->substr(0, options.join->find(','));
    if (options.topology.coordinator_address && *options.topology.coordinator_address != first) {
      throw UsageError("--join " + *options.join + " and --coordinator-address " +
                       *options.topology.coordinator_address + " disagree; give only --join");
    }
    options.topology.coordinator_address = first;
  }
  if (options.recovery == RecoveryMode::kInProcess && options.elastic &&
      options.elastic_policy == ElasticPolicy::kSpares &&
      options.elastic->max_nodes <= options.elastic->min_nodes) {
    throw UsageError(
        "--recovery in-process with --elastic-policy spares needs room for a spare: --nnodes " +
        std::to_string(options.elastic->min_nodes) + ":" + std::to_string(options.elastic->max_nodes) +
        " has none; give MAX above MIN (e.g. --nnodes " + std::to_string(options.elastic->min_nodes) + ":" +
        std::to_string(options.elastic->min_nodes + 1) + ")");
  }
  if (options.elastic) {
    options.elastic->policy = options.elastic_policy;
    options.elastic->scale_up = options.scale_up;
    // An elastic job goes on without a silent node, so noticing it sooner is the point; 3 s keeps a frozen
    // or cut-off node's loss within 5 s of the next epoch (bench/RESULTS.md says what it costs at scale).
    Options::Effective& timeout = options.effective["heartbeat-timeout"];
    if (timeout.source == OptionSource::kDefault) {
      options.heartbeat_timeout_s = kElasticHeartbeatTimeoutS;
      timeout.value = "3";
    }
  }
  if (auto it = env_vars.find("JAX_COORDINATOR_ADDRESS"); it != env_vars.end() && !it->second.empty()) {
    HostPort hp = ParseHostPort("JAX_COORDINATOR_ADDRESS", it->second);
    options.jax_coordinator_host = hp.host;
    if (hp.port) options.jax_coordinator_port = hp.port;
    // Without an explicit runtime address, distrun's service runs on the host JAX users named.
    if (!options.topology.coordinator_address)
      options.topology.coordinator_address =
          hp.host.find(':') != std::string::npos ? "[" + hp.host + "]" : hp.host;
  }
  if (auto it = env_vars.find("JAX_COORDINATOR_PORT"); it != env_vars.end() && !it->second.empty()) {
    options.jax_coordinator_port = ParsePort("JAX_COORDINATOR_PORT", it->second);
  }
  return options;
}

}  // namespace distrun
