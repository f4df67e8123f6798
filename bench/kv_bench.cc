// `distrun-bench kv --clients 64`: key-value operations per second with N concurrent workers over gRPC on
// loopback. Each client is a process of its own (`distrun-bench kv-client`) using the workers' library
// (runtime/client/client.h) with its own connection, as workers do; the service runs in its own process too.
// Three phases of --seconds each, all clients together: set (32-byte values, 16 keys per client), get
// (KvGet of a key that exists) and add (one counter shared by every client, the usual TCPStore pattern).
//
// Where the time goes: CPU per operation of the coordinator and of the clients (from /proc and
// getrusage), the service's own cost per operation without gRPC (measured in this process), and, with
// --perf FILE, a perf profile of the coordinator.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "coordinator_process.h"
#include "flags.h"
#include "proc_stats.h"
#include "runtime/client/client.h"
#include "runtime/service/service.h"

extern char** environ;

namespace distrun::bench {
namespace {

constexpr const char* kPhases[] = {"set", "get", "add"};
constexpr int kKeysPerClient = 16;
constexpr double kPhaseGap = 0.3;  // seconds between phases, so no phase overlaps the next

double CpuSelf() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto tv = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
  };
  return tv(u.ru_utime) + tv(u.ru_stime);
}

void SleepUntil(double t) {
  while (true) {
    double left = t - MonotonicSeconds();
    if (left <= 0) return;
    ::usleep(static_cast<useconds_t>(std::min(left, 0.5) * 1e6));
  }
}

double Percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  size_t i = static_cast<size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(i), v.end());
  return v[i];
}

// The service alone, one thread, no gRPC: what the lock and the map cost per operation.
std::map<std::string, double> ServiceOnlyNanos() {
  ServiceConfig sc;
  CoordinationService service(sc);
  const int n = 200'000;
  std::string value(32, 'v');
  std::vector<std::string> keys;
  for (int i = 0; i < kKeysPerClient * 64; ++i)
    keys.push_back("kv/" + std::to_string(i % 64) + "/" + std::to_string(i / 64));
  std::map<std::string, double> out;
  double t = MonotonicSeconds();
  for (int i = 0; i < n; ++i) service.KvSet(keys[static_cast<size_t>(i) % keys.size()], value);
  out["set"] = (MonotonicSeconds() - t) / n * 1e9;
  t = MonotonicSeconds();
  size_t sink = 0;
  for (int i = 0; i < n; ++i) {
    service.KvGet(keys[static_cast<size_t>(i) % keys.size()], std::chrono::milliseconds(10'000),
                  [&sink](const Status&, const std::string& v) { sink += v.size(); });
  }
  out["get"] = (MonotonicSeconds() - t) / n * 1e9;
  t = MonotonicSeconds();
  int64_t sum = 0;
  for (int i = 0; i < n; ++i) service.KvAdd("kv/counter", 1, &sum);
  out["add"] = (MonotonicSeconds() - t) / n * 1e9;
  if (sink == 0 || sum != n) throw std::runtime_error("service-only loop went wrong");
  return out;
}

struct ClientProcess {
  pid_t pid = -1;
  int out = -1;
};

ClientProcess SpawnClient(const std::string& address, int id, int seconds, int64_t start_ns) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  std::vector<std::string> argv = {SelfPath(),   "kv-client",
                                   "--address",  address,
                                   "--id",       std::to_string(id),
                                   "--seconds",  std::to_string(seconds),
                                   "--start-ns", std::to_string(start_ns)};
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  ClientProcess c;
  int rc = ::posix_spawn(&c.pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) throw std::runtime_error("cannot start a kv client");
  c.out = fds[0];
  return c;
}

}  // namespace

// One client: "PHASE COUNT CPU_S LAT_US..." per phase on stdout.
int KvClientMain(const Flags& flags) {
  ClientOptions o;
  o.coordinator_address = flags.Get("address", "");
  o.token = kBenchToken;
  o.process_id = static_cast<int>(flags.Int("id", 0));
  Client client(o);
  const int id = o.process_id;
  const double seconds = static_cast<double>(flags.Int("seconds", 3));
  const double start = static_cast<double>(flags.Int("start-ns", 0)) * 1e-9;
  std::vector<std::string> keys;
  const std::string value(32, 'v');
  for (int k = 0; k < kKeysPerClient; ++k) {
    keys.push_back("kv/" + std::to_string(id) + "/" + std::to_string(k));
    Status s = client.Set(keys.back(), value);  // connects, and makes every key exist for the get phase
    if (!s.ok()) {
      std::fprintf(stderr, "kv-client %d: %s\n", id, s.message.c_str());
      return 1;
    }
  }
  for (int phase = 0; phase < 3; ++phase) {
    const double from = start + phase * (seconds + kPhaseGap), to = from + seconds;
    SleepUntil(from);
    std::vector<double> lat;
    double cpu0 = CpuSelf();
    std::string got;
    int64_t sum = 0;
    for (size_t i = 0;; ++i) {
      double t0 = MonotonicSeconds();
      if (t0 >= to) break;
      const std::string& key = keys[i % keys.size()];
      Status s = phase == 0   ? client.Set(key, value)
                 : phase == 1 ? client.Get(key, std::chrono::milliseconds(10'000), &got)
                              : client.Add("kv/counter", 1, &sum);
      double t1 = MonotonicSeconds();
      if (!s.ok()) {
        std::fprintf(stderr, "kv-client %d: %s\n", id, s.message.c_str());
        return 1;
      }
      if (t1 <= to) lat.push_back((t1 - t0) * 1e6);
    }
    double cpu = CpuSelf() - cpu0;
    std::string line =
        std::string(kPhases[phase]) + " " + std::to_string(lat.size()) + " " + std::to_string(cpu);
    for (double l : lat) line += " " + std::to_string(static_cast<int64_t>(l));
    std::printf("%s\n", line.c_str());
  }
  return 0;
}

int KvBench(const Flags& flags) {
  const int clients = static_cast<int>(flags.Int("clients", 64));
  const int seconds = static_cast<int>(flags.Int("seconds", 3));
  if (clients < 1 || seconds < 1) throw std::invalid_argument("--clients and --seconds must be positive");
  RaiseFdLimit(4096);

  auto service_ns = ServiceOnlyNanos();
  CoordinatorProcess coordinator(CoordinatorOptions{});
  // Long enough for every client process to start and connect before the first phase.
  const double start = MonotonicSeconds() + 1.0 + clients * 0.03;
  std::vector<ClientProcess> procs;
  for (int i = 0; i < clients; ++i) {
    procs.push_back(SpawnClient(coordinator.address(), i, seconds, static_cast<int64_t>(start * 1e9)));
  }
  pid_t perf = -1;
  std::string perf_file = flags.Get("perf", "");
  double coord_cpu[3];
  for (int phase = 0; phase < 3; ++phase) {
    SleepUntil(start + phase * (seconds + kPhaseGap));
    coord_cpu[phase] = coordinator.CpuSeconds();
    if (phase == 0 && !perf_file.empty()) {
      perf = ::fork();
      if (perf == 0) {
        std::string p = std::to_string(coordinator.pid());
        ::execlp("perf", "perf", "record", "-q", "-g", "-o", perf_file.c_str(), "-p", p.c_str(), nullptr);
        ::_exit(127);
      }
    }
    SleepUntil(start + phase * (seconds + kPhaseGap) + seconds);
    coord_cpu[phase] = coordinator.CpuSeconds() - coord_cpu[phase];
  }
  if (perf > 0) {
    ::kill(perf, SIGINT);  // our own child, by its pid
    ::waitpid(perf, nullptr, 0);
  }

  std::map<std::string, std::vector<double>> lat;
  std::map<std::string, double> count, client_cpu;
  int failed = 0;
  for (auto& c : procs) {
    for (int phase = 0; phase < 3; ++phase) {
      std::string line = ReadLine(c.out, 60);
      std::istringstream in(line);
      std::string name;
      double n = 0, cpu = 0;
      if (!(in >> name >> n >> cpu)) {
        ++failed;
        break;
      }
      count[name] += n;
      client_cpu[name] += cpu;
      for (double l; in >> l;) lat[name].push_back(l);
    }
    ::close(c.out);
    int status = 0;
    ::waitpid(c.pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  coordinator.Stop();
  if (failed) {
    std::fprintf(stderr, "%d kv clients failed\n", failed);
    return 1;
  }
  std::printf("%d clients, %d s per phase, each client its own process and connection\n", clients, seconds);
  std::string json = "{\"bench\": \"kv\", \"clients\": " + std::to_string(clients);
  double all_ops = 0;  // "ops_per_s": the three phases' mean
  for (int phase = 0; phase < 3; ++phase) {
    std::string name = kPhases[phase];
    double ops = count[name] / seconds;
    all_ops += ops;
    double p50 = Percentile(lat[name], 0.5), p99 = Percentile(lat[name], 0.99);
    double server_us = coord_cpu[phase] / count[name] * 1e6, client_us = client_cpu[name] / count[name] * 1e6;
    std::printf(
        "%-4s %8.0f ops/s  latency p50 %6.0f us p99 %6.0f us  CPU per op: coordinator %5.1f us (service "
        "alone %.2f us), client %5.1f us\n",
        name.c_str(), ops, p50, p99, server_us, service_ns[name] / 1e3, client_us);
    char buf[256];
    std::snprintf(
        buf, sizeof buf,
        ", \"%s_ops_s\": %.0f, \"%s_p50_us\": %.0f, \"%s_p99_us\": %.0f, \"%s_coordinator_cpu_us\": "
        "%.2f, \"%s_client_cpu_us\": %.2f, \"%s_service_us\": %.3f",
        name.c_str(), ops, name.c_str(), p50, name.c_str(), p99, name.c_str(), server_us, name.c_str(),
        client_us, name.c_str(), service_ns[name] / 1e3);
    json += buf;
  }
  std::printf("%s, \"ops_per_s\": %.0f}\n", json.c_str(), all_ops / 3);
  return 0;
}

}  // namespace distrun::bench
