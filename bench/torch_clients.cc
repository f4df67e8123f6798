#include "torch_clients.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <span>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include "proc_stats.h"
#include "sim_loop_shell.h"

namespace distrun::bench {
namespace {

constexpr size_t kNcclIdBytes = 128;          // sizeof(ncclUniqueId)
constexpr uint64_t kMaxReplyBytes = 1 << 20;  // a GET here answers 128 bytes; more means a lost frame

// Where a rank is: the request it sends next, or the one whose reply it waits for.
enum class Step : uint8_t { kPing, kAddInit, kUid, kGetUid, kAddBarrier, kWaitLast, kDone };
// The shape of a reply (§3): what the parser must read for each request that has one.
enum class Reply : uint8_t { kByte, kUint32, kInt64, kBytes };
// The keys ranks WAIT on, in the order an init reaches them.
enum WaitKey : uint8_t { kUidKey, kLastKey, kWaitKeys };

WaitKey KeyOf(Step step) { return step == Step::kUid ? kUidKey : kLastKey; }

struct SimRank {
  int rank = 0;
  Step step = Step::kPing;
  bool failed = false;
};

struct Expected {
  SimRank* rank = nullptr;
  Reply reply = Reply::kByte;
  bool blocking = false;  // a WAIT on a key the connection had not seen exist
};

struct ReplyValue {
  int64_t number = 0;      // u8, u32, i64
  std::string_view bytes;  // bytes, into the connection's input
};

// One connection and the ranks on it (torch_clients.h: how a shared connection orders their requests).
struct Connection {
  int fd = -1;
  uint64_t key = 0;
  std::span<SimRank> ranks;
  std::string out;  // bytes to send; out_sent of them went
  size_t out_sent = 0;
  std::string in;  // bytes received; in_read of them parsed
  size_t in_read = 0;
  std::deque<Expected> expected;  // replies due, in the order their requests went
  std::vector<SimRank*> held;     // their next request has a reply and waits for the blocking WAIT's
  std::vector<SimRank*> parked;   // at a WAIT on a key the connection has not seen exist
  bool waiting = false;           // a blocking WAIT is unanswered (then it is all of `expected`)
  std::array<bool, kWaitKeys> known{};
  bool dirty = false;
  bool ended = false;
};

std::string Encode(TorchStoreDialect dialect, TorchStoreOp op, std::vector<std::string> keys = {},
                   std::vector<std::string> values = {}, int64_t delta = 0, uint32_t number = 0) {
  const TorchStoreRequest request{op, std::move(keys), std::move(values), delta, number};
  std::string out;
  if (!EncodeTorchStoreRequest(dialect, request, &out)) {
    throw std::logic_error(std::string(TorchStoreOpName(op)) + " does not exist in " +
                           TorchStoreDialectName(dialect));
  }
  return out;
}

// Every request of an init but the PINGs, encoded once.
struct Requests {
  std::string validate, add_init, set_uid, get_uid, add_barrier, set_last;
  std::array<std::string, kWaitKeys> wait;
  std::string uid;  // the NCCL id rank 0 publishes, which every other rank must read back
};

Requests MakeRequests(TorchStoreDialect dialect) {
  const TorchInitKeys keys = InitKeys(dialect);
  Requests r;
  for (size_t i = 0; i < kNcclIdBytes; ++i) r.uid += static_cast<char>('A' + i % 26);
  using Op = TorchStoreOp;
  if (dialect == TorchStoreDialect::kModern) {
    r.validate = Encode(dialect, Op::kValidate, {}, {}, 0, kTorchStoreValidateMagic);
  }
  // "init/" is the one key a TCPStore client sends without its "/" (§2).
  r.add_init = Encode(dialect, Op::kAdd, {"init/"}, {}, 1);
  r.set_uid = Encode(dialect, Op::kSet, {keys.uid}, {r.uid});
  r.get_uid = Encode(dialect, Op::kGet, {keys.uid});
  r.add_barrier = Encode(dialect, Op::kAdd, {keys.barrier}, {}, 1);
  r.set_last = Encode(dialect, Op::kSet, {keys.last_worker}, {"1"});
  r.wait[kUidKey] = Encode(dialect, Op::kWait, {keys.uid});
  r.wait[kLastKey] = Encode(dialect, Op::kWait, {keys.last_worker});
  return r;
}

// The PING nonce of a rank; a real client sends its pid, never 0.
uint32_t Nonce(const SimRank& r) { return static_cast<uint32_t>(r.rank) + 1; }

// The reply of shape `reply` at the start of `bytes`: its length, 0 while incomplete, -1 when it cannot be.
int64_t TakeReply(std::string_view bytes, Reply reply, ReplyValue* value) {
  auto fixed = [&](size_t size) -> int64_t {
    if (bytes.size() < size) return 0;
    uint64_t raw = 0;
    std::memcpy(&raw, bytes.data(), size);  // little-endian, as every platform torch supports
    value->number = static_cast<int64_t>(raw);
    return static_cast<int64_t>(size);
  };
  switch (reply) {
    case Reply::kByte:
      return fixed(1);
    case Reply::kUint32:
      return fixed(4);
    case Reply::kInt64:
      return fixed(8);
    case Reply::kBytes: {
      if (fixed(8) == 0) return 0;
      const auto length = static_cast<uint64_t>(value->number);
      if (length > kMaxReplyBytes) return -1;
      if (bytes.size() - 8 < length) return 0;
      value->bytes = bytes.substr(8, length);
      return static_cast<int64_t>(8 + length);
    }
  }
  return -1;
}

}  // namespace

TorchInitKeys InitKeys(TorchStoreDialect dialect) {
  if (dialect == TorchStoreDialect::kLegacy) {
    const std::string group = "//worker/attempt_0/default_pg";
    return {.uid = group + "/0/0",
            .barrier = group + "/store_based_barrier_key:1",
            .last_worker = group + "/store_based_barrier_key:1:last_worker"};
  }
  const std::string group = "/default_pg";
  return {.uid = group + "/0//cuda//0",
          .barrier = group + "/store_based_barrier_key:0",
          .last_worker = group + "/store_based_barrier_key:0:last_worker"};
}

struct TorchClients::Shared {
  TorchClientsOptions options;
  sockaddr_in server{};
  Requests requests;
  AgentProgress& progress;
  SimControl& control;
};

class TorchClients::Loop final : public SimLoopShell<TorchClients::Loop, Connection> {
 public:
  Loop(Shared& shared, int first_rank, int count)
      : SimLoopShell(shared.control), shared_(shared), in_(1 << 16) {
    ranks_.resize(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) ranks_[static_cast<size_t>(i)].rank = first_rank + i;
    const auto per = static_cast<size_t>(shared_.options.per_connection);
    connections_.resize((ranks_.size() + per - 1) / per);
    for (size_t c = 0; c < connections_.size(); ++c) {
      connections_[c].key = SimLoopFds::kFirstKey + c;
      connections_[c].ranks =
          std::span<SimRank>(ranks_).subspan(c * per, std::min(per, ranks_.size() - c * per));
    }
    StartThread();
  }

  ~Loop() override { StopThread(); }

  void SetHeartbeatInterval(int) override {}  // ranks do not heartbeat

 private:
  friend class SimLoopShell<Loop, Connection>;

  // ---- sending ----

  void Open(Connection& c) {
    c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c.fd < 0) return End(c, ErrnoText("socket"));
    int one = 1;
    ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // as torch's clients do
    if (!ConnectSpread(c.fd, shared_.server, c.key)) return End(c, ErrnoText("connect"));
    if (!fds_.Watch(c.fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, c.key)) {
      return End(c, ErrnoText("epoll_ctl"));
    }
    c.out += shared_.requests.validate;  // empty for 1.13, which has no handshake
    for (SimRank& r : c.ranks) Advance(c, r);
    MarkDirty(c);
  }

  // Sends what rank `r` does next, up to its next request with a reply.
  void Advance(Connection& c, SimRank& r) {
    const Requests& q = shared_.requests;
    switch (r.step) {
      case Step::kPing:
        if (q.validate.empty()) {  // 1.13 has no PING either
          r.step = Step::kAddInit;
          return Advance(c, r);
        }
        return Ask(c, r, Encode(TorchStoreDialect::kModern, TorchStoreOp::kPing, {}, {}, 0, Nonce(r)),
                   Reply::kUint32);
      case Step::kAddInit:
        return Ask(c, r, q.add_init, Reply::kInt64);
      case Step::kUid:
        if (r.rank != 0) return AskWait(c, r);
        Tell(c, q.set_uid);
        c.known[kUidKey] = true;
        Count(&AgentProgress::joined, &AgentProgress::joined_at);
        r.step = Step::kAddBarrier;
        return Advance(c, r);
      case Step::kGetUid:
        return Ask(c, r, q.get_uid, Reply::kBytes);
      case Step::kAddBarrier:
        return Ask(c, r, q.add_barrier, Reply::kInt64);
      case Step::kWaitLast:
        return AskWait(c, r);
      case Step::kDone:
        return;
    }
  }

  // A request with a reply: at once, unless a blocking WAIT is unanswered on the connection.
  void Ask(Connection& c, SimRank& r, std::string_view request, Reply reply) {
    if (c.waiting) {
      c.held.push_back(&r);
      return;
    }
    c.out += request;
    c.expected.push_back({.rank = &r, .reply = reply});
    MarkDirty(c);
  }

  // A request without a reply (SET) never confuses the parser: it goes at once.
  void Tell(Connection& c, std::string_view request) {
    c.out += request;
    MarkDirty(c);
  }

  void AskWait(Connection& c, SimRank& r) {
    const WaitKey key = KeyOf(r.step);
    if (c.known[key]) return Ask(c, r, shared_.requests.wait[key], Reply::kByte);
    c.parked.push_back(&r);
  }

  // Sends one parked WAIT once every live rank of the connection is parked. The earliest key first: the
  // barrier's last worker cannot appear before every rank has the NCCL id.
  void MaybeWait(Connection& c) {
    if (c.ended || c.waiting || c.parked.empty() || !c.expected.empty() || !c.held.empty()) return;
    auto first = std::min_element(c.parked.begin(), c.parked.end(),
                                  [](const SimRank* a, const SimRank* b) { return a->step < b->step; });
    SimRank& r = **first;
    c.parked.erase(first);
    c.out += shared_.requests.wait[KeyOf(r.step)];
    c.expected.push_back({.rank = &r, .reply = Reply::kByte, .blocking = true});
    c.waiting = true;
    MarkDirty(c);
  }

  // After replies were read: ranks held behind an answered WAIT, and parked ranks whose key is known now,
  // send their requests.
  void Settle(Connection& c) {
    if (c.ended || c.waiting) return;
    std::vector<SimRank*> go;
    std::erase_if(c.parked, [&](SimRank* r) {
      if (!c.known[KeyOf(r->step)]) return false;
      go.push_back(r);
      return true;
    });
    go.insert(go.end(), c.held.begin(), c.held.end());
    c.held.clear();
    for (SimRank* r : go) Advance(c, *r);
    MaybeWait(c);
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
      if (n == 0) return End(c, "the server closed the connection");
      c.in.append(in_.data(), static_cast<size_t>(n));
      Parse(c);
      // A short read emptied the socket: what comes later raises a new edge. Saves a recv per event.
      if (!hung_up && static_cast<size_t>(n) < in_.size()) return;
    }
  }

  void Parse(Connection& c) {
    while (!c.ended && !c.expected.empty()) {
      const Expected e = c.expected.front();
      ReplyValue value;
      const int64_t size = TakeReply(std::string_view(c.in).substr(c.in_read), e.reply, &value);
      if (size < 0) return End(c, "a reply longer than any request here asks for");
      if (size == 0) break;
      c.in_read += static_cast<size_t>(size);
      c.expected.pop_front();
      if (e.blocking) {
        c.waiting = false;
        c.known[KeyOf(e.rank->step)] = true;
      }
      OnReply(c, *e.rank, value);
    }
    if (c.ended) return;
    if (c.expected.empty() && c.in_read < c.in.size())
      return End(c, "the server sent bytes nobody asked for");
    c.in.erase(0, c.in_read);
    c.in_read = 0;
    Settle(c);
  }

  void OnReply(Connection& c, SimRank& r, const ReplyValue& v) {
    const int64_t ranks = shared_.options.ranks;
    switch (r.step) {
      case Step::kPing:
        if (v.number != Nonce(r)) return Wrong(c, r, "PING echoed another nonce");
        r.step = Step::kAddInit;
        break;
      case Step::kAddInit:
        if (v.number < 1) return Wrong(c, r, "ADD init/ answered " + std::to_string(v.number));
        Count(&AgentProgress::answered, &AgentProgress::answered_at);
        r.step = Step::kUid;
        break;
      case Step::kUid:
        if (v.number != kTorchStoreStopWaiting) return Wrong(c, r, "WAIT for the NCCL id answered not 00");
        r.step = Step::kGetUid;
        break;
      case Step::kGetUid:
        if (v.bytes != shared_.requests.uid) return Wrong(c, r, "GET of the NCCL id answered other bytes");
        Count(&AgentProgress::joined, &AgentProgress::joined_at);
        r.step = Step::kAddBarrier;
        break;
      case Step::kAddBarrier:
        if (v.number < 1 || v.number > ranks) {
          return Wrong(c, r, "ADD of the barrier answered " + std::to_string(v.number));
        }
        if (v.number == ranks) {  // the last to arrive lets everyone through
          Tell(c, shared_.requests.set_last);
          c.known[kLastKey] = true;
        }
        r.step = Step::kWaitLast;
        break;
      case Step::kWaitLast:
        if (v.number != kTorchStoreStopWaiting)
          return Wrong(c, r, "WAIT for the last worker answered not 00");
        r.step = Step::kDone;
        return Count(&AgentProgress::passed, &AgentProgress::passed_at);
      case Step::kDone:
        return Wrong(c, r, "a reply after the rank was done");
    }
    Advance(c, r);
  }

  // A reply that torch's client would reject: the connection cannot be trusted further.
  void Wrong(Connection& c, const SimRank& r, const std::string& what) {
    End(c, what + " (a reply to rank " + std::to_string(r.rank) + ")");
  }

  void End(Connection& c, const std::string& why) {
    if (c.ended) return;
    c.ended = true;
    if (c.fd >= 0) ::close(c.fd);
    c.fd = -1;
    c.out.clear();
    c.out_sent = 0;
    for (SimRank& r : c.ranks) {
      if (r.step != Step::kDone && !std::exchange(r.failed, true)) shared_.progress.Fail(r.rank, why);
    }
  }

  void Count(int AgentProgress::*counter, double AgentProgress::*last_at) {
    shared_.progress.Count(counter, last_at, shared_.options.ranks, shared_.control.start.load());
  }

  Shared& shared_;
  std::vector<SimRank> ranks_;
  std::vector<char> in_;  // one read buffer for every connection of the loop
};

namespace {

SimAgentsOptions BaseOptions(const TorchClientsOptions& options) {
  SimAgentsOptions o;
  o.address = options.address;
  o.agents = options.ranks;
  o.per_connection = options.per_connection;
  o.threads = options.threads;
  o.heartbeat_ms = 0;
  return o;
}

}  // namespace

TorchClients::TorchClients(const TorchClientsOptions& options) : SimAgents(BaseOptions(options)) {
  if (options.ranks < 1 || options.threads < 1 || options.per_connection < 1) {
    throw std::invalid_argument("the torch ranks' simulation needs ranks, threads and ranks per connection");
  }
  shared_.reset(new Shared{.options = options,
                           .server = ParseIpv4(options.address),
                           .requests = MakeRequests(options.dialect),
                           .progress = progress_,
                           .control = control_});
  // Whole connections per loop: loop t gets connections t·C/T to (t+1)·C/T - 1.
  connections_ = (options.ranks + options.per_connection - 1) / options.per_connection;
  const int threads = std::min(options.threads, connections_);
  for (int t = 0; t < threads; ++t) {
    const int first = std::min(options.ranks, connections_ * t / threads * options.per_connection);
    const int next = std::min(options.ranks, connections_ * (t + 1) / threads * options.per_connection);
    loops_.push_back(std::make_unique<Loop>(*shared_, first, next - first));
  }
}

TorchClients::~TorchClients() { StopLoops(); }  // before shared_, which the loops use, goes

}  // namespace distrun::bench
