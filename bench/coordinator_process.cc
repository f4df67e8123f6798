#include "coordinator_process.h"

#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/agent/agent.h"
#include "runtime/distrun.pb.h"
#include "runtime/metrics/observe_server.h"
#include "runtime/service/service.h"
#include "runtime/transport/grpc_server.h"
#include "runtime/transport/proto_convert.h"

extern char** environ;

namespace distrun::bench {

std::string ReadLine(int fd, double timeout_s) {
  std::string line;
  const double deadline = MonotonicSeconds() + timeout_s;
  while (true) {
    double left = deadline - MonotonicSeconds();
    if (left <= 0) return {};
    pollfd p{fd, POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::min(left, 3600.0) * 1000) + 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return {};
    char c = 0;
    ssize_t r = ::read(fd, &c, 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return {};
    if (c == '\n') return line;
    line += c;
  }
}

pid_t SpawnChild(const std::vector<std::string>& argv, int stdin_fd, int stdout_fd) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (stdin_fd >= 0) posix_spawn_file_actions_adddup2(&actions, stdin_fd, 0);
  if (stdout_fd >= 0) posix_spawn_file_actions_adddup2(&actions, stdout_fd, 1);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
  return pid;
}

PipedChild SpawnPiped(const std::vector<std::string>& argv) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  if (::pipe2(out, O_CLOEXEC) != 0) {
    const std::string why = std::strerror(errno);
    ::close(in[0]);
    ::close(in[1]);
    throw std::runtime_error("pipe: " + why);
  }
  PipedChild child{.to_child = in[1], .from_child = out[0]};
  try {
    child.pid = SpawnChild(argv, in[0], out[1]);
  } catch (...) {
    for (int fd : {in[0], in[1], out[0], out[1]}) ::close(fd);
    throw;
  }
  ::close(in[0]);
  ::close(out[1]);
  return child;
}

CoordinatorProcess::CoordinatorProcess(const CoordinatorOptions& options) {
  std::vector<std::string> argv = {SelfPath(),
                                   "coordinator",
                                   "--nodes",
                                   std::to_string(options.nodes),
                                   "--heartbeat-timeout-ms",
                                   std::to_string(options.heartbeat_timeout_ms),
                                   "--min-nodes",
                                   std::to_string(options.min_nodes),
                                   "--torch-store",
                                   options.torch_store ? "1" : "0",
                                   "--torch-store-threads",
                                   std::to_string(options.torch_store_threads)};
  if (options.metrics_port >= 0)
    argv.insert(argv.end(), {"--metrics-port", std::to_string(options.metrics_port)});
  if (options.in_place) argv.insert(argv.end(), {"--in-place", "1"});
  if (!options.resume_file.empty()) {
    argv.insert(argv.end(),
                {"--resume", options.resume_file, "--host-agent", std::to_string(options.host_agent)});
  }
  // A wrapper for diagnosis (valgrind --tool=massif, ...): it must run the coordinator in its own pid.
  if (const char* wrap = std::getenv("DISTRUN_BENCH_COORDINATOR_WRAPPER")) {
    std::istringstream words(wrap);
    std::vector<std::string> prefix;
    for (std::string w; words >> w;) prefix.push_back(w);
    argv.insert(argv.begin(), prefix.begin(), prefix.end());
  }
  const PipedChild child = SpawnPiped(argv);
  pid_ = child.pid;
  to_child_ = child.to_child;
  from_child_ = child.from_child;
  std::string line = ReadLine(from_child_, 30);
  if (!line.starts_with("port ")) {
    Stop();
    throw std::runtime_error("the coordinator process did not start (said '" + line + "')");
  }
  address_ = "127.0.0.1:" + line.substr(5);
}

CoordinatorProcess::~CoordinatorProcess() { Stop(); }

HeapStats CoordinatorProcess::Heap() const {
  HeapStats h;
  if (::write(to_child_, "heap\n", 5) != 5) return h;
  std::string line = ReadLine(from_child_, 30);
  if (std::sscanf(line.c_str(), "heap %lld %lld", &h.in_use, &h.held) != 2) h = HeapStats{};
  return h;
}

double CoordinatorProcess::Stop() {
  if (stopped_) return -1;
  stopped_ = true;
  ::close(to_child_);
  std::string line = ReadLine(from_child_, 60);
  ::close(from_child_);
  double seconds = line.starts_with("shutdown_s ") ? std::stod(line.substr(11)) : -1;
  if (line.empty()) ::kill(pid_, SIGKILL);  // only our own child, by its pid
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  return seconds;
}

int CoordinatorMain(const Flags& flags) {
  // One descriptor per connection; the simulated agents may open tens of thousands.
  RaiseFdLimit(1 << 20);
  ::signal(SIGPIPE, SIG_IGN);
  ServiceConfig sc;
  sc.num_nodes = static_cast<int>(flags.Int("nodes", 1));
  sc.run_id = "bench";
  sc.initialization_timeout = std::chrono::milliseconds(3'600'000);
  sc.heartbeat_timeout = std::chrono::milliseconds(flags.Int("heartbeat-timeout-ms", 100'000));
  if (const int min_nodes = static_cast<int>(flags.Int("min-nodes", 0)); min_nodes > 0) {
    sc.elastic = ElasticRange{min_nodes, sc.num_nodes, ElasticPolicy::kResize};
  }
  sc.recovery_in_place = flags.Int("in-place", 0) != 0;
  if (const std::string file = flags.Get("resume", ""); !file.empty()) {
    // A standby's service: the job as its copy holds it; it elects itself as the agents turn to it.
    std::ifstream in(file, std::ios::binary);
    v1::ServiceSnapshot wire;
    if (!wire.ParseFromIstream(&in)) {
      std::fprintf(stderr, "coordinator: cannot read a snapshot from %s\n", file.c_str());
      return 1;
    }
    ServiceSnapshot copy = FromProto(wire);
    sc.num_nodes = copy.num_nodes;
    sc.run_id = copy.run_id;
    sc.elastic = copy.membership.range;
    sc.host_agent = static_cast<int>(flags.Int("host-agent", 1));
    sc.resume = std::move(copy);
  }
  auto service = std::make_unique<CoordinationService>(sc);
  GrpcServerConfig gc;
  gc.address = "127.0.0.1:0";
  gc.loopback_only = true;
  gc.token = kBenchToken;
  gc.torch_store = flags.Int("torch-store", 0) != 0;
  gc.torch_store_threads = static_cast<size_t>(flags.Int("torch-store-threads", 0));
  gc.log = std::make_shared<spdlog::logger>("coordinator", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  auto server = std::make_unique<GrpcServer>(*service, gc);
  // What --metrics-address serves, as node 0's distrun serves it.
  std::unique_ptr<ObserveServer> observe;
  if (const int port = static_cast<int>(flags.Int("metrics-port", -1)); port >= 0) {
    ObserveConfig oc;
    oc.host = "127.0.0.1";
    oc.port = port;
    observe = std::make_unique<ObserveServer>(*service, oc);
  }
  // The standby's own agent, in process, joins each epoch the takeover begins, as its distrun does.
  std::unique_ptr<Agent> host;
  std::thread host_joins;
  if (sc.resume) {
    AgentConfig ac;
    ac.in_process_service = service.get();
    ac.coordinator_address = "127.0.0.1:" + std::to_string(server->port());
    ac.join.node_rank = sc.host_agent;
    ac.join.num_nodes = sc.num_nodes;
    ac.join.host = "standby";
    ac.join.local_workers = 1;
    ac.join.run_id = sc.run_id;
    ac.heartbeat_timeout = sc.heartbeat_timeout;
    ac.heartbeat_interval = HeartbeatInterval(sc.heartbeat_timeout, sc.num_nodes);
    host = std::make_unique<Agent>(ac);
    host_joins = std::thread([agent = host.get()] {
      while (std::optional<JobEvent> e = agent->WaitForEvent(std::chrono::hours(1))) {
        if (e->kind != JobEvent::Kind::kRestart) break;
        NodeAssignment a;
        if (!agent->Join(e->restart_round, &a).ok()) break;
      }
    });
  }
  std::printf("port %d\n", server->port());
  std::fflush(stdout);
  // "heap": how much of the heap is in use, apart from what malloc holds free (RSS counts both).
  for (std::string line; !(line = ReadLine(0, 1e9)).empty();) {
    if (line == "heap") {
      struct mallinfo2 m = ::mallinfo2();
      std::printf("heap %zu %zu\n", m.uordblks + m.hblkhd, m.arena + m.hblkhd);
      std::fflush(stdout);
    }
  }
  double start = MonotonicSeconds();
  host.reset();  // its stream ends: the thread's wait returns
  if (host_joins.joinable()) host_joins.join();
  server.reset();
  service.reset();
  std::printf("shutdown_s %.6f\n", MonotonicSeconds() - start);
  std::fflush(stdout);
  return 0;
}

}  // namespace distrun::bench
