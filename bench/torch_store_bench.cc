// `distrun-bench torch-store --ranks N[,N...]`: N simulated PyTorch ranks initialise an NCCL process group
// on a TCPStore (torch_clients.h: VALIDATE and PING for 2.2+, ADD "init/", the NCCL unique id SET by rank
// 0 and WAITed for and read by the others, torch 2.x's store-based barrier), first against torch's own
// server, then against distrun's store in both dialects, each server a fresh process of its own. Measured:
// the time from the first connect to the last rank through the barrier, the server's CPU seconds (/proc of
// its pid) and its peak RSS.
//
// Servers:
// - torch: `torch.distributed.TCPStore(host, 0, N, is_master=True, wait_for_workers=False)` in a child
//   Python, --torch-python (default /usr/bin/python3: Debian's python3-torch 1.13; the python3 on PATH has
//   no torch), which serves until its stdin closes. Its clients speak its release's dialect: 1.13's before
//   2.2, VALIDATE and PING from 2.2 on. --torch-libuv 0,1 runs torch 2.x's two servers in turn (use_libuv=
//   False: the TCPStoreMasterDaemon thread that 1.13 has too; True: libuv, the default since 2.4), "-"
//   (the default) the release's default. Not run above --torch-max-ranks (default 10,000); a run longer
//   than --torch-timeout-s (default 300) is stopped and recorded as "> cap".
// - distrun: `distrun-bench coordinator --torch-store 1` (coordinator_process.h): the coordination service
//   and its port as node 0's distrun serves them, with GrpcServerConfig::torch_store on; legacy (1.13) and
//   modern (2.5+, VALIDATE then PING) clients in turn. A run longer than 600 s is stopped.
//
// Flags: --ranks-per-connection K (default 1 up to 16,000 ranks, then enough to stay at or under 16,000
// connections: one process holds at most its descriptor limit, 20,000 here), --threads T (the simulation's
// epoll loops, default 1: the machine has 2 cores and the server needs one), --servers torch,distrun,
// --torch-python PATH, --torch-libuv -|0|1|0,1, --store-threads N (distrun's store loops, default: its
// default for the machine, torch_store_loops.h), --pin N (each server on CPUs 0..N-1 and the simulated
// ranks on the others, as with ranks on other hosts: no server then shares its cores with the load it
// serves; --pin 1 as before: CPU 0 alone).
//
// Output: a table per N and a JSON line at the end with every run.

#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "coordinator_process.h"
#include "flags.h"
#include "proc_stats.h"
#include "torch_clients.h"

namespace distrun::bench {
namespace {

constexpr char kTorchPython[] = "/usr/bin/python3";
// argv[1]: the world size; argv[2]: use_libuv ("0", "1"), or "-" to leave torch's default. Prints "port P
// torch VERSION", then serves until stdin closes.
constexpr char kTorchServerScript[] = R"py(
import datetime, resource, sys
# One descriptor per connection: as many as this process may have.
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
try:
    resource.setrlimit(resource.RLIMIT_NOFILE, (1 << 20, 1 << 20))
except (ValueError, OSError):
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
import torch
import torch.distributed as dist
extra = {} if sys.argv[2] == "-" else {"use_libuv": sys.argv[2] == "1"}
store = dist.TCPStore("127.0.0.1", 0, int(sys.argv[1]), True, timeout=datetime.timedelta(hours=2),
                      wait_for_workers=False, **extra)
print("port", store.port, "torch", torch.__version__, flush=True)
sys.stdin.read()
)py";
constexpr int kDefaultMaxConnections = 16'000;
constexpr double kDistrunTimeoutS = 600;

// torch's TCPStore server in a Python child of its own.
class TorchServerProcess {
 public:
  TorchServerProcess(const std::string& python, int world_size, const std::string& libuv) {
    const PipedChild child =
        SpawnPiped({python, "-c", kTorchServerScript, std::to_string(world_size), libuv});
    pid_ = child.pid;
    to_child_ = child.to_child;
    from_child_ = child.from_child;
    // Importing torch takes a few seconds.
    const std::string line = ReadLine(from_child_, 120);
    std::istringstream words(line);
    std::string port_word, port, torch_word;
    words >> port_word >> port >> torch_word >> version_;
    if (port_word != "port" || torch_word != "torch") {
      Stop();
      throw std::runtime_error("torch's TCPStore server did not start (said '" + line + "')");
    }
    address_ = "127.0.0.1:" + port;
  }
  ~TorchServerProcess() { Stop(); }
  TorchServerProcess(const TorchServerProcess&) = delete;
  TorchServerProcess& operator=(const TorchServerProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& address() const { return address_; }
  const std::string& version() const { return version_; }

  // Closes the child's stdin, which ends it; SIGKILL when it has not ended 10 s later (a daemon thread
  // still busy with a run that was cut short).
  void Stop() {
    if (to_child_ >= 0) ::close(std::exchange(to_child_, -1));
    if (from_child_ >= 0) ::close(std::exchange(from_child_, -1));
    if (pid_ <= 0) return;
    const double deadline = MonotonicSeconds() + 10;
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (MonotonicSeconds() > deadline) {
        ::kill(pid_, SIGKILL);  // only our own child, by its pid
        ::waitpid(pid_, &status, 0);
        break;
      }
      ::usleep(10'000);
    }
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
  std::string address_;
  std::string version_;
};

struct Config {
  std::vector<int> ranks;
  int per_connection = 0;  // 0: the default for each N
  int threads = 1;
  double torch_timeout_s = 300;
  int torch_max_ranks = 10'000;
  bool torch = true;
  bool distrun = true;
  int pin = 0;  // > 0: the servers on CPUs 0..pin-1, the ranks on the others
  std::string torch_python = kTorchPython;
  std::vector<std::string> torch_libuv = {"-"};  // use_libuv per torch run: "0", "1", "-" (torch's default)
  int store_threads = 0;                         // distrun's store loops; 0: its default for this machine
};

// --pin: the calling thread (and what it spawns or starts later) on `cpus`.
void PinTo(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  if (::sched_setaffinity(0, sizeof set, &set) != 0) {
    throw std::runtime_error(std::string("sched_setaffinity: ") + std::strerror(errno));
  }
}

std::vector<int> ServerCpus(const Config& config) {
  std::vector<int> cpus;
  for (int cpu = 0; cpu < config.pin; ++cpu) cpus.push_back(cpu);
  return cpus;
}

std::vector<int> ClientCpus(const Config& config) {
  std::vector<int> cpus;
  for (long cpu = config.pin; cpu < ::sysconf(_SC_NPROCESSORS_ONLN); ++cpu)
    cpus.push_back(static_cast<int>(cpu));
  return cpus;
}

// A server started on its CPUs (--pin): the affinity is inherited across posix_spawn.
template <typename Server, typename... Args>
std::unique_ptr<Server> StartServer(const Config& config, Args&&... args) {
  if (config.pin == 0) return std::make_unique<Server>(std::forward<Args>(args)...);
  PinTo(ServerCpus(config));
  std::unique_ptr<Server> server;
  try {
    server = std::make_unique<Server>(std::forward<Args>(args)...);
  } catch (...) {
    PinTo(ClientCpus(config));
    throw;
  }
  PinTo(ClientCpus(config));
  return server;
}

// One run: a server, a dialect and a number of ranks.
struct Row {
  std::string server;  // "distrun", or "torch", "torch-daemon" (use_libuv=False), "torch-libuv"
  TorchStoreDialect dialect = TorchStoreDialect::kLegacy;
  int ranks = 0;
  int per_connection = 1;
  int connections = 0;
  std::string outcome = "passed";  // or "timeout", "failed: ...", "not run: ..."
  bool ran = false;
  double timeout_s = 0;
  double wall_s = 0;  // to the last rank through the barrier (or to the failure or the timeout)
  double init_s = 0;  // to the last rank's ADD "init/" answered
  double uid_s = 0;   // to the last rank holding the NCCL id
  int passed = 0;
  double server_cpu_s = 0;
  double client_cpu_s = 0;
  double rss_start_mib = 0;
  double rss_peak_mib = 0;
  long long listen_overflows = 0;  // SYNs the server's accept queue dropped (TcpExtListenOverflows)
  std::string tcp_events = {};     // other TcpExt counters that moved during the run, "Name +N ..."
  // distrun's server: malloc's heap (mallinfo2) when every rank is through, connections still open: in use,
  // and taken from the system (in use or free). Where the peak RSS goes.
  double heap_in_use_mib = 0;
  double heap_held_mib = 0;
  // For distrun's rows: each torch run's wall over this row's, in the order of the torch rows.
  struct Ratio {
    std::string server;
    double value = 0;
    bool is_floor = false;  // torch hit its cap: the ratio is at least this
  };
  std::vector<Ratio> ratios = {};
};

bool IsTorch(const Row& row) { return row.server.starts_with("torch"); }

const char* DialectWord(TorchStoreDialect d) { return d == TorchStoreDialect::kLegacy ? "legacy" : "modern"; }

double SelfCpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto tv = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
  };
  return tv(u.ru_utime) + tv(u.ru_stime);
}

// TcpExt counters from /proc/net/netstat (a header line of names, then one of values). ListenOverflows:
// SYNs dropped because an accept queue was full; each costs its client a retransmission 1 s later, or 3 s,
// 7 s... The others say what else the kernel did to the run's connections (SYN cookies, resets).
std::map<std::string, long long> TcpExt() {
  std::map<std::string, long long> counters;
  std::ifstream in("/proc/net/netstat");
  std::string names, values;
  while (std::getline(in, names) && std::getline(in, values)) {
    if (!names.starts_with("TcpExt:")) continue;
    std::istringstream n(names), v(values);
    std::string name, value;
    n >> name;
    v >> value;  // the "TcpExt:" labels
    while (n >> name && v >> value) counters[name] = std::stoll(value);
  }
  return counters;
}

constexpr const char* kTcpEvents[] = {
    "ListenDrops",         "TCPReqQFullDrop", "TCPReqQFullDoCookies", "SyncookiesSent",   "SyncookiesRecv",
    "SyncookiesFailed",    "TCPAbortOnData",  "TCPAbortOnClose",      "TCPAbortOnMemory", "TCPBacklogDrop",
    "TCPTimeWaitOverflow", "TCPSYNChallenge", "TCPChallengeACK",      "TCPAbortFailed",   "EmbryonicRsts"};

double Mib(int64_t kb) { return static_cast<double>(kb) / 1024; }

// The ranks of `row` against `server` (TorchServerProcess or CoordinatorProcess), until they passed or
// `row.timeout_s`. The server is stopped before the ranks' sockets close: the side that closes first keeps
// the connections in TIME_WAIT, and on the server's side they do not lengthen the next run's search for
// ephemeral ports.
template <typename Server>
void Measure(Row& row, Server& server, int threads) {
  ::usleep(200'000);  // let the server settle before its baseline
  row.ran = true;
  row.rss_start_mib = Mib(ReadMemory(server.pid()).rss_kb);
  const double cpu_before = ReadCpuSeconds(server.pid());
  const double self_before = SelfCpuSeconds();
  const std::map<std::string, long long> tcp_before = TcpExt();
  TorchClients clients({.address = server.address(),
                        .dialect = row.dialect,
                        .ranks = row.ranks,
                        .per_connection = row.per_connection,
                        .threads = threads});
  clients.Start();
  const bool passed = clients.WaitPassed(row.timeout_s);
  const double elapsed = MonotonicSeconds() - clients.control().start.load();
  row.server_cpu_s = ReadCpuSeconds(server.pid()) - cpu_before;
  row.client_cpu_s = SelfCpuSeconds() - self_before;
  row.rss_peak_mib = Mib(ReadMemory(server.pid()).hwm_kb);
  const std::map<std::string, long long> tcp_after = TcpExt();
  auto delta = [&](const std::string& name) {
    const auto a = tcp_after.find(name), b = tcp_before.find(name);
    return a == tcp_after.end() || b == tcp_before.end() ? 0 : a->second - b->second;
  };
  row.listen_overflows = delta("ListenOverflows");
  for (const char* name : kTcpEvents) {
    if (const long long d = delta(name); d != 0) {
      row.tcp_events += (row.tcp_events.empty() ? "" : " ") + std::string(name) + " +" + std::to_string(d);
    }
  }
  row.connections = clients.connections();
  if constexpr (requires { server.Heap(); }) {
    const HeapStats heap = server.Heap();
    row.heap_in_use_mib = Mib(heap.in_use / 1024);
    row.heap_held_mib = Mib(heap.held / 1024);
  }
  {
    AgentProgress& p = clients.progress();
    std::lock_guard lock(p.mu);
    row.init_s = p.answered == row.ranks ? p.answered_at : 0;
    row.uid_s = p.joined == row.ranks ? p.joined_at : 0;
    row.passed = p.passed;
    row.wall_s = passed ? p.passed_at : elapsed;
    if (!passed) row.outcome = p.failed > 0 ? "failed: " + p.first_error : "timeout";
  }
  server.Stop();
}

// torch's clients speak VALIDATE and PING from 2.2 on (docs: TORCH_STORE_PROTOCOL.md).
TorchStoreDialect DialectOf(const std::string& torch_version) {
  int major = 0, minor = 0;
  if (std::sscanf(torch_version.c_str(), "%d.%d", &major, &minor) != 2) return TorchStoreDialect::kModern;
  return major > 2 || (major == 2 && minor >= 2) ? TorchStoreDialect::kModern : TorchStoreDialect::kLegacy;
}

Row RunTorch(const Config& config, int ranks, int per_connection, const std::string& libuv,
             std::string* version) {
  Row row{.server = libuv == "-"   ? "torch"
                    : libuv == "1" ? "torch-libuv"
                                   : "torch-daemon",
          .ranks = ranks,
          .per_connection = per_connection};
  if (ranks > config.torch_max_ranks) {
    row.outcome = "not run: over --torch-max-ranks " + std::to_string(config.torch_max_ranks);
    return row;
  }
  row.timeout_s = config.torch_timeout_s;
  std::unique_ptr<TorchServerProcess> server;
  try {
    server = StartServer<TorchServerProcess>(config, config.torch_python, ranks, libuv);
  } catch (const std::runtime_error& e) {
    row.outcome = std::string("not run: ") + e.what();  // e.g. use_libuv named to a release without it
    return row;
  }
  *version = server->version();
  row.dialect = DialectOf(*version);
  Measure(row, *server, config.threads);
  return row;
}

Row RunDistrun(const Config& config, TorchStoreDialect dialect, int ranks, int per_connection) {
  Row row{.server = "distrun", .dialect = dialect, .ranks = ranks, .per_connection = per_connection};
  row.timeout_s = kDistrunTimeoutS;
  CoordinatorOptions options;
  options.torch_store = true;
  options.torch_store_threads = config.store_threads;
  auto server = StartServer<CoordinatorProcess>(config, options);
  Measure(row, *server, config.threads);
  return row;
}

std::string Seconds(const Row& row, double s) {
  char buf[32];
  if (row.outcome == "timeout") {
    std::snprintf(buf, sizeof buf, "> %.0f", row.timeout_s);
  } else {
    std::snprintf(buf, sizeof buf, "%.3f", s);
  }
  return buf;
}

void PrintHeader() {
  std::printf("%8s  %-12s  %-7s  %6s  %5s  %9s  %8s  %8s  %10s  %14s  %s\n", "ranks", "server", "dialect",
              "conns", "K", "wall s", "init s", "uid s", "server CPU", "RSS MiB", "torch/distrun");
}

void PrintRow(const Row& row) {
  if (!row.ran) {
    std::printf("%8d  %-12s  %-7s  %s\n", row.ranks, row.server.c_str(), DialectWord(row.dialect),
                row.outcome.c_str());
    return;
  }
  char rss[48];
  std::snprintf(rss, sizeof rss, "%.0f -> %.0f", row.rss_start_mib, row.rss_peak_mib);
  std::string ratio;
  for (const Row::Ratio& r : row.ratios) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.1f", r.is_floor ? "> " : "", r.value);
    ratio += (ratio.empty() ? "" : " / ") + std::string(buf);
  }
  if (ratio.empty()) ratio = "-";
  std::printf("%8d  %-12s  %-7s  %6d  %5d  %9s  %8s  %8s  %10.2f  %14s  %s\n", row.ranks, row.server.c_str(),
              DialectWord(row.dialect), row.connections, row.per_connection, Seconds(row, row.wall_s).c_str(),
              row.init_s > 0 ? Seconds(row, row.init_s).c_str() : "-",
              row.uid_s > 0 ? Seconds(row, row.uid_s).c_str() : "-", row.server_cpu_s, rss, ratio.c_str());
  if (row.outcome != "passed") {
    std::printf("%8s  %s after %.1f s: %d of %d ranks through the barrier\n", "", row.outcome.c_str(),
                row.wall_s, row.passed, row.ranks);
  }
  if (row.listen_overflows > 0) {
    std::printf("%8s  %lld SYNs dropped by a full accept queue (TcpExtListenOverflows)\n", "",
                row.listen_overflows);
  }
  if (!row.tcp_events.empty()) std::printf("%8s  TcpExt: %s\n", "", row.tcp_events.c_str());
}

// Each torch run's time over distrun's, for distrun's rows, where torch's run passed or hit its cap.
void SetRatios(std::vector<Row>& rows) {
  for (const Row& torch : rows) {
    if (!IsTorch(torch) || !torch.ran || (torch.outcome != "passed" && torch.outcome != "timeout")) continue;
    for (Row& r : rows) {
      if (r.server != "distrun" || r.outcome != "passed" || r.wall_s <= 0) continue;
      r.ratios.push_back({torch.server, torch.wall_s / r.wall_s, torch.outcome == "timeout"});
    }
  }
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string Json(const Row& r) {
  char buf[1024];
  std::snprintf(
      buf, sizeof buf,
      "{\"server\": \"%s\", \"dialect\": \"%s\", \"ranks\": %d, \"connections\": %d, "
      "\"ranks_per_connection\": %d, \"ran\": %s, \"wall_s\": %.4f, \"init_s\": %.4f, \"uid_s\": %.4f, "
      "\"passed_ranks\": %d, \"server_cpu_s\": %.3f, \"client_cpu_s\": %.3f, \"rss_start_mib\": %.1f, "
      "\"rss_peak_mib\": %.1f, \"heap_in_use_mib\": %.1f, \"heap_held_mib\": %.1f, \"listen_overflows\": "
      "%lld, \"ratios\": {",
      r.server.c_str(), DialectWord(r.dialect), r.ranks, r.connections, r.per_connection,
      r.ran ? "true" : "false", r.wall_s, r.init_s, r.uid_s, r.passed, r.server_cpu_s, r.client_cpu_s,
      r.rss_start_mib, r.rss_peak_mib, r.heap_in_use_mib, r.heap_held_mib, r.listen_overflows);
  std::string json = buf;
  for (size_t i = 0; i < r.ratios.size(); ++i) {
    char ratio[96];
    std::snprintf(ratio, sizeof ratio, "{\"torch_over_distrun\": %.2f, \"is_floor\": %s}", r.ratios[i].value,
                  r.ratios[i].is_floor ? "true" : "false");
    json += (i ? ", " : "") + JsonString(r.ratios[i].server) + ": " + ratio;
  }
  return json + "}, \"tcp_events\": " + JsonString(r.tcp_events) + ", \"outcome\": " + JsonString(r.outcome) +
         "}";
}

Config ParseConfig(const Flags& flags) {
  Config c;
  std::stringstream list(flags.Get("ranks", "1000,10000"));
  for (std::string item; std::getline(list, item, ',');) c.ranks.push_back(std::stoi(item));
  c.per_connection = static_cast<int>(flags.Int("ranks-per-connection", 0));
  c.threads = static_cast<int>(flags.Int("threads", 1));
  c.torch_timeout_s = static_cast<double>(flags.Int("torch-timeout-s", 300));
  c.torch_max_ranks = static_cast<int>(flags.Int("torch-max-ranks", 10'000));
  const std::string servers = flags.Get("servers", "torch,distrun");
  c.torch = servers.find("torch") != std::string::npos;
  c.distrun = servers.find("distrun") != std::string::npos;
  c.pin = static_cast<int>(flags.Int("pin", 0));
  c.store_threads = static_cast<int>(flags.Int("store-threads", 0));
  c.torch_python = flags.Get("torch-python", kTorchPython);

  c.torch_libuv.clear();
  std::stringstream libuv(flags.Get("torch-libuv", "-"));
  for (std::string item; std::getline(libuv, item, ',');) {
    if (item != "-" && item != "0" && item != "1") {
      throw std::invalid_argument("--torch-libuv takes -, 0, 1 or 0,1 (use_libuv for torch's server), not '" +
                                  item + "'");
    }
    c.torch_libuv.push_back(item);
  }
  if (c.ranks.empty() || *std::min_element(c.ranks.begin(), c.ranks.end()) < 1 || c.per_connection < 0 ||
      c.threads < 1 || c.torch_timeout_s <= 0 || (!c.torch && !c.distrun) || c.pin < 0 ||
      c.store_threads < 0) {
    throw std::invalid_argument(
        "--ranks needs positive counts, --threads and --torch-timeout-s positive values, --pin and "
        "--store-threads no negative ones, --servers torch "
        "and/or distrun");
  }
  return c;
}

int PerConnection(const Config& config, int ranks) {
  if (config.per_connection > 0) return config.per_connection;
  return (ranks + kDefaultMaxConnections - 1) / kDefaultMaxConnections;
}

}  // namespace

int TorchStoreBench(const Flags& flags) {
  const Config config = ParseConfig(flags);
  ::signal(SIGPIPE, SIG_IGN);
  if (config.pin > 0) {
    if (ClientCpus(config).empty()) {
      throw std::invalid_argument("--pin N needs more than N CPUs: the ranks need one of their own");
    }
    PinTo(ClientCpus(config));
  }
  int most = 0;
  for (int n : config.ranks)
    most = std::max(most, (n + PerConnection(config, n) - 1) / PerConnection(config, n));
  // One descriptor per connection, and some for the loops, pipes and stdio.
  const uint64_t limit = RaiseFdLimit(static_cast<uint64_t>(most) + 1024);
  if (static_cast<uint64_t>(most) + 256 > limit) {
    throw std::invalid_argument("--ranks with this --ranks-per-connection needs " + std::to_string(most) +
                                " connections, over this process's descriptor limit " +
                                std::to_string(limit));
  }
  std::printf(
      "descriptor limit %llu; %d simulation thread(s)%s; keys: legacy %s, modern %s\n",
      static_cast<unsigned long long>(limit), config.threads,
      config.pin > 0
          ? (", servers on CPUs 0-" + std::to_string(config.pin - 1) + ", ranks on the others").c_str()
          : "",
      InitKeys(TorchStoreDialect::kLegacy).uid.c_str(), InitKeys(TorchStoreDialect::kModern).uid.c_str());
  std::printf(
      "K: ranks per connection; wall, init, uid: seconds from the first connect until the last rank is "
      "through "
      "the barrier, has its ADD init/ answered, holds the NCCL id; server CPU: seconds; RSS: at the start -> "
      "peak\n");
  std::string torch_version = "-";
  std::vector<Row> all;
  int rc = 0;
  for (int n : config.ranks) {
    const int per_connection = PerConnection(config, n);
    std::vector<Row> rows;
    if (config.torch) {
      for (const std::string& libuv : config.torch_libuv) {
        rows.push_back(RunTorch(config, n, per_connection, libuv, &torch_version));
      }
    }
    if (config.distrun) {
      rows.push_back(RunDistrun(config, TorchStoreDialect::kLegacy, n, per_connection));
      rows.push_back(RunDistrun(config, TorchStoreDialect::kModern, n, per_connection));
    }
    SetRatios(rows);
    PrintHeader();
    for (const Row& r : rows) {
      PrintRow(r);
      if (r.ran && r.outcome != "passed" && r.outcome != "timeout") rc = 1;
    }
    std::fflush(stdout);
    all.insert(all.end(), rows.begin(), rows.end());
  }
  std::string json = "{\"bench\": \"torch-store\", \"torch\": " + JsonString(torch_version) +
                     ", \"threads\": " + std::to_string(config.threads) +
                     ", \"server_cpus\": " + std::to_string(config.pin) + ", \"runs\": [";
  for (size_t i = 0; i < all.size(); ++i) json += (i ? ", " : "") + Json(all[i]);
  std::printf("%s]}\n", json.c_str());
  return rc;
}

}  // namespace distrun::bench
