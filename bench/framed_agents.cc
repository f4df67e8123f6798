#include "framed_agents.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "proc_stats.h"
#include "runtime/distrun.pb.h"
#include "runtime/transport/agent_frames.h"
#include "sim_loop_shell.h"

namespace distrun::bench {
namespace {

constexpr size_t kMaxMessageBytes = 4 << 20;  // as AgentChannelOptions

struct SimAgent {
  int rank = 0;
  int heartbeat_slot = -1;       // chosen at connect: the first heartbeat goes one interval later
  double heartbeat_sent_at = 0;  // MonotonicSeconds() of the last heartbeat sent; 0: none outstanding
  bool answered = false, joined = false, passed = false, finished = false, failed = false;
};

// One connection and the agents on it (one, as distrun's agents; several with --agents-per-connection, told
// apart by their node rank, which every message carries, and by their call ids).
struct Connection {
  int fd = -1;
  uint64_t key = 0;
  int first_rank = 0;
  std::span<SimAgent> agents;
  std::string out;  // bytes to send; out_sent of them went
  size_t out_sent = 0;
  FrameReader reader{kMaxMessageBytes};
  bool dirty = false;
  bool ended = false;
};

}  // namespace

struct FramedAgents::Shared {
  SimAgentsOptions options;
  sockaddr_in coordinator{};
  AgentProgress& progress;
  SimControl& control;
};

class FramedAgents::Loop final : public SimLoopShell<FramedAgents::Loop, Connection> {
 public:
  Loop(Shared& shared, int first_rank, int count)
      : SimLoopShell(shared.control), shared_(shared), in_(1 << 16) {
    agents_.resize(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) agents_[static_cast<size_t>(i)].rank = first_rank + i;
    const int per = shared_.options.per_connection;
    connections_.resize(static_cast<size_t>((count + per - 1) / per));
    for (size_t c = 0; c < connections_.size(); ++c) {
      Connection& conn = connections_[c];
      const size_t from = c * static_cast<size_t>(per);
      conn.key = SimLoopFds::kFirstKey + c;
      conn.first_rank = first_rank + static_cast<int>(from);
      conn.agents = std::span<SimAgent>(agents_).subspan(from, std::min<size_t>(per, agents_.size() - from));
    }
    join_.set_num_nodes(shared_.options.job_nodes > 0 ? shared_.options.job_nodes : shared_.options.agents);
    join_.set_local_workers(1);
    for (int d = 0; d < 8; ++d) join_.add_device_tokens(std::to_string(d));
    join_.set_run_id("bench");
    join_.set_proposed_master_port(29500);
    join_.set_recovers_in_place(shared_.options.in_place);
    hello_.mutable_hello()->set_token(shared_.options.token);
    StartThread();
  }

  ~Loop() override { StopThread(); }

 private:
  friend class SimLoopShell<Loop, Connection>;

  void Woken() { DropIfMine(shared_.control.drop_rank.load()); }

  // A lost node, as the coordinator sees one whose distrun died: its connection closes.
  void DropIfMine(int rank) {
    for (Connection& c : connections_) {
      if (c.ended || rank < c.first_rank || rank >= c.first_rank + static_cast<int>(c.agents.size()))
        continue;
      shared_.control.drop_rank = -1;
      shared_.control.dropped_at = MonotonicSeconds();
      ::close(c.fd);
      c.fd = -1;
      c.ended = true;
      for (SimAgent& a : c.agents) {  // gone on purpose: not a failure
        if (!std::exchange(a.finished, true)) shared_.progress.Finish(shared_.options.agents);
      }
    }
  }

  // ---- sending ----

  void Open(Connection& c) {
    c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c.fd < 0) return End(c, ErrnoText("socket"));
    int one = 1;
    ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // as AgentChannel does
    if (!ConnectSpread(c.fd, shared_.coordinator, c.key)) return End(c, ErrnoText("connect"));
    if (!fds_.Watch(c.fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, c.key))
      return End(c, ErrnoText("epoll_ctl"));
    c.out += kAgentChannelPreface;
    AppendFrame(hello_, &c.out);
    for (SimAgent& a : c.agents) {
      // The first liveness message names the node and joins round 0, as AgentChannel's does.
      frame_.Clear();
      auto* liveness = frame_.mutable_liveness();
      liveness->set_node_rank(a.rank);
      if (shared_.options.join_first) {
        *liveness->mutable_join() = join_;
        liveness->mutable_join()->set_node_rank(a.rank);
      }
      AppendFrame(frame_, &c.out);
      a.heartbeat_slot = slot_;
    }
    MarkDirty(c);
  }

  // The agents of this slot heartbeat. One alone on its connection skips it while a write is in progress,
  // as AgentChannel does.
  void HeartbeatSlot() {
    for (Connection& c : connections_) {
      if (c.ended || c.fd < 0 || (c.agents.size() == 1 && !c.out.empty())) continue;
      for (SimAgent& a : c.agents) {
        if (a.heartbeat_slot != slot_) continue;
        frame_.Clear();
        frame_.mutable_liveness()->set_node_rank(a.rank);
        if (shared_.options.progress_ranks > 0)
          AddProgress(a.rank, frame_.mutable_liveness()->mutable_progress());
        AppendFrame(frame_, &c.out);
        MarkDirty(c);
        a.heartbeat_sent_at = MonotonicSeconds();
      }
    }
    slot_ = (slot_ + 1) % kHeartbeatSlots;
  }

  // The node's progress as its distrun sends it: each rank's step (moving) and two sections' medians, one
  // rank in a hundred twice as slow in its forward pass.
  void AddProgress(int node, v1::NodeProgress* p) {
    const int ranks = shared_.options.progress_ranks;
    p->set_workers(ranks);
    ++steps_;
    for (int r = node * ranks; r < (node + 1) * ranks; ++r) {
      v1::RankProgress* rp = p->add_ranks();
      rp->set_rank(r);
      rp->set_step(steps_);
      rp->set_advanced_ms_ago(100);
      rp->set_reported_ms_ago(100);
      rp->set_steps_per_second(2.5);
      rp->set_pid(10'000 + r);
      v1::RankSections* s = p->add_sections();
      s->set_rank(r);
      const double fwd = r % 100 == 7 ? 0.2 : 0.1 + 0.001 * (r % 13);
      (*s->mutable_median_s())["fwd"] = fwd;
      (*s->mutable_median_s())["bwd"] = 2 * fwd;
    }
  }

  // ---- receiving ----

  // `hung_up`: the end came with this edge, so reading goes on until it is seen.
  void Receive(Connection& c, bool hung_up) {
    while (c.fd >= 0) {
      const ssize_t n = ::recv(c.fd, in_.data(), in_.size(), 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) End(c, ErrnoText("read"));
        return;
      }
      if (n == 0) return End(c, "the coordinator closed the connection");
      c.reader.Append(in_.data(), static_cast<size_t>(n));
      std::string_view bytes;
      while (!c.ended) {
        const FrameReader::Result r = c.reader.Next(&bytes);
        if (r == FrameReader::Result::kNeedMore) break;
        if (r == FrameReader::Result::kTooLarge) return End(c, "the coordinator sent an oversized frame");
        if (!answer_.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
          return End(c, "a frame that does not parse as a CoordinatorFrame");
        }
        OnFrame(c);
      }
      // A short read emptied the socket: what comes later raises a new edge. Saves a recv per event.
      if (!hung_up && static_cast<size_t>(n) < in_.size()) return;
    }
  }

  // The agent a frame is for: by the node rank of an event, by the call id (agent index + 1) of a result.
  SimAgent* For(Connection& c, int64_t index) {
    if (index < 0 || static_cast<size_t>(index) >= c.agents.size()) return nullptr;
    return &c.agents[static_cast<size_t>(index)];
  }

  void OnFrame(Connection& c) {
    if (answer_.has_refused()) {
      // The coordinator's shutdown after the barrier is expected; anything before it is a failure.
      for (SimAgent& a : c.agents) {
        if (!a.passed) Fail(a, "refused: " + answer_.refused().message());
      }
      return;
    }
    if (answer_.has_result()) {
      SimAgent* a = For(c, static_cast<int64_t>(answer_.result().id()) - 1);
      if (a == nullptr || a->passed) return;
      if (answer_.result().status().code() != 0) {
        return Fail(*a, "the barrier failed: " + answer_.result().status().message());
      }
      a->passed = true;
      Count(&AgentProgress::passed, &AgentProgress::passed_at);
      return;
    }
    SimAgent* a = For(c, answer_.node_rank() - c.first_rank);
    if (a == nullptr) return;
    const v1::JobEvent& event = answer_.event();
    if (event.has_restart() && shared_.options.rejoin) {
      // The next epoch: join it on the liveness stream, as distrun's agents do once their workers stopped.
      frame_.Clear();
      auto* liveness = frame_.mutable_liveness();
      liveness->set_node_rank(a->rank);
      *liveness->mutable_join() = join_;
      liveness->mutable_join()->set_node_rank(a->rank);
      liveness->mutable_join()->set_restart_round(event.restart().restart_round());
      AppendFrame(frame_, &c.out);
      MarkDirty(c);
      return;
    }
    if (event.has_joined()) {
      if (event.joined().code() != 0) return Fail(*a, "the join was refused: " + event.joined().message());
      if (const int round = event.joined().assignment().restart_round(); round > 0) {
        return shared_.progress.CountRejoin(round);
      }
      if (a->joined) return;
      a->joined = true;
      Count(&AgentProgress::joined, &AgentProgress::joined_at);
      frame_.Clear();
      auto* call = frame_.mutable_call();
      call->set_id(static_cast<uint64_t>(a->rank - c.first_rank) + 1);
      call->mutable_barrier()->set_name("bench");
      call->mutable_barrier()->set_process_id(event.joined().assignment().rank_offset());
      call->mutable_barrier()->set_count(0);
      call->mutable_barrier()->set_timeout_ms(3'600'000);
      AppendFrame(frame_, &c.out);
      MarkDirty(c);
    } else if (event.has_heartbeat()) {
      if (a->heartbeat_sent_at > 0 && shared_.progress.record_heartbeats.load(std::memory_order_relaxed)) {
        const float ms = static_cast<float>((MonotonicSeconds() - a->heartbeat_sent_at) * 1000);
        std::lock_guard lock(shared_.progress.heartbeat_mu);
        shared_.progress.heartbeat_ms.push_back(ms);
      }
      a->heartbeat_sent_at = 0;
      if (a->answered) {
        shared_.progress.heartbeats_answered.fetch_add(1, std::memory_order_relaxed);
      } else {
        a->answered = true;
        Count(&AgentProgress::answered, &AgentProgress::answered_at);
      }
    }
  }

  void End(Connection& c, const std::string& why) {
    if (c.ended) return;
    c.ended = true;
    if (c.fd >= 0) ::close(c.fd);
    c.fd = -1;
    c.out.clear();
    c.out_sent = 0;
    for (SimAgent& a : c.agents) {
      if (!a.passed) Fail(a, why);
      if (!std::exchange(a.finished, true)) shared_.progress.Finish(shared_.options.agents);
    }
  }

  void Count(int AgentProgress::*counter, double AgentProgress::*last_at) {
    shared_.progress.Count(counter, last_at, shared_.options.agents, shared_.control.start.load());
  }

  void Fail(SimAgent& a, const std::string& why) {
    if (!std::exchange(a.failed, true)) shared_.progress.Fail(a.rank, why);
  }

  Shared& shared_;
  std::vector<SimAgent> agents_;
  std::vector<char> in_;  // one read buffer for every connection of the loop
  int slot_ = 0;
  // Scratch messages: no allocation per send once their strings have grown.
  v1::AgentFrame hello_;
  v1::AgentFrame frame_;
  int64_t steps_ = 0;  // AddProgress's step, one more per heartbeat of the loop
  v1::JoinRequest join_;
  v1::CoordinatorFrame answer_;
};

FramedAgents::FramedAgents(const SimAgentsOptions& options) : SimAgents(options) {
  if (options.agents < 1 || options.threads < 1 || options.per_connection < 1) {
    throw std::invalid_argument(
        "the agent channel's simulation needs agents, threads and agents per connection");
  }
  shared_.reset(new Shared{.options = options,
                           .coordinator = ParseIpv4(options.address),
                           .progress = progress_,
                           .control = control_});
  // Whole connections per loop: loop t gets connections t·C/T to (t+1)·C/T - 1.
  connections_ = (options.agents + options.per_connection - 1) / options.per_connection;
  const int threads = std::min(options.threads, connections_);
  for (int t = 0; t < threads; ++t) {
    const int first = std::min(options.agents, connections_ * t / threads * options.per_connection);
    const int next = std::min(options.agents, connections_ * (t + 1) / threads * options.per_connection);
    loops_.push_back(std::make_unique<Loop>(*shared_, options.first_rank + first, next - first));
  }
}

FramedAgents::~FramedAgents() { StopLoops(); }  // before shared_, which the loops use, goes

}  // namespace distrun::bench
