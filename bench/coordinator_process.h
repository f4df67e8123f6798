#pragma once
// The coordination service (CoordinationService + GrpcServer, as distrun hosts it) in a process of its own,
// so that benchmarks measure its memory and CPU apart from the simulated agents and clients that load it.
// The child is this program run as `distrun-bench coordinator`, under DISTRUN_BENCH_COORDINATOR_WRAPPER
// (words, e.g. "valgrind --tool=massif") when that is set.

#include <sys/types.h>

#include <string>
#include <vector>

#include "flags.h"
#include "proc_stats.h"

namespace distrun::bench {

inline constexpr char kBenchToken[] = "distrun-bench-token";

struct CoordinatorOptions {
  int nodes = 1;
  int heartbeat_timeout_ms = 100'000;  // the service's default
  int min_nodes = 0;                   // > 0: an elastic job (--nnodes min_nodes:nodes, resize)
  bool torch_store = false;            // serve PyTorch's TCPStore protocol on the port too
  int torch_store_threads = 0;         // its loops; 0: the default for the machine
  // Set: a standby's service, rebuilt from this file (a serialized v1::ServiceSnapshot) for agent
  // host_agent, whose own agent runs in the child too (in process, as the standby's distrun's does).
  std::string resume_file;
  int host_agent = 1;
  int metrics_port = -1;  // >= 0: node 0's ObserveServer (--metrics-address) on 127.0.0.1 at this port
  bool in_place = false;  // --recovery in-process: every epoch's assignments carry the world's change
};

// malloc's view of the coordinator's heap (mallinfo2), bytes.
struct HeapStats {
  long long in_use = 0;  // allocated and not freed
  long long held = 0;    // taken from the system, in use or free
};

class CoordinatorProcess {
 public:
  // Starts the child and waits until it listens; throws std::runtime_error when it does not.
  explicit CoordinatorProcess(const CoordinatorOptions& options);
  // Stops the child (SIGKILL if it does not end within 60 s).
  ~CoordinatorProcess();
  CoordinatorProcess(const CoordinatorProcess&) = delete;
  CoordinatorProcess& operator=(const CoordinatorProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& address() const { return address_; }
  MemoryStats Memory() const { return ReadMemory(pid_); }
  double CpuSeconds() const { return ReadCpuSeconds(pid_); }
  HeapStats Heap() const;

  // Closes the child's stdin, which makes it shut the server down; returns the seconds the shutdown took
  // (as the child measured it), or -1 when it did not say.
  double Stop();

 private:
  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
  std::string address_;
  bool stopped_ = false;
};

// `distrun-bench coordinator --nodes N [--heartbeat-timeout-ms MS] [--min-nodes M] [--torch-store 0|1]
// [--resume FILE --host-agent A]`:
// serves on 127.0.0.1:0 (with --torch-store 1 PyTorch's TCPStore protocol too, as GrpcServerConfig's
// torch_store), prints "port P", serves until stdin closes, then prints "shutdown_s S".
int CoordinatorMain(const Flags& flags);

// Reads one line from `fd`, waiting up to `timeout_s`; empty at end of file or timeout.
std::string ReadLine(int fd, double timeout_s);

// Starts argv (argv[0] searched on PATH) with `stdin_fd` and `stdout_fd` (-1: this process's) as its stdin
// and stdout; throws std::runtime_error "cannot start ARGV0: why".
pid_t SpawnChild(const std::vector<std::string>& argv, int stdin_fd, int stdout_fd);

// A child whose stdin and stdout are pipes to this process: it reads requests, answers lines, and ends when
// its stdin closes.
struct PipedChild {
  pid_t pid = -1;
  int to_child = -1;    // its stdin
  int from_child = -1;  // its stdout
};
// As SpawnChild; no pipe is left open when it throws.
PipedChild SpawnPiped(const std::vector<std::string>& argv);

}  // namespace distrun::bench
