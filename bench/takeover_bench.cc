// distrun-bench takeover: how fast a standby takes an elastic job over when node 0 is lost (DESIGN §4.5).
// The standby's copy is made as node 0's service makes it, for a job of N agents that all joined epoch 0
// (with --job-keys keys under job/); the standby's service is rebuilt from it in a process of its own
// (`distrun-bench coordinator --resume`, with the standby's own agent in process), and N - 2 simulated
// agents (framed_agents.h) turn to it as distrun's agents do after node 0's loss: they attach without a
// join, and join the round the takeover's restart names. The time is from their start to the moment every
// one of them holds its assignment of the next epoch: the connections, the election (every member reached
// it: it decides at once), the takeover, the restart, the joins and the assignments. Not in it: how long
// the agents take to notice the loss (a broken stream: at once; silence: --heartbeat-timeout) and the
// hold for the old coordinator's workers (distrun's fence_wait, one heartbeat interval + 0.1 s), which the
// lab measures with real distruns (bench/elastic_lab_bench.py --victim node1).

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "coordinator_process.h"
#include "flags.h"
#include "framed_agents.h"
#include "proc_stats.h"
#include "runtime/agent/agent.h"
#include "runtime/distrun.pb.h"
#include "runtime/service/service.h"
#include "runtime/transport/proto_convert.h"

namespace distrun::bench {
namespace {

constexpr int kHeartbeatTimeoutMs = 10'000;

// The copy node 0's service sends its standby (agent 1) once epoch 0 of `agents` agents began.
ServiceSnapshot CopyOfAJob(int agents, int job_keys) {
  ServiceConfig sc;
  sc.num_nodes = agents;
  sc.run_id = "bench";
  sc.elastic = ElasticRange{2, agents, ElasticPolicy::kResize};
  sc.heartbeat_timeout = std::chrono::milliseconds(kHeartbeatTimeoutMs);
  CoordinationService node0(sc);
  for (int a = 0; a < agents; ++a) {
    uint64_t id = 0;
    node0.AttachAgent(
        a, [](const JobEvent&) {}, &id);
  }
  for (int a = 0; a < agents; ++a) {
    NodeJoin j;
    j.node_rank = a;
    j.num_nodes = agents;
    j.host = "node" + std::to_string(a);
    j.local_workers = 1;
    j.run_id = "bench";
    j.replicates = true;
    node0.Join(j, [](const Status&, const NodeAssignment&) {});
  }
  for (int k = 0; k < job_keys; ++k) node0.KvSet("job/key-" + std::to_string(k), std::string(100, 'x'));
  return node0.Snapshot();
}

struct Trial {
  double seconds = 0;
  double coordinator_cpu = 0;
};

std::optional<Trial> RunTrial(int agents, int threads, int job_keys) {
  char path[] = "/tmp/distrun-takeover-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return std::nullopt;
  ::close(fd);
  {
    v1::ServiceSnapshot wire;
    ToProto(CopyOfAJob(agents, job_keys), &wire);
    std::ofstream out(path, std::ios::binary);
    wire.SerializeToOstream(&out);
  }
  CoordinatorOptions co;
  co.heartbeat_timeout_ms = kHeartbeatTimeoutMs;
  co.resume_file = path;
  co.host_agent = 1;
  CoordinatorProcess standby(co);
  ::unlink(path);

  SimAgentsOptions o;
  o.address = standby.address();
  o.token = kBenchToken;
  o.agents = agents - 2;  // node 0 is lost; the standby's own agent is in its process
  o.first_rank = 2;
  o.job_nodes = agents;
  o.join_first = false;
  o.rejoin = true;
  o.threads = threads;
  o.heartbeat_ms =
      static_cast<int>(HeartbeatInterval(std::chrono::milliseconds(kHeartbeatTimeoutMs), agents).count());
  FramedAgents sim(o);
  sim.progress().ExpectRejoin(1, o.agents);
  const double cpu_before = standby.CpuSeconds();
  const double start = MonotonicSeconds();
  sim.Start();
  if (!sim.progress().WaitRejoined(120)) {
    std::fprintf(stderr, "takeover: %d agents did not all hold epoch 1 (%d did): %s\n", o.agents,
                 sim.progress().rejoined, sim.progress().first_error.c_str());
    return std::nullopt;
  }
  Trial t;
  t.seconds = sim.progress().rejoined_at - start;
  t.coordinator_cpu = standby.CpuSeconds() - cpu_before;
  return t;
}

}  // namespace

int TakeoverBench(const Flags& flags) {
  std::vector<int> sizes;
  std::stringstream list(flags.Get("agents", "1000"));
  for (std::string item; std::getline(list, item, ',');) sizes.push_back(std::stoi(item));
  const int trials = static_cast<int>(flags.Int("trials", 10));
  const int threads = static_cast<int>(flags.Int("threads", 2));
  const int job_keys = static_cast<int>(flags.Int("job-keys", 100));
  std::printf("%8s %7s %12s %12s %16s\n", "agents", "trials", "median ms", "max ms", "standby CPU ms");
  for (int agents : sizes) {
    if (agents < 3) {
      std::fprintf(stderr, "takeover: --agents must be at least 3 (node 0, the standby and one more)\n");
      return 2;
    }
    std::vector<Trial> done;
    for (int t = 0; t < trials; ++t) {
      std::optional<Trial> trial = RunTrial(agents, threads, job_keys);
      if (!trial) return 1;
      done.push_back(*trial);
    }
    std::sort(done.begin(), done.end(), [](const Trial& a, const Trial& b) { return a.seconds < b.seconds; });
    std::vector<double> cpu;
    for (const Trial& t : done) cpu.push_back(t.coordinator_cpu);
    std::sort(cpu.begin(), cpu.end());
    std::printf("%8d %7d %12.1f %12.1f %16.1f\n", agents, trials, done[done.size() / 2].seconds * 1e3,
                done.back().seconds * 1e3, cpu[cpu.size() / 2] * 1e3);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace distrun::bench
