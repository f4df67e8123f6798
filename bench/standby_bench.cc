// distrun-bench standby [--sets N]: what write-through to the standby (DESIGN §4.5) adds to a worker's
// key-value set. An elastic job of two nodes: the coordinator in a process of its own (as node 0's distrun
// hosts it), two agents on the agent channel (node 1, on another "host", is the epoch's standby), and a
// worker's client over gRPC. The worker sets keys one after another, alternating in blocks of 50 between
// an epoch's key (answered at once) and a job's key (answered once the standby acknowledged it); the
// latencies of both kinds are printed side by side. All on loopback: the difference is the standby's
// round trip and its apply, not a network's.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "coordinator_process.h"
#include "flags.h"
#include "runtime/agent/agent.h"
#include "runtime/transport/grpc_client.h"

namespace distrun::bench {
namespace {

std::unique_ptr<Agent> MakeAgent(const std::string& address, int node) {
  AgentConfig c;
  c.coordinator_address = address;
  c.token = kBenchToken;
  c.join.node_rank = node;
  c.join.num_nodes = 2;
  c.join.host = "host" + std::to_string(node);
  c.join.local_workers = 1;
  c.initialization_timeout = std::chrono::seconds(20);
  c.heartbeat_interval = std::chrono::milliseconds(1000);
  c.heartbeat_timeout = std::chrono::seconds(100);
  return std::make_unique<Agent>(c);
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

}  // namespace

int StandbyBench(const Flags& flags) {
  const int sets = std::max(100, static_cast<int>(flags.Int("sets", 4000)));
  CoordinatorOptions co;
  co.nodes = 2;
  co.min_nodes = 1;
  CoordinatorProcess coordinator(co);
  auto a0 = MakeAgent(coordinator.address(), 0);
  auto a1 = MakeAgent(coordinator.address(), 1);
  std::vector<std::future<Status>> joins;
  NodeAssignment assignments[2];
  joins.push_back(std::async(std::launch::async, [&] { return a0->Join(0, &assignments[0]); }));
  joins.push_back(std::async(std::launch::async, [&] { return a1->Join(0, &assignments[1]); }));
  for (auto& j : joins) {
    Status s = j.get();
    if (!s.ok()) {
      std::fprintf(stderr, "distrun-bench standby: rendezvous failed: %s\n", s.message.c_str());
      return 1;
    }
  }
  if (assignments[0].standby_agent != 1) {
    std::fprintf(stderr, "distrun-bench standby: node 1 is not the standby\n");
    return 1;
  }
  GrpcClientConfig cc;
  cc.address = coordinator.address();
  cc.token = kBenchToken;
  GrpcClient worker(cc);
  std::vector<double> epoch_us;
  std::vector<double> job_us;
  const std::string value(32, 'v');
  for (int i = 0; i < sets; ++i) {
    const bool job = (i / 50) % 2 == 1;
    const std::string key = (job ? "job/k" : "epoch/k") + std::to_string(i % 64);
    auto start = std::chrono::steady_clock::now();
    Status s = worker.KvSet(key, value);
    auto us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    if (!s.ok()) {
      std::fprintf(stderr, "distrun-bench standby: set failed: %s\n", s.message.c_str());
      return 1;
    }
    if (i >= 100) (job ? job_us : epoch_us).push_back(us);  // the first blocks warm the connections
  }
  std::optional<ServiceSnapshot> copy = a1->StandbyCopy();
  if (!copy || copy->job_keys.size() != 64) {
    std::fprintf(stderr, "distrun-bench standby: the standby holds %zu job keys, not 64\n",
                 copy ? copy->job_keys.size() : size_t{0});
    return 1;
  }
  std::printf("distrun-bench standby: %d sets, 32-byte values, loopback; latency in microseconds\n", sets);
  std::printf("%-34s %8s %8s %8s %8s\n", "key", "n", "p50", "p90", "p99");
  auto row = [](const char* name, const std::vector<double>& v) {
    std::printf("%-34s %8zu %8.1f %8.1f %8.1f\n", name, v.size(), Percentile(v, 0.5), Percentile(v, 0.9),
                Percentile(v, 0.99));
  };
  row("epoch's key (no write-through)", epoch_us);
  row("job's key (held for the standby)", job_us);
  std::printf("added by the standby: p50 %+.1f us, p99 %+.1f us\n",
              Percentile(job_us, 0.5) - Percentile(epoch_us, 0.5),
              Percentile(job_us, 0.99) - Percentile(epoch_us, 0.99));
  return 0;
}

}  // namespace distrun::bench
