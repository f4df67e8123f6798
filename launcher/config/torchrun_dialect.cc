#include "launcher/config/torchrun_dialect.h"

#include <algorithm>
#include <cctype>

#include "detect/errors.h"
#include "detect/parse.h"

namespace distrun {
namespace {

struct Spec {
  const char* name;
  bool takes_value;
};

// torchrun's options that distrun's own table does not have (torch/distributed/run.py, get_args_parser).
constexpr Spec kTorchrunOnly[] = {
    {"master-addr", true},
    {"master-port", true},
    {"rdzv-backend", true},
    {"rdzv-endpoint", true},
    {"rdzv-id", true},
    {"rdzv-conf", true},
    {"standalone", false},
    {"module", false},
    {"m", false},
    {"no-python", false},
    {"run-path", false},
    {"r", true},
    {"t", true},
    {"local-addr", true},
    {"monitor-interval", true},
    {"start-method", true},
    {"shutdown-timeout", true},
    {"event-log-handler", true},
    {"logs-specs", true},
    {"numa-binding", true},
    {"signals-to-handle", true},
    {"virtual-local-rank", false},
    {"duplicate-stdout-filters", true},
    {"duplicate-stderr-filters", true},
};

// torchrun's names for distrun's own options (PET_ variables use them too).
constexpr const char* kShared[] = {"nnodes",  "nproc-per-node", "node-rank", "max-restarts",
                                   "log-dir", "redirects",      "tee",       "local-ranks-filter",
                                   "role"};

constexpr int kStaticPort = 29500;  // torchrun's --master-port default
constexpr int kC10dPort = 29400;    // torchrun's port of a c10d --rdzv-endpoint without one

bool Truthy(const std::string& value) {
  std::string v = value;
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  return v == "1" || v == "true" || v == "yes" || v == "on";
}

// HOST[:PORT] with `port` where none is given; IPv6 hosts keep their brackets.
std::string WithPort(const std::string& where, const std::string& value, int port) {
  HostPort hp = ParseHostPort(where, value);
  const std::string host = hp.host.find(':') != std::string::npos ? "[" + hp.host + "]" : hp.host;
  return host + ":" + std::to_string(hp.port ? *hp.port : port);
}

struct Given {
  const TorchrunOption* option = nullptr;
  const std::string& value() const { return option->value; }
  const std::string& where() const { return option->where; }
  explicit operator bool() const { return option != nullptr; }
};

}  // namespace

std::optional<bool> TorchrunOptionTakesValue(std::string_view name) {
  for (const Spec& s : kTorchrunOnly) {
    if (name == s.name) return s.takes_value;
  }
  return std::nullopt;
}

std::vector<std::string> TorchrunOptionNames() {
  std::vector<std::string> names;
  for (const Spec& s : kTorchrunOnly) {
    if (std::string_view(s.name).size() > 1) names.emplace_back(s.name);
  }
  for (const char* s : kShared) names.emplace_back(s);
  return names;
}

TorchrunMeaning TranslateTorchrun(const std::vector<TorchrunOption>& given) {
  std::map<std::string, Given> last;  // torchrun, like argparse, takes an option's last value
  for (const TorchrunOption& o : given) {
    std::string name = o.name == "m"   ? "module"
                       : o.name == "r" ? "redirects"
                       : o.name == "t" ? "tee"
                                       : o.name;
    last[name] = Given{&o};
  }
  auto get = [&](const char* name) {
    auto it = last.find(name);
    return it == last.end() ? Given{} : it->second;
  };
  TorchrunMeaning out;
  auto set = [&](const char* option, std::string value, const Given& from) {
    out.options[option] = RawValue{std::move(value), from.where()};
  };
  // The shared names arrive here from PET_ variables only: they are distrun's own.
  for (const char* shared : kShared) {
    if (Given g = get(shared)) set(shared, g.value(), g);
  }

  // Where the job meets. torchrun's static rendezvous: --master-addr/--master-port (the store of node 0);
  // c10d: the endpoint (distrun's coordinator there serves the rendezvous and, on its port, the store).
  std::string backend = "static";
  if (Given b = get("rdzv-backend")) {
    backend = b.value();
    if (backend == "etcd" || backend == "etcd-v2") {
      throw UsageError(b.where() + "=" + backend +
                       ": distrun needs no etcd server, node 0's distrun serves the rendezvous; use "
                       "--rdzv-backend c10d --rdzv-endpoint HOST:PORT (HOST: the node that serves it), or "
                       "--master-addr/--master-port with --node-rank");
    }
    if (backend != "static" && backend != "c10d") {
      throw UsageError(b.where() + "='" + backend + "' is not a rendezvous backend; use c10d or static");
    }
  }
  const Given endpoint = get("rdzv-endpoint");
  const Given addr = get("master-addr");
  const Given port = get("master-port");
  if (endpoint && !endpoint.value().empty()) {
    if (addr || port) {
      throw UsageError(endpoint.where() + " and " + (addr ? addr.where() : port.where()) +
                       " both name where the job meets; give one of them");
    }
    set("coordinator-address",
        WithPort(endpoint.where(), endpoint.value(), backend == "c10d" ? kC10dPort : kStaticPort), endpoint);
  } else if (addr || port) {
    const int p = port ? ParsePort(port.where(), port.value()) : kStaticPort;
    const std::string host = addr ? addr.value() : "127.0.0.1";
    set("coordinator-address", WithPort(addr ? addr.where() : port.where(), host, p), addr ? addr : port);
  }
  if (backend == "c10d") {
    // No node ranks: the node that serves the endpoint is node 0, the others get theirs as they come. The
    // job's id is torchrun's default ("none") unless given: a node that comes late must name it.
    out.defaults["node-rank"] = RawValue{"auto", get("rdzv-backend").where()};
    out.defaults["run-id"] = RawValue{"none", get("rdzv-backend").where() + " (torchrun's --rdzv-id)"};
  }
  if (Given id = get("rdzv-id")) set("run-id", id.value(), id);
  if (Given conf = get("rdzv-conf")) {
    for (const std::string& item : Split(conf.value(), ',')) {
      if (Trim(item).empty()) continue;
      size_t eq = item.find('=');
      if (eq == std::string::npos) {
        throw UsageError(conf.where() + "='" + conf.value() +
                         "' is not valid; use KEY=VALUE,... (join_timeout=600)");
      }
      const std::string key(Trim(item.substr(0, eq)));
      const std::string value(Trim(item.substr(eq + 1)));
      // torchrun's rendezvous waits join_timeout for the nodes (timeout, its older name); distrun's, as long
      // as --initialization-timeout. Its other keys tune a rendezvous distrun does not have (last call, keep
      // alive, close): accepted, with no effect.
      if (key == "join_timeout" || key == "timeout") set("initialization-timeout", value, conf);
      // is_host: whether this node serves the rendezvous (node 0), else it takes a rank as it comes.
      if (key == "is_host") out.defaults["node-rank"] = RawValue{Truthy(value) ? "0" : "auto", conf.where()};
    }
  }
  if (Given standalone = get("standalone")) {
    if (out.options.contains("coordinator-address")) {
      throw UsageError(standalone.where() +
                       " is a job of this host alone: it takes no --master-addr, "
                       "--master-port or --rdzv-endpoint");
    }
    // A job of this host alone, whatever a batch system's variables say; its coordinator on a free port.
    set("cluster-detection-method", "local", standalone);
  }
  if (Given s = get("shutdown-timeout")) set("grace-period", s.value(), s);

  // How the command runs.
  const Given module = get("module");
  const Given no_python = get("no-python");
  const bool is_module = static_cast<bool>(module);
  const bool is_program = static_cast<bool>(no_python);
  if (is_module && is_program) {
    throw UsageError(module.where() + " and " + no_python.where() +
                     " exclude each other: a module runs with Python; give one of them");
  }
  if (is_module) out.form = ScriptForm::kModule;
  if (is_program) out.form = ScriptForm::kProgram;

  // What distrun cannot do as torchrun does.
  if (Given g = get("numa-binding")) {
    throw UsageError(g.where() + ": use --cpu-bind numa (each worker on the CPUs of its GPU's NUMA node)");
  }
  if (Given g = get("virtual-local-rank")) {
    throw UsageError(g.where() +
                     ": distrun gives each worker its own GPU as CUDA_VISIBLE_DEVICES and its "
                     "LOCAL_RANK; use --device-binding none to leave CUDA_VISIBLE_DEVICES as it is");
  }
  for (const char* stream : {"duplicate-stdout-filters", "duplicate-stderr-filters"}) {
    if (Given g = get(stream)) {
      throw UsageError(g.where() + ": use --log-dir (every rank's whole output in files) and grep them");
    }
  }
  if (Given g = get("signals-to-handle")) {
    throw UsageError(g.where() +
                     ": distrun stops the job on SIGTERM, SIGINT, SIGHUP and SIGQUIT as torchrun "
                     "does; use --forward-signals for signals the workers should get without a stop "
                     "(SIGUSR1 for Slurm's warning)");
  }
  // Accepted, nothing to do: --local-addr (distrun's nodes reach node 0 alone, at the address the job
  // meets at; torch's workers find each other through the store), --monitor-interval (distrun hears of a
  // worker's end at once), --start-method (function entry points only), --event-log-handler and
  // --logs-specs (torchrun's plug-ins).
  return out;
}

std::vector<TorchrunOption> TorchrunVariables(const std::map<std::string, std::string, std::less<>>& env) {
  std::vector<TorchrunOption> out;
  auto add = [&](const std::string& name) {
    std::string var = "PET_";
    for (char c : name)
      var += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    auto it = env.find(var);
    if (it == env.end()) return;
    const std::optional<bool> takes_value = TorchrunOptionTakesValue(name);
    if (takes_value && !*takes_value && !Truthy(it->second)) return;  // PET_STANDALONE=0: not given
    out.push_back({name, takes_value && !*takes_value ? std::string() : it->second, var});
  };
  for (const std::string& name : TorchrunOptionNames()) add(name);
  return out;
}

}  // namespace distrun
