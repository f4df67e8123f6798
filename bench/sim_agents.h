#pragma once
// What `distrun-bench rendezvous`'s simulations of agents (h2_agents.h, framed_agents.h) are given and
// what they report.

#include <netinet/in.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

namespace distrun::bench {

// What simulated agents report to the benchmark; each of rendezvous_bench.cc's simulations fills one.
struct AgentProgress {
  std::mutex mu;
  std::condition_variable cv;
  int answered = 0, joined = 0, passed = 0, finished = 0, failed = 0;
  double answered_at = 0, joined_at = 0, passed_at = 0;  // seconds from the start to the last agent's
  std::string first_error;
  std::atomic<uint64_t> heartbeats_answered{0};
};

struct SimAgentsOptions {
  std::string address;  // the coordinator's, IPv4 "a.b.c.d:port"
  std::string token;    // the job token the coordinator expects
  int agents = 0;
  int per_connection = 1;   // agents sharing one connection, each on streams of its own (HTTP/2 only)
  int threads = 2;          // epoll loops; a connection and its agents belong to one
  int heartbeat_ms = 1000;  // 0: none
};

// The coordinator's address as the simulations connect to it; throws std::invalid_argument unless IPv4.
sockaddr_in ParseIpv4(const std::string& address);

}  // namespace distrun::bench
