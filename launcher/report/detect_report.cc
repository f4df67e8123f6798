#include "launcher/report/detect_report.h"

#include <algorithm>
#include <cctype>

#include "detect/parse.h"
#include "launcher/plan/cpu_binding.h"
#include "launcher/process/shell_quote.h"

namespace distrun {
namespace {

ReportValue Strings(const std::vector<std::string>& items) {
  ReportList l;
  for (const auto& s : items) l.emplace_back(s);
  return l;
}

ReportValue Ints(const std::vector<int>& items) {
  ReportList l;
  for (int i : items) l.emplace_back(i);
  return l;
}

ReportValue WorkerReport(const WorkerPlan& w) {
  ReportMap env;
  for (const auto& [name, value] : w.env) env.emplace_back(name, value);
  return ReportMap{{"process_id", w.process_id},
                   {"local_rank", w.local_rank},
                   {"local_device_ids", Ints(w.local_device_ids)},
                   {"device_tokens", Strings(w.device_tokens)},
                   {"cpus", Ints(w.cpus)},
                   {"env", std::move(env)},
                   {"unset", Strings(w.unset)}};
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ",") + item;
  return out;
}

ReportValue OrNull(const std::string& s) { return s.empty() ? ReportValue(nullptr) : ReportValue(s); }

// This node's devices, each with the GPU it names: index is the device's position among them (the
// ordinal CUDA gives it in a process that sees all of them).
ReportValue GpusReport(const std::vector<ResolvedDevice>& gpus) {
  ReportList l;
  for (size_t i = 0; i < gpus.size(); ++i) {
    const ResolvedDevice& d = gpus[i];
    l.emplace_back(ReportMap{{"index", static_cast<int>(i)},
                             {"token", d.token},
                             {"uuid", d.gpu ? OrNull(d.gpu->uuid) : ReportValue(nullptr)},
                             {"pci_bus_id", d.gpu ? OrNull(d.gpu->pci_bus_id) : ReportValue(nullptr)},
                             {"name", d.gpu ? OrNull(d.gpu->name) : ReportValue(nullptr)},
                             {"problem", OrNull(d.problem)}});
  }
  return l;
}

ReportValue OptionsReport(const Options& o) {
  ReportMap m;
  for (const auto& [name, eff] : o.effective) {
    m.emplace_back(name, ReportMap{{"value", eff.value}, {"source", OptionSourceName(eff.source)}});
  }
  return m;
}

std::string Upper(std::string s) {
  for (char& c : s) c = c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// Which of the job's nodes start as hot spares (--elastic-policy spares): those past the first MIN.
std::string SpareNodes(const ElasticRange& e, int units) {
  if (e.policy != ElasticPolicy::kSpares || units <= e.min_nodes) return {};
  return e.min_nodes == units - 1 ? std::to_string(e.min_nodes)
                                  : std::to_string(e.min_nodes) + "-" + std::to_string(units - 1);
}

std::string TorchStoreName(const Options& options) {
  return options.torch_store == TorchStoreHost::kDistrun ? "distrun" : "rank0";
}

std::string TorchStoreText(const Options& options) {
  return options.torch_store == TorchStoreHost::kDistrun
             ? "distrun, on the coordinator's port (MASTER_ADDR:MASTER_PORT; a fresh keyspace each epoch)"
             : "rank 0's worker binds MASTER_PORT (--torch-store rank0)";
}

std::string TextReport(const Plan& plan, const Options& options, const std::string& protection) {
  const Topology& t = plan.topology;
  const JobAssignment& a = plan.assignment;
  const bool per_task = plan.layout.mode == LaunchMode::kPerTask;
  std::string hosts;
  for (const auto& h : t.hosts) hosts += (hosts.empty() ? "" : " ") + h;
  std::string out;
  auto line = [&out](const std::string& label, const std::string& value) {
    out += label + std::string(label.size() < 18 ? 18 - label.size() : 1, ' ') + value + "\n";
  };
  line("method", t.method + " (" + LaunchModeName(plan.layout.mode) + ")");
  line("coordinator", a.coordinator_address.empty() ? "unknown (see the warning)" : a.coordinator_address);
  if (!protection.empty()) line("protection", protection);
  if (options.export_torch) line("torch store", TorchStoreText(options));
  line("processes", std::to_string(a.num_processes) + " in the job, " +
                        std::to_string(plan.layout.local_workers) + " started here");
  line("nodes", std::to_string(a.num_nodes) + ", " +
                    (t.node_rank_auto ? "this node's rank: 0 if it serves " + a.coordinator_address +
                                            ", else the one it gives when this node joins (--node-rank auto)"
                                      : "this is node " + std::to_string(a.node_rank)));
  if (const std::optional<ElasticRange>& e = options.elastic) {
    std::string spares = options.join ? "" : SpareNodes(*e, plan.layout.units);
    line("elastic",
         std::to_string(e->min_nodes) + ".." + std::to_string(e->max_nodes) + " nodes, policy " +
             ElasticPolicyName(e->policy) +
             (e->policy == ElasticPolicy::kResize ? std::string(", scale-up ") + ScaleUpName(e->scale_up)
                                                  : std::string()) +
             (spares.empty() ? "" : "; nodes " + spares + " start as spares"));
    if (options.join)
      line("joins", "the running job at " + *options.join + " as a new node (node rank after admission)");
  }
  if (per_task) {
    line("process id", std::to_string(t.task_id) + " (local rank " + std::to_string(t.local_task) + " of " +
                           std::to_string(t.local_tasks) + ")");
  }
  line("hosts", hosts.empty() ? "(known after rendezvous)" : hosts);
  std::string devices;
  for (const auto& d : plan.layout.node_devices) devices += (devices.empty() ? "" : ",") + d;
  line("devices", devices.empty() ? "none (" +
                                        (plan.layout.device_source == "none" ? std::string("no GPU found")
                                                                             : plan.layout.device_source) +
                                        ")"
                                  : devices + " (" + plan.layout.device_source + ")");
  if (!plan.layout.node_gpus.empty()) {
    out += "gpus (" + plan.layout.gpu_source + ")\n";
    for (size_t i = 0; i < plan.layout.node_gpus.size(); ++i) {
      const ResolvedDevice& d = plan.layout.node_gpus[i];
      std::string about = d.problem.empty() ? "" : "  (" + d.problem + ")";
      if (d.gpu) {
        about = "  " + (d.gpu->uuid.empty() ? "-" : d.gpu->uuid) + "  " +
                (d.gpu->pci_bus_id.empty() ? "-" : d.gpu->pci_bus_id) +
                (d.gpu->name.empty() ? "" : "  " + d.gpu->name) + about;
      }
      // The token only where it says more than the index (a UUID, a Slurm id).
      const std::string index = std::to_string(i);
      out += "  " + index + (d.token == index ? "" : "  " + d.token + (d.gpu ? " =" : "")) + about + "\n";
    }
  }
  if (t.slice_index) line("slice", std::to_string(*t.slice_index));
  out += "workers\n";
  for (const WorkerPlan& w : plan.workers) {
    std::string devs;
    for (const auto& d : w.device_tokens) devs += (devs.empty() ? "" : ",") + d;
    out += "  rank " + std::to_string(w.process_id) + "  local rank " + std::to_string(w.local_rank) +
           "  devices " + (devs.empty() ? "-" : devs) +
           (w.cpus.empty() ? "" : "  cpus " + FormatCpuList(w.cpus)) + "\n";
    for (const auto& [name, value] : w.env) out += "    " + name + "=" + value + "\n";
    std::string unset;
    for (const std::string& name : w.unset) unset += " " + name;
    if (!unset.empty()) out += "    unset" + unset + "\n";
  }
  return out;
}

void FlattenEnv(const std::string& prefix, const ReportValue& v, std::string& out) {
  if (auto* m = std::get_if<ReportMap>(&v.value)) {
    for (const auto& [key, child] : *m) FlattenEnv(prefix + "_" + Upper(key), child, out);
  } else if (auto* records = std::get_if<ReportList>(&v.value);
             records != nullptr && std::any_of(records->begin(), records->end(), [](const ReportValue& item) {
               return std::holds_alternative<ReportMap>(item.value);
             })) {
    // A list of records (the GPUs): one group of variables per item, numbered.
    out += "export " + prefix + "_COUNT=" + std::to_string(records->size()) + "\n";
    for (size_t i = 0; i < records->size(); ++i)
      FlattenEnv(prefix + "_" + std::to_string(i), (*records)[i], out);
  } else if (auto* l = std::get_if<ReportList>(&v.value)) {
    std::string joined;
    for (const auto& item : *l) {
      if (auto* s = std::get_if<std::string>(&item.value)) joined += (joined.empty() ? "" : ",") + *s;
      if (auto* i = std::get_if<long long>(&item.value))
        joined += (joined.empty() ? "" : ",") + std::to_string(*i);
    }
    out += "export " + prefix + "=" + ShellQuote(joined) + "\n";
  } else if (auto* s = std::get_if<std::string>(&v.value)) {
    out += "export " + prefix + "=" + ShellQuote(*s) + "\n";
  } else if (auto* i = std::get_if<long long>(&v.value)) {
    out += "export " + prefix + "=" + std::to_string(*i) + "\n";
  } else if (auto* b = std::get_if<bool>(&v.value)) {
    out += "export " + prefix + "=" + (*b ? "1" : "0") + "\n";
  } else {
    out += "unset " + prefix + "\n";
  }
}

// `eval "$(distrun --detect --format env)"`: the job's shape as DISTRUN_DETECT_* and, with one worker (the
// per-task case), that worker's variables under their own names so the shell becomes the worker;
// with several workers each worker's variables are prefixed DISTRUN_WORKER_<i>_.
std::string EnvReport(const Plan& plan, const ReportValue& report) {
  std::string out;
  for (std::string w : plan.warnings) {
    // Warnings quote values from the environment: a line break in one must not end the comment.
    std::replace_if(
        w.begin(), w.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
    out += "# warning: " + w + "\n";
  }
  for (const auto& [key, child] : std::get<ReportMap>(report.value)) {
    if (key == "workers" || key == "warnings" || key == "options") continue;
    FlattenEnv("DISTRUN_DETECT_" + Upper(key), child, out);
  }
  for (size_t i = 0; i < plan.workers.size(); ++i) {
    std::string prefix = plan.workers.size() == 1 ? "" : "DISTRUN_WORKER_" + std::to_string(i) + "_";
    for (const auto& [name, value] : plan.workers[i].env)
      out += "export " + prefix + name + "=" + ShellQuote(value) + "\n";
    if (plan.workers[i].unset.empty()) continue;
    if (prefix.empty()) {
      for (const std::string& name : plan.workers[i].unset) out += "unset " + name + "\n";
    } else {
      out += "export " + prefix + "UNSET=" + ShellQuote(Join(plan.workers[i].unset)) + "\n";
    }
  }
  return out;
}

}  // namespace

ReportValue BuildDetectReport(const Plan& plan, const Options& options, const std::string& protection) {
  const Topology& t = plan.topology;
  const JobAssignment& a = plan.assignment;
  const bool per_task = plan.layout.mode == LaunchMode::kPerTask;
  ReportList workers;
  for (const WorkerPlan& w : plan.workers) workers.push_back(WorkerReport(w));
  ReportMap m = {
      {"method", t.method},
      {"launch_mode", LaunchModeName(plan.layout.mode)},
      {"coordinator_address", OrNull(a.coordinator_address)},
      {"num_processes", a.num_processes},
      {"num_nodes", a.num_nodes},
      {"node_rank",
       t.node_rank_auto ? ReportValue(nullptr) : ReportValue(a.node_rank)},  // auto: not known yet
      {"hosts", Strings(t.hosts)},
      {"process_id", per_task ? ReportValue(t.task_id) : ReportValue(nullptr)},
      {"local_rank", per_task ? ReportValue(t.local_task) : ReportValue(nullptr)},
      {"local_world_size", per_task ? t.local_tasks : plan.layout.local_workers},
      {"local_devices", Strings(plan.layout.node_devices)},
      {"device_source", plan.layout.device_source},
      {"gpus", GpusReport(plan.layout.node_gpus)},
      {"gpu_source", plan.layout.gpu_source},
      {"cpu_bind", CpuBindName(options.cpu_bind)},
      {"protection", protection.empty() ? ReportValue(nullptr) : ReportValue(protection)},
      {"torch_store", options.export_torch ? ReportValue(TorchStoreName(options)) : ReportValue(nullptr)},
      {"run_id", a.run_id},
      {"elastic", options.elastic
                      ? ReportValue(ReportMap{
                            {"min_nodes", options.elastic->min_nodes},
                            {"max_nodes", options.elastic->max_nodes},
                            {"policy", ElasticPolicyName(options.elastic->policy)},
                            {"scale_up", ScaleUpName(options.elastic->scale_up)},
                            {"spare_nodes",
                             options.join ? std::string() : SpareNodes(*options.elastic, plan.layout.units)},
                            {"join", options.join ? ReportValue(*options.join) : ReportValue(nullptr)},
                        })
                      : ReportValue(nullptr)},
      {"slice_index", t.slice_index ? ReportValue(*t.slice_index) : ReportValue(nullptr)},
      {"workers", std::move(workers)},
      {"warnings", Strings(plan.warnings)},
      {"options", OptionsReport(options)},
  };
  return m;
}

std::string RenderDetectReport(const Plan& plan, const Options& options, const std::string& protection) {
  switch (options.format) {
    case DetectFormat::kJson:
      return ToJson(BuildDetectReport(plan, options, protection));
    case DetectFormat::kYaml:
      return ToYaml(BuildDetectReport(plan, options, protection));
    case DetectFormat::kEnv:
      return EnvReport(plan, BuildDetectReport(plan, options, protection));
    case DetectFormat::kText:
      return TextReport(plan, options, protection);
  }
  return TextReport(plan, options, protection);
}

}  // namespace distrun
