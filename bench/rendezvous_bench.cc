// `distrun-bench rendezvous --agents N[,N...]`: N simulated agents rendezvous at a real coordination
// service over gRPC on loopback, then pass one barrier.
//
// The service runs in a process of its own (coordinator_process.h), so its memory and CPU are measured
// apart. The agents live in this process and do on the wire what runtime/agent/agent.cc does: open the
// liveness stream (token in the metadata, first message names the node and joins: 8 device tokens, one
// worker), and then wait at barrier "bench" over every worker. They heartbeat as real agents of a job of that
// many nodes do with distrun's default --heartbeat-timeout of 10 s (runtime/agent/agent.h HeartbeatInterval:
// every 1 s up to 2,000 nodes, 3.3 s at 10,000), or every --heartbeat-ms (0: never), and keep reading the
// stream's answers;
// --heartbeat-timeout-ms is the coordinator's. Three simulations (--client):
// - framed (the default): the agent channel, as distrun's agents on other nodes speak it
//   (runtime/transport/agent_channel.h), on epoll loops (framed_agents.h): one connection per agent, the join
//   in the first liveness message, the barrier as a call on the same connection.
// - raw: gRPC over HTTP/2 written by hand on epoll loops (h2_agents.h): ~80 us of CPU per agent with a
//   connection each, nearly all of it the kernel's loopback TCP (~30 us at 10 agents per connection), so
//   that the coordinator is what is measured. The join travels in the stream's first message, as Agent
//   sent it before the agent channel, and its answer comes back on the stream.
// - grpc: state machines on gRPC's asynchronous client API, ~500 us of CPU per agent (gRPC's per-channel
//   machinery, and Debian's gRPC checks every completion-queue event against every outstanding tag). They
//   wait for the stream's first answer and then call Join (the agent's way before it joined on its
//   stream); headers are corked into the first message.
//
// Connections: a real agent is its own process with its own connection. Here each group of
// --agents-per-connection agents shares one connection (grpc: one channel with a local subchannel pool, so
// gRPC does not merge the channels; raw: one socket, each agent on streams of its own; framed: one socket,
// each message naming its node); 1 is the real layout. Loopback allows about 28,000 connections to one port
// (the ephemeral port range) and each process at most its descriptor limit, so larger runs must share.

#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "coordinator_process.h"
#include "flags.h"
#include "framed_agents.h"
#include "h2_agents.h"
#include "proc_stats.h"
#include "runtime/agent/agent.h"
#include "runtime/distrun.grpc.pb.h"

namespace distrun::bench {
namespace {

using Stream = grpc::ClientAsyncReaderWriter<v1::AgentHeartbeat, v1::JobEvent>;

struct SimAgent;
enum class Op { kWrite, kRead, kJoin, kBarrier, kFinish, kCount };
struct Tag {
  SimAgent* agent;
  Op op;
};

struct SimAgent {
  int rank = 0;
  v1::Coordination::Stub* stub = nullptr;
  grpc::CompletionQueue* cq = nullptr;
  std::unique_ptr<grpc::ClientContext> stream_ctx;
  std::unique_ptr<Stream> stream;
  v1::AgentHeartbeat hello;
  v1::JobEvent event;
  std::unique_ptr<grpc::ClientContext> call_ctx;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::Assignment>> join;
  v1::Assignment assignment;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::BarrierResponse>> barrier;
  v1::BarrierResponse passed;
  grpc::Status call_status;
  grpc::Status stream_status;
  std::atomic<bool> writing{false};     // one write at a time on a stream
  std::atomic<bool> ready{false};       // the first message went out: heartbeats may follow
  std::atomic<int> heartbeat_slot{-1};  // chosen when ready: the first heartbeat one interval later
  bool answered = false;                // touched by the stream's read completions only
  Tag tags[static_cast<int>(Op::kCount)];
};

struct Run {
  std::string client = "framed";  // or "raw", "grpc"
  int agents = 0;
  int per_connection = 1;
  int threads = 2;
  int heartbeat_ms = 1000;
  int hold_s = 0;
  int heartbeat_timeout_ms = 10'000;  // the coordinator's; distrun's default --heartbeat-timeout
  std::string perf_file;
};

using Progress = AgentProgress;

std::string Describe(const grpc::Status& s) {
  return std::to_string(static_cast<int>(s.error_code())) + " " + s.error_message();
}

// The --client grpc simulation.
class GrpcAgents {
 public:
  GrpcAgents(const Run& run, const std::string& address) : run_(run), address_(address) {
    const int connections = (run.agents + run.per_connection - 1) / run.per_connection;
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);  // as GrpcClient does
    grpc::ChannelArguments args;
    // As runtime/transport/grpc_client.cc configures an agent's channel.
    args.SetMaxReceiveMessageSize(4 << 20);
    args.SetMaxSendMessageSize(4 << 20);
    args.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 20'000);
    // Each channel its own connection, as if each were its own process.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    // An address, not a name: the agents skip the DNS resolver, which only costs this process CPU
    // (a real agent pays it on its own host); what reaches the coordinator is the same.
    const std::string target = "ipv4:" + address;
    for (int i = 0; i < connections; ++i) {
      channels_.push_back(grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
      stubs_.push_back(v1::Coordination::NewStub(channels_.back()));
    }
    for (int i = 0; i < run.threads; ++i) cqs_.push_back(std::make_unique<grpc::CompletionQueue>());
    agents_.reserve(static_cast<size_t>(run.agents));
    for (int i = 0; i < run.agents; ++i) {
      auto a = std::make_unique<SimAgent>();
      a->rank = i;
      a->stub = stubs_[static_cast<size_t>(i / run.per_connection)].get();
      a->cq = cqs_[static_cast<size_t>(i % run.threads)].get();
      a->hello.set_node_rank(i);
      for (int op = 0; op < static_cast<int>(Op::kCount); ++op)
        a->tags[op] = Tag{a.get(), static_cast<Op>(op)};
      agents_.push_back(std::move(a));
    }
    for (auto& cq : cqs_) pollers_.emplace_back([this, q = cq.get()] { Poll(q); });
  }

  ~GrpcAgents() {
    StopHeartbeats();
    for (auto& cq : cqs_) cq->Shutdown();
    for (auto& t : pollers_) t.join();
  }

  // Starts every agent; returns at once.
  void Start() {
    start_ = MonotonicSeconds();
    for (auto& a : agents_) {
      a->stream_ctx = std::make_unique<grpc::ClientContext>();
      a->stream_ctx->AddMetadata("x-distrun-token", kBenchToken);
      a->stream_ctx->set_wait_for_ready(true);
      a->stream_ctx->set_initial_metadata_corked(true);
      // Corked: no start tag; the headers leave with the first message.
      a->stream = a->stub->AsyncLiveness(a->stream_ctx.get(), a->cq, nullptr);
      a->writing = true;
      a->stream->Write(a->hello, &a->tags[static_cast<int>(Op::kWrite)]);
    }
    if (run_.heartbeat_ms > 0) heartbeat_ = std::thread([this] { HeartbeatLoop(); });
  }

  // Waits until every agent passed the barrier (or one failed); false on failure or timeout.
  bool WaitPassed(double timeout_s) {
    std::unique_lock lock(progress_.mu);
    progress_.cv.wait_for(lock, std::chrono::duration<double>(timeout_s),
                          [this] { return progress_.passed == run_.agents || progress_.failed > 0; });
    return progress_.passed == run_.agents;
  }

  // After the coordinator ended the streams.
  bool WaitFinished(double timeout_s) {
    std::unique_lock lock(progress_.mu);
    return progress_.cv.wait_for(lock, std::chrono::duration<double>(timeout_s),
                                 [this] { return progress_.finished == run_.agents; });
  }

  void StopHeartbeats() {
    {
      std::lock_guard lock(hb_mu_);
      stopping_ = true;
    }
    hb_cv_.notify_all();
    if (heartbeat_.joinable()) heartbeat_.join();
  }

  Progress& progress() { return progress_; }
  int connections() const { return static_cast<int>(channels_.size()); }

 private:
  void Poll(grpc::CompletionQueue* cq) {
    void* tag = nullptr;
    bool ok = false;
    while (cq->Next(&tag, &ok)) {
      if (tag != nullptr) Handle(*static_cast<Tag*>(tag), ok);
    }
  }

  void Fail(const std::string& what) {
    std::lock_guard lock(progress_.mu);
    if (progress_.failed++ == 0) progress_.first_error = what;
    progress_.cv.notify_all();
  }

  void Handle(Tag& tag, bool ok) {
    SimAgent& a = *tag.agent;
    switch (tag.op) {
      case Op::kWrite:
        if (!a.ready.load()) {
          if (ok) {
            a.heartbeat_slot = (heartbeat_slot_.load() + kHeartbeatSlots - 1) % kHeartbeatSlots;
            a.ready = true;
            a.stream->Read(&a.event, &a.tags[static_cast<int>(Op::kRead)]);
          } else {  // the stream never opened
            a.stream->Finish(&a.stream_status, &a.tags[static_cast<int>(Op::kFinish)]);
            Fail("node " + std::to_string(a.rank) + ": the liveness stream did not open");
          }
        }
        a.writing = false;
        break;
      case Op::kRead:
        if (!ok) {
          a.stream->Finish(&a.stream_status, &a.tags[static_cast<int>(Op::kFinish)]);
          break;
        }
        if (!a.answered) {
          a.answered = true;
          Count(&Progress::answered, &Progress::answered_at);
          StartJoin(a);
        } else {
          progress_.heartbeats_answered.fetch_add(1, std::memory_order_relaxed);
        }
        a.stream->Read(&a.event, &a.tags[static_cast<int>(Op::kRead)]);
        break;
      case Op::kJoin:
        if (!ok || !a.call_status.ok()) {
          Fail("node " + std::to_string(a.rank) + " Join: " + Describe(a.call_status));
          break;
        }
        Count(&Progress::joined, &Progress::joined_at);
        StartBarrier(a);
        break;
      case Op::kBarrier:
        if (!ok || !a.call_status.ok()) {
          Fail("node " + std::to_string(a.rank) + " Barrier: " + Describe(a.call_status));
          break;
        }
        a.call_ctx.reset();
        a.join.reset();
        a.barrier.reset();
        Count(&Progress::passed, &Progress::passed_at);
        break;
      case Op::kFinish: {
        std::lock_guard lock(progress_.mu);
        ++progress_.finished;
        progress_.cv.notify_all();
        break;
      }
      case Op::kCount:
        break;
    }
  }

  void Count(int Progress::*counter, double Progress::*last_at) {
    std::lock_guard lock(progress_.mu);
    if (++(progress_.*counter) == run_.agents) {
      progress_.*last_at = MonotonicSeconds() - start_;
      progress_.cv.notify_all();
    }
  }

  static void PrepareCall(SimAgent& a, std::chrono::seconds timeout) {
    a.call_ctx = std::make_unique<grpc::ClientContext>();
    a.call_ctx->AddMetadata("x-distrun-token", kBenchToken);
    a.call_ctx->set_wait_for_ready(true);
    a.call_ctx->set_deadline(std::chrono::system_clock::now() + timeout);
  }

  void StartJoin(SimAgent& a) {
    v1::JoinRequest req;
    req.set_node_rank(a.rank);
    req.set_num_nodes(run_.agents);
    req.set_host("node" + std::to_string(a.rank));
    req.set_local_workers(1);
    for (int d = 0; d < 8; ++d) req.add_device_tokens(std::to_string(d));
    req.set_run_id("bench");
    req.set_proposed_master_port(29500);
    PrepareCall(a, std::chrono::seconds(3600));
    a.join = a.stub->AsyncJoin(a.call_ctx.get(), req, a.cq);
    a.join->Finish(&a.assignment, &a.call_status, &a.tags[static_cast<int>(Op::kJoin)]);
  }

  void StartBarrier(SimAgent& a) {
    v1::BarrierRequest req;
    req.set_name("bench");
    req.set_process_id(a.assignment.rank_offset());
    req.set_count(0);
    req.set_timeout_ms(3'600'000);
    PrepareCall(a, std::chrono::seconds(3600));
    a.barrier = a.stub->AsyncBarrier(a.call_ctx.get(), req, a.cq);
    a.barrier->Finish(&a.passed, &a.call_status, &a.tags[static_cast<int>(Op::kBarrier)]);
  }

  // Spreads the agents' heartbeats over the interval, as independent processes would.
  // Each agent's first heartbeat is one interval after its stream opened, as in Agent::HeartbeatLoop: it
  // belongs to the slot served just before it became ready.
  void HeartbeatLoop() {
    const auto step = std::chrono::microseconds(run_.heartbeat_ms * 1000 / kHeartbeatSlots);
    auto next = std::chrono::steady_clock::now() + step;
    std::unique_lock lock(hb_mu_);
    while (!hb_cv_.wait_until(lock, next, [this] { return stopping_; })) {
      next += step;
      const int slot = heartbeat_slot_.load();
      for (auto& agent : agents_) {
        SimAgent& a = *agent;
        if (a.ready.load() && a.heartbeat_slot.load() == slot && !a.writing.exchange(true)) {
          a.stream->Write(a.hello, &a.tags[static_cast<int>(Op::kWrite)]);
        }
      }
      heartbeat_slot_ = (slot + 1) % kHeartbeatSlots;
    }
  }

  Run run_;
  std::string address_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<v1::Coordination::Stub>> stubs_;
  std::vector<std::unique_ptr<grpc::CompletionQueue>> cqs_;
  std::vector<std::unique_ptr<SimAgent>> agents_;
  std::vector<std::thread> pollers_;
  Progress progress_;
  double start_ = 0;

  static constexpr int kHeartbeatSlots = 100;  // each interval is cut into slots to spread heartbeats
  std::atomic<int> heartbeat_slot_{0};         // the slot the heartbeat thread serves next
  std::mutex hb_mu_;
  std::condition_variable hb_cv_;
  bool stopping_ = false;
  std::thread heartbeat_;
};

// perf, attached to the coordinator for the measured phase only.
class PerfRecorder {
 public:
  PerfRecorder(const std::string& file, pid_t target) {
    if (file.empty()) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      std::string p = std::to_string(target);
      ::execlp("perf", "perf", "record", "-q", "--call-graph", "dwarf,16384", "-o", file.c_str(), "-p",
               p.c_str(), nullptr);
      ::_exit(127);
    }
    ::usleep(300'000);  // perf needs a moment to attach
  }
  ~PerfRecorder() { Stop(); }
  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGINT);  // our own child, by its pid
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

SimAgentsOptions SimOptions(const Run& run, const std::string& address) {
  SimAgentsOptions o;
  o.address = address;
  o.token = kBenchToken;
  o.agents = run.agents;
  o.per_connection = run.per_connection;
  o.threads = run.threads;
  o.heartbeat_ms = run.heartbeat_ms;
  return o;
}

// One rendezvous of run.agents agents made by make_agents(address) (FramedAgents, H2Agents or GrpcAgents),
// and its rows.
template <typename MakeAgents>
int RunOnce(const Run& run, MakeAgents make_agents) {
  CoordinatorOptions co;
  co.nodes = run.agents;
  co.heartbeat_timeout_ms = run.heartbeat_timeout_ms;
  CoordinatorProcess coordinator(co);
  ::usleep(200'000);  // let the child settle before its baseline
  MemoryStats base = coordinator.Memory();
  HeapStats heap_base = coordinator.Heap();
  double cpu_before = coordinator.CpuSeconds();
  rusage self_before{};
  ::getrusage(RUSAGE_SELF, &self_before);

  double created = MonotonicSeconds();
  auto agents = make_agents(coordinator.address());
  auto& sim = *agents;
  double create_s = MonotonicSeconds() - created;
  PerfRecorder perf(run.perf_file, coordinator.pid());
  sim.Start();
  bool passed = sim.WaitPassed(3600);
  perf.Stop();
  double coord_cpu = coordinator.CpuSeconds() - cpu_before;
  rusage self_after{};
  ::getrusage(RUSAGE_SELF, &self_after);
  auto tv = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
  };
  double client_cpu =
      tv(self_after.ru_utime) + tv(self_after.ru_stime) - tv(self_before.ru_utime) - tv(self_before.ru_stime);
  MemoryStats after = coordinator.Memory();
  HeapStats heap_after = coordinator.Heap();

  Progress& p = sim.progress();
  if (!passed) {
    // The coordinator's shutdown ends every pending call and stream, so the agents' queues can drain.
    sim.StopHeartbeats();
    coordinator.Stop();
    sim.WaitFinished(120);
    std::lock_guard lock(p.mu);
    std::fprintf(stderr,
                 "rendezvous of %d agents (client %s) failed: %d answered, %d joined, %d passed, %d failed; "
                 "first: %s\n",
                 run.agents, run.client.c_str(), p.answered, p.joined, p.passed, p.failed,
                 p.first_error.c_str());
    return 1;
  }
  double per_agent_kb = static_cast<double>(after.rss_kb - base.rss_kb) / static_cast<double>(run.agents);
  std::printf(
      "%6d agents, %5d connections: streams answered %.3f s, joined %.3f s, barrier passed %.3f s "
      "(%s in %.3f s)\n",
      run.agents, sim.connections(), p.answered_at, p.joined_at, p.passed_at,
      run.client == "grpc" ? "channels made" : "agents set up", create_s);
  double heap_per_agent_kb =
      static_cast<double>(heap_after.in_use - heap_base.in_use) / 1024 / static_cast<double>(run.agents);
  std::printf(
      "        coordinator RSS %.1f MB before, %.1f MB after (peak %.1f MB, anon %.1f MB): %.2f KB per "
      "agent (heap in use %.2f KB per agent); CPU: coordinator %.2f s, agents %.2f s\n",
      static_cast<double>(base.rss_kb) / 1024, static_cast<double>(after.rss_kb) / 1024,
      static_cast<double>(after.hwm_kb) / 1024, static_cast<double>(after.anon_kb) / 1024, per_agent_kb,
      heap_per_agent_kb, coord_cpu, client_cpu);
  std::fflush(stdout);  // someone may be waiting for this line to attach a tool during --hold-s

  // Steady state: every agent heartbeating; what that costs the coordinator.
  double hold_cpu_per_s = 0;
  uint64_t acks = 0;
  if (run.hold_s > 0) {
    uint64_t acks_before = p.heartbeats_answered.load();
    double c0 = coordinator.CpuSeconds(), t0 = MonotonicSeconds();
    ::sleep(static_cast<unsigned>(run.hold_s));
    hold_cpu_per_s = (coordinator.CpuSeconds() - c0) / (MonotonicSeconds() - t0);
    acks = p.heartbeats_answered.load() - acks_before;
    std::printf(
        "        holding %d s with heartbeats every %d ms: coordinator uses %.3f cores, %.0f "
        "heartbeats answered per second\n",
        run.hold_s, run.heartbeat_ms, hold_cpu_per_s, static_cast<double>(acks) / run.hold_s);
  }

  sim.StopHeartbeats();
  double shutdown_s = coordinator.Stop();
  bool finished = sim.WaitFinished(120);
  std::printf("        coordinator shutdown %.3f s%s\n", shutdown_s,
              finished ? "" : "; some streams did not end");
  std::printf(
      "{\"bench\": \"rendezvous\", \"client\": \"%s\", \"agents\": %d, \"seconds\": %.4f, "
      "\"connections\": %d, \"answered_s\": %.4f, "
      "\"joined_s\": %.4f, \"barrier_s\": %.4f, \"coordinator_rss_base_kb\": %lld, "
      "\"coordinator_rss_kb\": %lld, \"coordinator_hwm_kb\": %lld, \"rss_per_agent_kb\": %.3f, "
      "\"heap_per_agent_kb\": %.3f, "
      "\"coordinator_cpu_s\": %.3f, \"agents_cpu_s\": %.3f, \"heartbeat_ms\": %d, \"hold_cores\": %.4f, "
      "\"shutdown_s\": %.4f}\n",
      run.client.c_str(), run.agents, p.passed_at, sim.connections(), p.answered_at, p.joined_at, p.passed_at,
      static_cast<long long>(base.rss_kb), static_cast<long long>(after.rss_kb),
      static_cast<long long>(after.hwm_kb), per_agent_kb, heap_per_agent_kb, coord_cpu, client_cpu,
      run.heartbeat_ms, hold_cpu_per_s, shutdown_s);
  std::fflush(stdout);
  return finished ? 0 : 1;
}

}  // namespace

int RendezvousBench(const Flags& flags) {
  Run run;
  run.client = flags.Get("client", "framed");
  run.per_connection = static_cast<int>(flags.Int("agents-per-connection", 1));
  run.threads = static_cast<int>(flags.Int("threads", 2));
  // By default what distrun does: its default --heartbeat-timeout (10 s), and the agents' interval for a
  // job of that many nodes (runtime/agent/agent.h), set per run below.
  run.heartbeat_ms = static_cast<int>(flags.Int("heartbeat-ms", -1));
  run.hold_s = static_cast<int>(flags.Int("hold-s", 0));
  run.perf_file = flags.Get("perf", "");
  run.heartbeat_timeout_ms = static_cast<int>(flags.Int("heartbeat-timeout-ms", 10'000));
  const bool agent_heartbeats = run.heartbeat_ms < 0;
  if (run.per_connection < 1 || run.threads < 1 || run.heartbeat_timeout_ms < 1) {
    throw std::invalid_argument("--agents-per-connection and --threads must be positive");
  }
  if (run.client != "framed" && run.client != "raw" && run.client != "grpc") {
    throw std::invalid_argument(
        "--client is framed (the agent channel, the default), raw (hand-written "
        "HTTP/2) or grpc, not '" +
        run.client + "'");
  }
  std::vector<int> counts;
  std::stringstream list(flags.Get("agents", "10000"));
  for (std::string item; std::getline(list, item, ',');) counts.push_back(std::stoi(item));
  // Two descriptors per connection would do; the rest is gRPC's own (eventfds, epoll) and stdio.
  int most = *std::max_element(counts.begin(), counts.end());
  uint64_t limit = RaiseFdLimit(static_cast<uint64_t>(most / run.per_connection) * 2 + 4096);
  std::printf("descriptor limit %llu; client %s, threads %d; heartbeat timeout %d ms\n",
              static_cast<unsigned long long>(limit), run.client.c_str(), run.threads,
              run.heartbeat_timeout_ms);
  int rc = 0;
  for (int n : counts) {
    if (n < 1) throw std::invalid_argument("--agents needs positive counts");
    run.agents = n;
    if (agent_heartbeats) {
      run.heartbeat_ms =
          static_cast<int>(HeartbeatInterval(std::chrono::milliseconds(run.heartbeat_timeout_ms), n).count());
    }
    std::printf("%d agents heartbeat every %d ms\n", n, run.heartbeat_ms);
    if (run.client == "framed") {
      rc |= RunOnce(run, [&](const std::string& address) {
        return std::make_unique<FramedAgents>(SimOptions(run, address));
      });
    } else if (run.client == "raw") {
      rc |= RunOnce(run, [&](const std::string& address) {
        return std::make_unique<H2Agents>(SimOptions(run, address));
      });
    } else {
      rc |= RunOnce(run,
                    [&](const std::string& address) { return std::make_unique<GrpcAgents>(run, address); });
    }
  }
  return rc;
}

}  // namespace distrun::bench
