// `distrun-bench agent-memory [--distrun PATH]`: resident memory of a process that only runs an Agent
// (runtime/agent/agent.h), connected to a coordinator in another process and joined; with --distrun, also of
// a real `distrun --nproc-per-node 1 -- sleep 3` while its worker sleeps.
//
// RSS counts the shared libraries' pages the process touched (RssFile); those are shared with every other
// process using the same libraries, so the process's own cost is closer to RssAnon, and PSS splits the
// shared pages among their users.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "coordinator_process.h"
#include "flags.h"
#include "proc_stats.h"
#include "runtime/agent/agent.h"

namespace distrun::bench {
namespace {

void Print(const char* what, const MemoryStats& m) {
  std::printf("%-34s RSS %6.1f MB (peak %6.1f MB): anon %6.1f MB, files %6.1f MB; PSS %6.1f MB; %d threads\n",
              what, static_cast<double>(m.rss_kb) / 1024, static_cast<double>(m.hwm_kb) / 1024,
              static_cast<double>(m.anon_kb) / 1024, static_cast<double>(m.file_kb) / 1024,
              static_cast<double>(m.pss_kb) / 1024, m.threads);
}

// distrun's worker, once started: the first pid in /proc/PID/task/PID/children.
bool HasChild(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  pid_t child = 0;
  return static_cast<bool>(in >> child);
}

MemoryStats DistrunMemory(const std::string& distrun) {
  int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  pid_t pid = SpawnChild({distrun, "--nproc-per-node", "1", "--", "sleep", "3"}, -1, devnull);
  ::close(devnull);
  double deadline = MonotonicSeconds() + 2;
  while (!HasChild(pid) && MonotonicSeconds() < deadline) ::usleep(10'000);
  ::usleep(1'000'000);  // past rendezvous and the first heartbeats
  MemoryStats m = ReadMemory(pid);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error(distrun + " failed");
  return m;
}

}  // namespace

// The agent process: joins, says so, and stays until its stdin closes.
int AgentMain(const Flags& flags) {
  AgentConfig config;
  config.coordinator_address = flags.Get("address", "");
  config.token = kBenchToken;
  config.join.node_rank = 0;
  config.join.num_nodes = 1;
  config.join.host = "node0";
  config.join.local_workers = 8;
  for (int d = 0; d < 8; ++d) config.join.device_tokens.push_back(std::to_string(d));
  config.join.run_id = "bench";
  config.initialization_timeout = std::chrono::milliseconds(30'000);
  Agent agent(config);
  NodeAssignment assignment;
  Status s = agent.Join(0, &assignment);
  if (!s.ok()) {
    std::fprintf(stderr, "agent: %s\n", s.message.c_str());
    return 1;
  }
  std::printf("joined\n");
  std::fflush(stdout);
  char buf[64];
  while (true) {
    ssize_t n = ::read(0, buf, sizeof buf);
    if (n == 0 || (n < 0 && errno != EINTR)) break;
  }
  return agent.ReportSuccess().ok() ? 0 : 1;
}

int AgentMemoryBench(const Flags& flags) {
  CoordinatorProcess coordinator(CoordinatorOptions{});
  const PipedChild agent = SpawnPiped({SelfPath(), "agent", "--address", coordinator.address()});
  std::string line = ReadLine(agent.from_child, 30);
  if (line != "joined") {
    ::close(agent.to_child);
    ::close(agent.from_child);
    ::waitpid(agent.pid, nullptr, 0);
    throw std::runtime_error("the agent did not join");
  }
  ::usleep(2'500'000);  // a few heartbeats
  MemoryStats m = ReadMemory(agent.pid);
  ::close(agent.to_child);
  ::close(agent.from_child);
  int status = 0;
  ::waitpid(agent.pid, &status, 0);
  Print("agent process (connected, joined)", m);
  std::string json = "{\"bench\": \"agent-memory\", \"agent_rss_kb\": " + std::to_string(m.rss_kb) +
                     ", \"agent_anon_kb\": " + std::to_string(m.anon_kb) +
                     ", \"agent_pss_kb\": " + std::to_string(m.pss_kb);
  if (flags.Has("distrun")) {
    MemoryStats d = DistrunMemory(flags.Get("distrun", ""));
    Print("distrun --nproc-per-node 1 -- sleep", d);
    json += ", \"distrun_rss_kb\": " + std::to_string(d.rss_kb) +
            ", \"distrun_anon_kb\": " + std::to_string(d.anon_kb) +
            ", \"distrun_pss_kb\": " + std::to_string(d.pss_kb);
  }
  std::printf("%s}\n", json.c_str());
  return 0;
}

}  // namespace distrun::bench
