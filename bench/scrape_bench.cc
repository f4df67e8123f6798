// `distrun-bench scrape [--ranks N[,N...]] [--scrapes K] [--agents 1] [--seconds S]`: what --metrics-address
// costs node 0 with N ranks (issue 48's goal: a scrape of 10,000 ranks under 100 ms, no effect on the job's
// heartbeats).
//
// --agents 1: the coordinator in a process of its own with its ObserveServer (coordinator_process.h), N/8
// simulated agents on the agent channel (framed_agents.h) heartbeating at the pace distrun's agents keep for
// a job of that size, every heartbeat carrying its node's progress (8 ranks' steps and two sections'
// medians); for S seconds each: nothing else, then a scrape of /metrics every second (Prometheus at 1 s),
// then scrapes back to back. Measured: the heartbeats' round trips at the agents (median, 99th percentile,
// slowest), node 0's CPU (cores), the scrapes' latency.
//
// Without it (the default):
// A real coordination service with N/8 nodes of 8 ranks each, joined and running, every node's progress
// report carrying its ranks' steps and two sections' medians (as the straggler watch then judges them),
// served by the real ObserveServer on loopback. Measured: the latency of GET /metrics and GET /job.json over
// HTTP (median and slowest of K), the bodies' sizes, node 0's CPU per scrape (this process's, the client's
// reading included), and how long one scrape holds the service's lock (CoordinationService::Overview:
// every heartbeat, report and key-value call waits behind it), what that does to heartbeats (a thread
// calling CoordinationService::Heartbeat every millisecond, as node 0's transport does for each arriving
// heartbeat, timed while nothing else runs and while the scrapes run back to back), and one straggler
// window's judgement (StragglerWatch::Evaluate) of N ranks.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "coordinator_process.h"
#include "flags.h"
#include "framed_agents.h"
#include "runtime/agent/agent.h"
#include "runtime/metrics/observe_server.h"
#include "runtime/service/service.h"
#include "runtime/service/straggler_watch.h"

namespace distrun::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// The whole reply to GET `path`; empty on failure.
std::string Get(int port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string reply;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string request = "GET " + path + " HTTP/1.1\r\nHost: bench\r\n\r\n";
    if (::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size())) {
      char buf[1 << 16];
      for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) reply.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return reply;
}

struct Timing {
  double median_ms = 0;
  double max_ms = 0;
  size_t bytes = 0;
  double cpu_ms = 0;  // per scrape
};

Timing Scrape(int port, const std::string& path, int scrapes) {
  std::vector<double> ms;
  Timing t;
  const double cpu0 = CpuSeconds();
  for (int i = 0; i < scrapes; ++i) {
    const auto start = Clock::now();
    const std::string reply = Get(port, path);
    ms.push_back(Ms(Clock::now() - start));
    t.bytes = reply.size();
    if (reply.rfind("HTTP/1.1 200", 0) != 0) throw std::runtime_error("GET " + path + " failed");
  }
  t.cpu_ms = (CpuSeconds() - cpu0) * 1000 / scrapes;
  std::sort(ms.begin(), ms.end());
  t.median_ms = ms[ms.size() / 2];
  t.max_ms = ms.back();
  return t;
}

// Heartbeats on `streams` (one a millisecond, round robin) while `busy` runs: their latency's median and
// slowest, in ms.
template <typename Busy>
std::pair<double, double> HeartbeatLatency(CoordinationService& service, const std::vector<uint64_t>& streams,
                                           Busy busy) {
  std::atomic<bool> done = false;
  std::vector<double> ms;
  std::thread beats([&] {
    for (size_t i = 0; !done; ++i) {
      const auto start = Clock::now();
      service.Heartbeat(streams[i % streams.size()]);
      ms.push_back(Ms(Clock::now() - start));
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  busy();
  done = true;
  beats.join();
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.back()};
}

struct Phase {
  double p50 = 0, p99 = 0, max = 0;  // heartbeat round trips, ms
  size_t heartbeats = 0;
  double cores = 0;      // node 0's CPU seconds per second
  double scrape_ms = 0;  // median scrape latency; 0: none
  int scrapes = 0;
};

// Runs `scrape` (or nothing) for `seconds` while heartbeats are timed.
template <typename Scrape>
Phase Measure(SimAgents& sim, CoordinatorProcess& coordinator, double seconds, Scrape scrape) {
  AgentProgress& p = sim.progress();
  {
    std::lock_guard lock(p.heartbeat_mu);
    p.heartbeat_ms.clear();
  }
  p.record_heartbeats = true;
  const double cpu0 = coordinator.CpuSeconds();
  const auto start = Clock::now();
  std::vector<double> scrape_ms;
  while (Ms(Clock::now() - start) < seconds * 1000) {
    if (!scrape(scrape_ms)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Phase out;
  out.cores = (coordinator.CpuSeconds() - cpu0) / (Ms(Clock::now() - start) / 1000);
  p.record_heartbeats = false;
  std::vector<float> ms;
  {
    std::lock_guard lock(p.heartbeat_mu);
    ms = p.heartbeat_ms;
  }
  std::sort(ms.begin(), ms.end());
  out.heartbeats = ms.size();
  if (!ms.empty()) {
    out.p50 = ms[ms.size() / 2];
    out.p99 = ms[std::min(ms.size() - 1, ms.size() * 99 / 100)];
    out.max = ms.back();
  }
  std::sort(scrape_ms.begin(), scrape_ms.end());
  out.scrapes = static_cast<int>(scrape_ms.size());
  if (!scrape_ms.empty()) out.scrape_ms = scrape_ms[scrape_ms.size() / 2];
  return out;
}

int AgentsScrape(int ranks, double seconds) {
  constexpr int kPerNode = 8;
  const int nodes = (ranks + kPerNode - 1) / kPerNode;
  CoordinatorOptions co;
  co.nodes = nodes;
  co.heartbeat_timeout_ms = 10'000;  // distrun's default
  co.metrics_port = 0;
  // The child picks no port of its own for the metrics: one free now is given to it.
  {
    ListeningSocket probe = ListeningSocket::Open("127.0.0.1", 0);
    co.metrics_port = probe.port();
  }
  CoordinatorProcess coordinator(co);
  SimAgentsOptions o;
  o.address = coordinator.address();
  o.token = kBenchToken;
  o.agents = nodes;
  o.threads = 1;
  o.progress_ranks = kPerNode;
  o.heartbeat_ms =
      static_cast<int>(HeartbeatInterval(std::chrono::milliseconds(co.heartbeat_timeout_ms), nodes).count());
  FramedAgents sim(o);
  sim.Start();
  if (!sim.WaitPassed(600)) {
    std::fprintf(stderr, "scrape: the rendezvous of %d agents failed: %s\n", nodes,
                 sim.progress().first_error.c_str());
    return 1;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(o.heartbeat_ms + 500));  // every node reported once
  const int port = co.metrics_port;
  const Phase quiet = Measure(sim, coordinator, seconds, [](std::vector<double>&) { return false; });
  auto next = Clock::now();
  const Phase every_second = Measure(sim, coordinator, seconds, [&](std::vector<double>& ms) {
    if (Clock::now() < next) return false;
    next += std::chrono::seconds(1);
    const auto start = Clock::now();
    if (Get(port, "/metrics").rfind("HTTP/1.1 200", 0) != 0) throw std::runtime_error("GET /metrics failed");
    ms.push_back(Ms(Clock::now() - start));
    return true;
  });
  const Phase back_to_back = Measure(sim, coordinator, seconds, [&](std::vector<double>& ms) {
    const auto start = Clock::now();
    if (Get(port, "/metrics").rfind("HTTP/1.1 200", 0) != 0) throw std::runtime_error("GET /metrics failed");
    ms.push_back(Ms(Clock::now() - start));
    return true;
  });
  const std::string body = Get(port, "/metrics");
  std::printf("%d ranks (%d simulated agents, heartbeat every %d ms, /metrics %zu bytes):\n", ranks, nodes,
              o.heartbeat_ms, body.size());
  const auto line = [](const char* what, const Phase& p) {
    std::printf("  %-28s heartbeat round trip p50 %6.2f ms, p99 %6.2f, max %7.2f (%zu); node 0 %.3f cores",
                what, p.p50, p.p99, p.max, p.heartbeats, p.cores);
    if (p.scrapes > 0) std::printf("; GET /metrics %.1f ms median (%d)", p.scrape_ms, p.scrapes);
    std::printf("\n");
  };
  line("no scrape", quiet);
  line("a scrape every second", every_second);
  line("scrapes back to back", back_to_back);
  std::printf(
      "{\"ranks\":%d,\"heartbeat_p99_ms\":[%.2f,%.2f,%.2f],\"heartbeat_max_ms\":[%.2f,%.2f,%.2f],"
      "\"node0_cores\":[%.3f,%.3f,%.3f],\"scrape_ms\":[%.1f,%.1f]}\n",
      ranks, quiet.p99, every_second.p99, back_to_back.p99, quiet.max, every_second.max, back_to_back.max,
      quiet.cores, every_second.cores, back_to_back.cores, every_second.scrape_ms, back_to_back.scrape_ms);
  sim.StopHeartbeats();
  return 0;
}

}  // namespace

int ScrapeBench(const Flags& flags) {
  if (flags.Int("agents", 0) != 0) {
    const std::string list = flags.Get("ranks", "1000,10000");
    const double seconds = static_cast<double>(flags.Int("seconds", 10));
    int rc = 0;
    size_t from = 0;
    while (from <= list.size() && rc == 0) {
      const size_t comma = std::min(list.find(',', from), list.size());
      rc = AgentsScrape(std::stoi(list.substr(from, comma - from)), seconds);
      from = comma + 1;
    }
    return rc;
  }
  const std::string list = flags.Get("ranks", "1000,10000");
  const int scrapes = static_cast<int>(flags.Int("scrapes", 20));
  std::string json = "[";
  size_t from = 0;
  while (from <= list.size()) {
    const size_t comma = std::min(list.find(',', from), list.size());
    const int ranks = std::stoi(list.substr(from, comma - from));
    from = comma + 1;
    constexpr int kPerNode = 8;
    const int nodes = (ranks + kPerNode - 1) / kPerNode;
    ServiceConfig c;
    c.num_nodes = nodes;
    c.run_id = "bench";
    c.heartbeat_timeout = std::chrono::hours(1);
    CoordinationService service(c);
    std::vector<uint64_t> streams;
    for (int n = 0; n < nodes; ++n) {
      uint64_t id = 0;
      service.AttachAgent(
          n, [](const JobEvent&) {}, &id);
      streams.push_back(id);
    }
    for (int n = 0; n < nodes; ++n) {
      NodeJoin j;
      j.node_rank = n;
      j.num_nodes = nodes;
      j.host = "node" + std::to_string(n);
      j.local_workers = kPerNode;
      j.run_id = "bench";
      service.Join(j, [](const Status&, const NodeAssignment&) {});
    }
    std::vector<RankSections> judged;
    for (int n = 0; n < nodes; ++n) {
      NodeProgress p;
      p.workers = kPerNode;
      for (int r = n * kPerNode; r < (n + 1) * kPerNode; ++r) {
        RankProgress rp;
        rp.rank = r;
        rp.step = 1000 + r % 7;
        rp.steps_per_second = 2.5;
        rp.pid = 10000 + r;
        p.ranks.push_back(rp);
        const double fwd = 0.100 + 0.001 * (r % 13) + (r == 7 ? 0.1 : 0);
        p.sections.push_back({r, {{"fwd", fwd}, {"bwd", 2 * fwd}}, "", -1, false, ""});
        judged.push_back({r, "node" + std::to_string(n), {{"fwd", fwd}, {"bwd", 2 * fwd}}});
      }
      service.ReportProgress(n, p);
    }
    service.Tick();  // the first straggler window

    StragglerWatch watch;
    auto start = Clock::now();
    watch.Evaluate(judged);
    const double evaluate_ms = Ms(Clock::now() - start);
    std::vector<double> overview_ms;
    for (int i = 0; i < scrapes; ++i) {
      start = Clock::now();
      JobStatusView v = service.Overview();
      overview_ms.push_back(Ms(Clock::now() - start));
    }
    std::sort(overview_ms.begin(), overview_ms.end());

    ObserveConfig oc;
    oc.host = "127.0.0.1";
    ObserveServer server(service, oc);
    const auto quiet = HeartbeatLatency(service, streams,
                                        [] { std::this_thread::sleep_for(std::chrono::milliseconds(500)); });
    Timing metrics;
    const auto scraped =
        HeartbeatLatency(service, streams, [&] { metrics = Scrape(server.port(), "/metrics", scrapes); });
    const Timing job = Scrape(server.port(), "/job.json", scrapes);
    std::printf(
        "%6d ranks: GET /metrics %6.1f ms median (slowest %6.1f), %8zu bytes, %6.1f ms CPU; GET /job.json "
        "%6.1f "
        "ms (slowest %6.1f), %8zu bytes, %6.1f ms CPU; the service's lock held %5.1f ms per scrape; a "
        "straggler window %5.1f ms; a heartbeat %.3f ms median, %.1f ms slowest (while scraped back to back: "
        "%.3f, %.1f)\n",
        ranks, metrics.median_ms, metrics.max_ms, metrics.bytes, metrics.cpu_ms, job.median_ms, job.max_ms,
        job.bytes, job.cpu_ms, overview_ms[overview_ms.size() / 2], evaluate_ms, quiet.first, quiet.second,
        scraped.first, scraped.second);
    char entry[768];
    std::snprintf(
        entry, sizeof entry,
        "%s{\"ranks\":%d,\"metrics_ms\":%.2f,\"metrics_max_ms\":%.2f,\"metrics_bytes\":%zu,"
        "\"metrics_cpu_ms\":%.2f,\"job_json_ms\":%.2f,\"job_json_bytes\":%zu,\"overview_ms\":%.2f,"
        "\"straggler_window_ms\":%.2f,\"heartbeat_ms\":[%.3f,%.2f],\"heartbeat_scraped_ms\":[%.3f,%.2f]}",
        json.size() > 1 ? "," : "", ranks, metrics.median_ms, metrics.max_ms, metrics.bytes, metrics.cpu_ms,
        job.median_ms, job.bytes, overview_ms[overview_ms.size() / 2], evaluate_ms, quiet.first, quiet.second,
        scraped.first, scraped.second);
    json += entry;
  }
  std::printf("%s]\n", json.c_str());
  return 0;
}

}  // namespace distrun::bench
