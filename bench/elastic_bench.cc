// distrun-bench elastic: how fast node 0's coordinator moves an elastic job to its next epoch. Simulated
// agents (framed_agents.h) join a coordinator of an elastic job (--nnodes (N-K):N) and pass a barrier; then,
// K times, one agent's connection closes as its distrun's death would close it, and the time is taken from
// that close to the moment every survivor holds the next epoch's assignment: the coordinator sees the
// close, tells every survivor to restart, each joins the new epoch, and the coordinator answers them all.
// Workers, their stop and their start are not part of it (the lab measures those with real distruns).

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "coordinator_process.h"
#include "flags.h"
#include "framed_agents.h"
#include "proc_stats.h"
#include "runtime/agent/agent.h"

namespace distrun::bench {
namespace {

struct Trial {
  double seconds = 0;
  double coordinator_cpu = 0;
};

// One coordinator and `agents` simulated agents; `trials` losses in a row. Empty on failure.
std::vector<Trial> RunAgents(int agents, int trials, int threads, int heartbeat_timeout_ms, bool in_place) {
  CoordinatorOptions co;
  co.in_place = in_place;
  co.nodes = agents;
  co.min_nodes = std::max(1, agents - trials);
  co.heartbeat_timeout_ms = heartbeat_timeout_ms;
  CoordinatorProcess coordinator(co);

  SimAgentsOptions o;
  o.address = coordinator.address();
  o.token = kBenchToken;
  o.agents = agents;
  o.threads = threads;
  o.rejoin = true;
  o.in_place = in_place;
  // Heartbeats at the pace distrun's agents keep for a job of this size (runtime/agent/agent.h).
  o.heartbeat_ms =
      static_cast<int>(HeartbeatInterval(std::chrono::milliseconds(heartbeat_timeout_ms), agents).count());
  FramedAgents sim(o);
  sim.Start();
  if (!sim.WaitPassed(600)) {
    std::fprintf(stderr, "elastic: the first rendezvous of %d agents failed: %s\n", agents,
                 sim.progress().first_error.c_str());
    return {};
  }
  std::vector<Trial> out;
  for (int t = 1; t <= trials; ++t) {
    const int victim = agents - t;  // never node 0, which hosts the coordinator
    sim.progress().ExpectRejoin(t, agents - t);
    const double cpu_before = coordinator.CpuSeconds();
    sim.Drop(victim);
    if (!sim.progress().WaitRejoined(120)) {
      std::fprintf(stderr,
                   "elastic: %d agents, trial %d: the survivors did not all join epoch %d (%d of %d): %s\n",
                   agents, t, t, sim.progress().rejoined, agents - t, sim.progress().first_error.c_str());
      return {};
    }
    Trial trial;
    trial.seconds = sim.progress().rejoined_at - sim.control().dropped_at.load();
    trial.coordinator_cpu = coordinator.CpuSeconds() - cpu_before;
    out.push_back(trial);
  }
  sim.StopHeartbeats();
  coordinator.Stop();
  return out;
}

}  // namespace

int ElasticBench(const Flags& flags) {
  const int trials = static_cast<int>(flags.Int("trials", 5));
  const int threads = static_cast<int>(flags.Int("threads", 2));
  const int heartbeat_timeout_ms = static_cast<int>(flags.Int("heartbeat-timeout-ms", 10'000));
  // --in-place 1: the coordinator and the agents recover in place (--recovery in-process): the same epoch
  // change, whose assignments also carry the world's change (runtime/recovery/world_change.h).
  const bool in_place = flags.Int("in-place", 0) != 0;
  if (trials < 1 || threads < 1 || heartbeat_timeout_ms < 1) {
    throw std::invalid_argument("--trials, --threads and --heartbeat-timeout-ms must be positive");
  }
  std::vector<int> counts;
  std::stringstream list(flags.Get("agents", "1000,10000"));
  for (std::string item; std::getline(list, item, ',');) counts.push_back(std::stoi(item));
  const int most = *std::max_element(counts.begin(), counts.end());
  RaiseFdLimit(static_cast<uint64_t>(most) * 2 + 4096);
  std::printf("node loss -> every survivor holds the next epoch's assignment (agent channel, loopback)%s\n",
              in_place ? ", recovering in place" : "");
  std::string json = std::string("{\"benchmark\": \"elastic\", \"in_place\": ") + (in_place ? "true" : "false") +
                     ", \"runs\": [";
  int rc = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const int n = counts[i];
    if (n <= trials) throw std::invalid_argument("--agents must be above --trials");
    std::vector<Trial> runs = RunAgents(n, trials, threads, heartbeat_timeout_ms, in_place);
    if (runs.empty()) {
      rc = 1;
      continue;
    }
    std::vector<double> s;
    std::string each;
    double cpu = 0;
    for (const Trial& t : runs) {
      s.push_back(t.seconds);
      cpu += t.coordinator_cpu;
      char buf[32];
      std::snprintf(buf, sizeof buf, "%s%.4f", each.empty() ? "" : ", ", t.seconds);
      each += buf;
    }
    std::sort(s.begin(), s.end());
    const double median = s[s.size() / 2], worst = s.back();
    std::printf(
        "%6d agents: %d losses; next epoch held by every survivor after median %.4f s, max %.4f s "
        "(each: %s); coordinator CPU %.4f s per loss\n",
        n, trials, median, worst, each.c_str(), cpu / static_cast<double>(runs.size()));
    char row[256];
    std::snprintf(
        row, sizeof row,
        "%s{\"agents\": %d, \"losses\": %d, \"median_s\": %.4f, \"max_s\": %.4f, \"cpu_per_loss_s\": %.4f}",
        i ? ", " : "", n, trials, median, worst, cpu / static_cast<double>(runs.size()));
    json += row;
    std::fflush(stdout);
  }
  std::printf("%s]}\n", json.c_str());
  return rc;
}

}  // namespace distrun::bench
