#include "h2_agents.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "proc_stats.h"
#include "runtime/distrun.grpc.pb.h"
#include "runtime/transport/proto_convert.h"
#include "sim_loop_shell.h"

namespace distrun::bench {
namespace {

// ---- HTTP/2 (RFC 9113) and gRPC framing: only what a gRPC client needs ----

constexpr std::string_view kClientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr size_t kFrameHeaderBytes = 9;
constexpr size_t kMessagePrefixBytes = 5;  // gRPC: compressed flag, 4-byte big-endian length

enum FrameType : uint8_t {
  kData = 0x0,
  kHeaders = 0x1,
  kRstStream = 0x3,
  kSettings = 0x4,
  kPushPromise = 0x5,
  kPing = 0x6,
  kGoaway = 0x7,
  kWindowUpdate = 0x8,
};
constexpr uint8_t kEndStream = 0x1;  // DATA, HEADERS
constexpr uint8_t kAck = 0x1;        // SETTINGS, PING
constexpr uint8_t kEndHeaders = 0x4;
constexpr uint8_t kPadded = 0x8;
constexpr uint16_t kSettingsInitialWindowSize = 0x4;
constexpr uint32_t kCancel = 0x8;  // RST_STREAM error code

// Our SETTINGS frame is empty, so the protocol's defaults bound what the server may send us.
constexpr uint32_t kDefaultWindow = 65'535;
constexpr uint32_t kMaxFrameBytes = 16'384;
constexpr uint32_t kMaxMessageBytes = 4 << 20;  // as GrpcClient's channel

uint32_t Read16(const uint8_t* p) { return static_cast<uint32_t>(p[0]) << 8 | p[1]; }
uint32_t Read24(const uint8_t* p) { return Read16(p) << 8 | p[2]; }
uint32_t Read32(const uint8_t* p) { return Read24(p) << 8 | p[3]; }

void Write32(char* p, uint32_t v) {
  for (int i = 3; i >= 0; --i, v >>= 8) p[i] = static_cast<char>(v & 0xff);
}

void WriteFrameHeader(char* p, size_t length, uint8_t type, uint8_t flags, uint32_t stream) {
  p[0] = static_cast<char>((length >> 16) & 0xff);
  p[1] = static_cast<char>((length >> 8) & 0xff);
  p[2] = static_cast<char>(length & 0xff);
  p[3] = static_cast<char>(type);
  p[4] = static_cast<char>(flags);
  Write32(p + 5, stream);
}

void AppendFrameHeader(std::string& out, size_t length, uint8_t type, uint8_t flags, uint32_t stream) {
  const size_t at = out.size();
  out.resize(at + kFrameHeaderBytes);
  WriteFrameHeader(out.data() + at, length, type, flags, stream);
}

void AppendWindowUpdate(std::string& out, uint32_t stream, uint32_t increment) {
  AppendFrameHeader(out, 4, kWindowUpdate, 0, stream);
  const size_t at = out.size();
  out.resize(at + 4);
  Write32(out.data() + at, increment);
}

// One DATA frame holding one gRPC message; `size` is message.ByteSizeLong(), just computed.
void AppendMessage(std::string& out, uint32_t stream, const google::protobuf::MessageLite& message,
                   size_t size, bool end_stream) {
  const size_t at = out.size();
  out.resize(at + kFrameHeaderBytes + kMessagePrefixBytes + size);
  char* p = out.data() + at;
  WriteFrameHeader(p, kMessagePrefixBytes + size, kData, end_stream ? kEndStream : 0, stream);
  p[kFrameHeaderBytes] = 0;  // not compressed
  Write32(p + kFrameHeaderBytes + 1, static_cast<uint32_t>(size));
  message.SerializeWithCachedSizesToArray(
      reinterpret_cast<uint8_t*>(p + kFrameHeaderBytes + kMessagePrefixBytes));
}

// HPACK integer with an N-bit prefix (RFC 7541 §5.1); the prefix's other bits are 0.
void AppendHpackInteger(std::string& out, size_t value, int prefix_bits) {
  const size_t limit = (size_t{1} << prefix_bits) - 1;
  if (value < limit) {
    out.push_back(static_cast<char>(value));
    return;
  }
  out.push_back(static_cast<char>(limit));
  for (value -= limit; value >= 128; value >>= 7) out.push_back(static_cast<char>((value & 0x7f) | 0x80));
  out.push_back(static_cast<char>(value));
}

// "Literal header field without indexing, new name", no Huffman: the simplest valid encoding; it leaves the
// server's dynamic table alone, so every request's block is the same bytes.
void AppendLiteralHeader(std::string& out, std::string_view name, std::string_view value) {
  out.push_back(0);
  AppendHpackInteger(out, name.size(), 7);
  out += name;
  AppendHpackInteger(out, value.size(), 7);
  out += value;
}

// What a gRPC client sends to start a call; `timeout` is "" for none (the liveness stream).
std::string RequestHeaderBlock(std::string_view method, const std::string& authority,
                               const std::string& token, std::string_view timeout) {
  std::string block;
  AppendLiteralHeader(block, ":method", "POST");
  AppendLiteralHeader(block, ":scheme", "http");
  AppendLiteralHeader(block, ":path",
                      std::string("/") + v1::Coordination::service_full_name() + "/" + std::string(method));
  AppendLiteralHeader(block, ":authority", authority);
  AppendLiteralHeader(block, "content-type", "application/grpc");
  AppendLiteralHeader(block, "te", "trailers");
  // Real agents' calls carry a deadline (GrpcClient), so the server arms a timer per call for them too.
  if (!timeout.empty()) AppendLiteralHeader(block, "grpc-timeout", timeout);
  AppendLiteralHeader(block, kTokenHeader, token);
  return block;
}

// ---- one agent, one connection ----

enum class Call : uint8_t { kNone, kLiveness, kJoin, kBarrier };

// What an agent still has to send, in this order, once the flow-control windows let it.
enum Pending : uint8_t { kHello = 1, kJoinCall = 2, kBarrierCall = 4 };

// Cuts one stream's DATA into gRPC messages.
struct MessageReader {
  std::array<uint8_t, kMessagePrefixBytes> prefix{};
  uint8_t prefix_have = 0;
  bool in_body = false;
  uint32_t body_left = 0;
};

struct Connection;

struct SimAgent {
  int rank = 0;
  Connection* connection = nullptr;
  uint32_t liveness_stream = 0;          // 0: not open, or ended
  int64_t liveness_send_window = 0;      // what the server lets us send on it
  uint32_t liveness_unacked = 0;         // received on it and not yet given back by WINDOW_UPDATE
  std::array<MessageReader, 3> readers;  // by Call, less one
  std::string assignment;                // the Join call's answer, reassembled (not used by agents today)
  std::string event;                     // the liveness stream's current message, reassembled
  int process_id = 0;                    // from the assignment: who arrives at the barrier
  // The heartbeat slot it belongs to, chosen when its stream opened so that its first heartbeat goes one
  // interval later, as Agent::HeartbeatLoop sends it; -1 before.
  int heartbeat_slot = -1;
  uint8_t pending = 0;
  bool blocked = false;  // pending, waiting for a window
  bool answered = false, joined = false, passed = false, finished = false, failed = false;
};

struct StreamSlot {
  SimAgent* agent = nullptr;
  Call call = Call::kNone;  // kNone once the stream ended
};

struct Connection {
  uint64_t key = 0;
  int fd = -1;
  bool ended = false;
  bool dirty = false;  // has output queued since the last flush
  std::span<SimAgent> agents;
  std::string out;  // frames to send; out_sent of them went
  size_t out_sent = 0;
  std::string partial;  // the start of a frame not yet received whole
  uint32_t next_stream = 1;
  // By (stream id - 1) / 2. Reserved for every agent's three streams, so pointers into it stay valid.
  std::vector<StreamSlot> streams;
  int64_t send_window = kDefaultWindow;
  int64_t peer_initial_window = kDefaultWindow;  // each new stream's send window
  uint32_t unacked = 0;                          // received and not yet given back by WINDOW_UPDATE
  int blocked_agents = 0;
};

}  // namespace

struct H2Agents::Shared {
  SimAgentsOptions options;
  sockaddr_in coordinator{};
  std::string liveness_headers, join_headers, barrier_headers;
  AgentProgress& progress;
  SimControl& control;
};

// One thread, one epoll set, the connections given to it and their agents.
class H2Agents::Loop final : public SimLoopShell<H2Agents::Loop, Connection> {
 public:
  Loop(Shared& shared, const std::vector<int>& connection_numbers)
      : SimLoopShell(shared.control), shared_(shared), in_(1 << 18) {
    PlaceAgents(connection_numbers);
    PrepareMessages();
    StartThread();
  }

  ~Loop() override { StopThread(); }

 private:
  friend class SimLoopShell<Loop, Connection>;

  // Connection c holds agents c·K to c·K + K - 1.
  void PlaceAgents(const std::vector<int>& connection_numbers) {
    const int per = shared_.options.per_connection, total = shared_.options.agents;
    auto agents_of = [&](int c) { return std::min(per, total - c * per); };
    size_t count = 0;
    for (int c : connection_numbers) count += static_cast<size_t>(agents_of(c));
    agents_.resize(count);
    connections_.resize(connection_numbers.size());
    size_t next = 0;
    for (size_t i = 0; i < connection_numbers.size(); ++i) {
      const int c = connection_numbers[i], n = agents_of(c);
      Connection& conn = connections_[i];
      conn.key = SimLoopFds::kFirstKey + i;
      conn.agents = std::span<SimAgent>(agents_).subspan(next, static_cast<size_t>(n));
      conn.streams.reserve(3 * static_cast<size_t>(n));
      for (int j = 0; j < n; ++j) {
        SimAgent& a = agents_[next++];
        a.rank = c * per + j;
        a.connection = &conn;
      }
    }
  }

  // The fields the gRPC simulation sends; only the node's own change per agent.
  void PrepareMessages() {
    join_.set_num_nodes(shared_.options.agents);
    join_.set_local_workers(1);
    for (int d = 0; d < 8; ++d) join_.add_device_tokens(std::to_string(d));
    join_.set_run_id("bench");
    join_.set_proposed_master_port(29500);
    *first_.mutable_join() = join_;
    barrier_.set_name("bench");
    barrier_.set_count(0);
    barrier_.set_timeout_ms(3'600'000);
  }

  // ---- sending ----

  void Open(Connection& c) {
    c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c.fd < 0) {
      End(c, ErrnoText("socket"));
      return;
    }
    int one = 1;
    ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // as gRPC does
    if (!ConnectSpread(c.fd, shared_.coordinator, c.key)) {
      End(c, ErrnoText("connect"));
      return;
    }
    // Edge-triggered: one registration, no epoll_ctl per write; reads and writes go until EAGAIN.
    if (!fds_.Watch(c.fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, c.key)) {
      End(c, ErrnoText("epoll_ctl"));
      return;
    }
    // Clients need not wait for the server's preface: ours, its SETTINGS and the first calls leave together.
    c.out += kClientPreface;
    AppendFrameHeader(c.out, 0, kSettings, 0, 0);
    for (SimAgent& a : c.agents) {
      // The stream's first message joins round 0, as Agent does: no Join call.
      a.pending = kHello;
      SendPending(a);
    }
    MarkDirty(c);
  }

  uint32_t OpenStream(Connection& c, SimAgent& a, Call call, const std::string& headers) {
    const uint32_t id = c.next_stream;
    c.next_stream += 2;
    c.streams.push_back({&a, call});
    AppendFrameHeader(c.out, headers.size(), kHeaders, kEndHeaders, id);
    c.out += headers;
    return id;
  }

  // A new stream's first message needs room in the connection's window and in a new stream's.
  static bool Fits(const Connection& c, size_t message_size) {
    const auto bytes = static_cast<int64_t>(kMessagePrefixBytes + message_size);
    return c.send_window >= bytes && c.peer_initial_window >= bytes;
  }

  // Sends what `a` has pending, in order, as far as the windows allow; the rest goes on a WINDOW_UPDATE.
  void SendPending(SimAgent& a) {
    Connection& c = *a.connection;
    while (a.pending != 0 && !c.ended) {
      const auto next = static_cast<uint8_t>(a.pending & -a.pending);  // the lowest bit first
      if (!Send(c, a, next)) break;
      a.pending = static_cast<uint8_t>(a.pending & ~next);
    }
    const bool blocked = a.pending != 0 && !c.ended;
    if (blocked != a.blocked) {
      a.blocked = blocked;
      c.blocked_agents += blocked ? 1 : -1;
    }
    MarkDirty(c);
  }

  bool Send(Connection& c, SimAgent& a, uint8_t what) {
    switch (what) {
      case kHello: {
        first_.set_node_rank(a.rank);
        v1::JoinRequest* join = first_.mutable_join();
        join->set_node_rank(a.rank);
        std::string* host = join->mutable_host();
        host->assign("node");
        *host += std::to_string(a.rank);
        const size_t size = first_.ByteSizeLong();
        if (!Fits(c, size)) return false;
        a.liveness_stream = OpenStream(c, a, Call::kLiveness, shared_.liveness_headers);
        a.liveness_send_window = c.peer_initial_window;
        a.heartbeat_slot = (slot_ + kHeartbeatSlots - 1) % kHeartbeatSlots;  // the slot just served
        SendData(c, a.liveness_stream, first_, size, false, &a.liveness_send_window);
        return true;
      }
      case kJoinCall: {
        join_.set_node_rank(a.rank);
        std::string* host = join_.mutable_host();
        host->assign("node");
        *host += std::to_string(a.rank);
        const size_t size = join_.ByteSizeLong();
        if (!Fits(c, size)) return false;
        int64_t window = c.peer_initial_window;
        SendData(c, OpenStream(c, a, Call::kJoin, shared_.join_headers), join_, size, true, &window);
        return true;
      }
      default: {
        barrier_.set_process_id(a.process_id);
        const size_t size = barrier_.ByteSizeLong();
        if (!Fits(c, size)) return false;
        int64_t window = c.peer_initial_window;
        SendData(c, OpenStream(c, a, Call::kBarrier, shared_.barrier_headers), barrier_, size, true, &window);
        return true;
      }
    }
  }

  void SendData(Connection& c, uint32_t stream, const google::protobuf::MessageLite& message, size_t size,
                bool end_stream, int64_t* stream_window) {
    AppendMessage(c.out, stream, message, size, end_stream);
    const auto bytes = static_cast<int64_t>(kMessagePrefixBytes + size);
    c.send_window -= bytes;
    *stream_window -= bytes;
  }

  // After the connection window or new streams' initial window grew.
  void ResumeBlocked(Connection& c) {
    if (c.blocked_agents == 0) return;
    for (SimAgent& a : c.agents) {
      if (a.blocked) SendPending(a);
    }
  }

  // The agents of this slot: each heartbeats once per interval, the first time one interval after its
  // stream opened. A heartbeat that finds no window is skipped; the next one goes when the server has read
  // this one.
  void HeartbeatSlot() {
    for (SimAgent& a : agents_) {
      if (a.heartbeat_slot != slot_) continue;
      Connection& c = *a.connection;
      if (a.liveness_stream == 0 || c.ended) continue;
      hello_.set_node_rank(a.rank);
      const size_t size = hello_.ByteSizeLong();
      const auto bytes = static_cast<int64_t>(kMessagePrefixBytes + size);
      if (c.send_window < bytes || a.liveness_send_window < bytes) continue;
      SendData(c, a.liveness_stream, hello_, size, false, &a.liveness_send_window);
      MarkDirty(c);
    }
    slot_ = (slot_ + 1) % kHeartbeatSlots;
  }

  // ---- receiving ----

  void Receive(Connection& c, bool /*hung_up: it reads until EAGAIN*/) {
    while (c.fd >= 0) {
      const size_t kept = c.partial.size();
      std::memcpy(in_.data(), c.partial.data(), kept);
      const ssize_t n = ::recv(c.fd, in_.data() + kept, in_.size() - kept, 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) End(c, ErrnoText("read"));
        return;
      }
      if (n == 0) {
        End(c, "the coordinator closed the connection");
        return;
      }
      const size_t have = kept + static_cast<size_t>(n);
      const size_t used = ParseFrames(c, in_.data(), have);
      if (c.ended) return;
      c.partial.assign(reinterpret_cast<const char*>(in_.data()) + used, have - used);
      // A short read emptied the socket: what comes later raises a new edge. Saves a recv per event.
      if (static_cast<size_t>(n) < in_.size() - kept) return;
    }
  }

  // Handles every whole frame in `data`; returns the bytes used (a frame cut by the read waits for the rest).
  size_t ParseFrames(Connection& c, const uint8_t* data, size_t size) {
    size_t at = 0;
    while (size - at >= kFrameHeaderBytes) {
      const uint8_t* h = data + at;
      const uint32_t length = Read24(h);
      if (length > kMaxFrameBytes) {
        End(c, "protocol error: a frame larger than the 16,384 bytes our SETTINGS allow");
        return at;
      }
      if (size - at < kFrameHeaderBytes + length) break;
      HandleFrame(c, h[3], h[4], Read32(h + 5) & 0x7fffffff, h + kFrameHeaderBytes, length);
      if (c.ended) return at;
      at += kFrameHeaderBytes + length;
    }
    return at;
  }

  void HandleFrame(Connection& c, uint8_t type, uint8_t flags, uint32_t stream, const uint8_t* payload,
                   uint32_t length) {
    switch (type) {
      case kData:
        OnData(c, flags, stream, payload, length);
        break;
      case kHeaders:
        // Response headers and trailers are not decoded (HPACK, Huffman): an answer is its DATA, and a call
        // whose stream ends without one failed. CONTINUATION frames, if any, are skipped below.
        if (flags & kEndStream) EndStream(c, stream, -1);
        break;
      case kRstStream:
        if (length != 4) return ProtocolError(c, "RST_STREAM");
        EndStream(c, stream, Read32(payload));
        break;
      case kSettings:
        OnSettings(c, flags, payload, length);
        break;
      case kPushPromise:
        return ProtocolError(c, "PUSH_PROMISE");  // gRPC servers never push
      case kPing:
        if (length != 8) return ProtocolError(c, "PING");
        if (!(flags & kAck)) {
          AppendFrameHeader(c.out, 8, kPing, kAck, 0);
          c.out.append(reinterpret_cast<const char*>(payload), 8);
          MarkDirty(c);
        }
        break;
      case kGoaway:
        if (length < 8) return ProtocolError(c, "GOAWAY");
        OnGoaway(c, Read32(payload + 4));
        break;
      case kWindowUpdate:
        if (length != 4) return ProtocolError(c, "WINDOW_UPDATE");
        OnWindowUpdate(c, stream, Read32(payload) & 0x7fffffff);
        break;
      default:  // PRIORITY, CONTINUATION, and types unknown to us: ignored, as the protocol asks
        break;
    }
  }

  void ProtocolError(Connection& c, const char* frame) {
    End(c, std::string("protocol error: a malformed or unexpected ") + frame + " frame from the coordinator");
  }

  StreamSlot* FindStream(Connection& c, uint32_t stream) {
    if ((stream & 1) == 0) return nullptr;  // 0 or server-initiated
    const size_t index = (stream - 1) / 2;
    if (index >= c.streams.size() || c.streams[index].call == Call::kNone) return nullptr;
    return &c.streams[index];
  }

  void OnData(Connection& c, uint8_t flags, uint32_t stream, const uint8_t* payload, uint32_t length) {
    // Flow control counts the whole payload, padding included, even on streams we consider ended.
    c.unacked += length;
    if (c.unacked >= kDefaultWindow / 2) {
      AppendWindowUpdate(c.out, 0, std::exchange(c.unacked, 0));
      MarkDirty(c);
    }
    StreamSlot* slot = FindStream(c, stream);
    if (slot == nullptr) return;
    const uint8_t* body = payload;
    uint32_t body_size = length;
    if (flags & kPadded) {
      if (length == 0 || payload[0] >= length) return ProtocolError(c, "DATA (padding)");
      body = payload + 1;
      body_size = length - 1 - payload[0];
    }
    SimAgent& a = *slot->agent;
    if (slot->call == Call::kLiveness) {
      // The stream lives as long as the job: give its window back as we read, or the server stalls.
      a.liveness_unacked += length;
      if (a.liveness_unacked >= kDefaultWindow / 2) {
        AppendWindowUpdate(c.out, stream, std::exchange(a.liveness_unacked, 0));
        MarkDirty(c);
      }
    }
    if (!ReadMessages(*slot, body, body_size)) {
      AppendFrameHeader(c.out, 4, kRstStream, 0, stream);
      c.out.resize(c.out.size() + 4);
      Write32(c.out.data() + c.out.size() - 4, kCancel);
      MarkDirty(c);
      Fail(a, "a compressed or oversized gRPC message (we accept neither)");
      EndStream(c, stream, -1);
      return;
    }
    if (flags & kEndStream) EndStream(c, stream, -1);
  }

  // Reassembles the stream's gRPC messages across DATA frames, several to a frame or one over several.
  bool ReadMessages(StreamSlot& slot, const uint8_t* p, uint32_t n) {
    SimAgent& a = *slot.agent;
    const Call call = slot.call;
    MessageReader& r = a.readers[static_cast<size_t>(call) - 1];
    while (n > 0) {
      if (!r.in_body) {
        const uint32_t take =
            std::min<uint32_t>(n, static_cast<uint32_t>(kMessagePrefixBytes - r.prefix_have));
        std::memcpy(r.prefix.data() + r.prefix_have, p, take);
        r.prefix_have = static_cast<uint8_t>(r.prefix_have + take);
        p += take;
        n -= take;
        if (r.prefix_have < kMessagePrefixBytes) break;
        r.body_left = Read32(r.prefix.data() + 1);
        if (r.prefix[0] != 0 || r.body_left > kMaxMessageBytes) return false;
        r.prefix_have = 0;
        r.in_body = true;
        if (call == Call::kJoin) a.assignment.clear();
        if (call == Call::kLiveness) a.event.clear();
      }
      const uint32_t take = std::min(n, r.body_left);
      if (call == Call::kJoin) a.assignment.append(reinterpret_cast<const char*>(p), take);
      if (call == Call::kLiveness) a.event.append(reinterpret_cast<const char*>(p), take);
      p += take;
      n -= take;
      r.body_left -= take;
      if (r.body_left == 0) {
        r.in_body = false;
        OnMessage(a, call);
      }
    }
    return true;
  }

  void OnJoined(SimAgent& a, const v1::Assignment& assignment) {
    if (a.joined) return;
    a.joined = true;
    a.process_id = assignment.rank_offset();
    Count(&AgentProgress::joined, &AgentProgress::joined_at);
    a.pending = static_cast<uint8_t>(a.pending | kBarrierCall);
    SendPending(a);
  }

  void OnMessage(SimAgent& a, Call call) {
    switch (call) {
      case Call::kLiveness:
        if (!event_.ParseFromString(a.event)) {
          Fail(a, "a liveness message does not parse as a JobEvent");
          break;
        }
        if (event_.has_joined()) {
          if (event_.joined().code() != 0) {
            Fail(a, "the join was refused: " + event_.joined().message());
            break;
          }
          OnJoined(a, event_.joined().assignment());
        } else if (a.answered) {
          shared_.progress.heartbeats_answered.fetch_add(1, std::memory_order_relaxed);
        } else {
          a.answered = true;
          Count(&AgentProgress::answered, &AgentProgress::answered_at);
        }
        break;
      case Call::kJoin:
        if (a.joined) break;
        if (!assignment_.ParseFromString(a.assignment)) {
          Fail(a, "the Join answer does not parse as an Assignment");
          break;
        }
        OnJoined(a, assignment_);
        break;
      case Call::kBarrier:
        if (a.passed) break;
        a.passed = true;
        Count(&AgentProgress::passed, &AgentProgress::passed_at);
        break;
      case Call::kNone:
        break;
    }
  }

  // The stream ended: END_STREAM (reset_code -1) or RST_STREAM. A call that ends unanswered failed; its
  // status is in the trailers we do not decode, and in the coordinator's log (a refused token, say).
  void EndStream(Connection& c, uint32_t stream, int64_t reset_code) {
    StreamSlot* slot = FindStream(c, stream);
    if (slot == nullptr) return;
    SimAgent& a = *slot->agent;
    const Call call = std::exchange(slot->call, Call::kNone);
    const bool reset = reset_code >= 0;
    switch (call) {
      case Call::kLiveness:
        a.liveness_stream = 0;
        if (!a.passed) {
          Fail(a,
               reset ? "the coordinator reset the liveness stream"
                     : "the liveness stream ended before the barrier passed",
               reset_code);
        }
        Finish(a);
        break;
      case Call::kJoin:
        if (!a.joined) Fail(a, reset ? "Join was reset" : "Join ended without an answer", reset_code);
        break;
      case Call::kBarrier:
        if (!a.passed) Fail(a, reset ? "Barrier was reset" : "Barrier ended without an answer", reset_code);
        break;
      case Call::kNone:
        break;
    }
  }

  void OnSettings(Connection& c, uint8_t flags, const uint8_t* p, uint32_t length) {
    if (flags & kAck) return;
    if (length % 6 != 0) return ProtocolError(c, "SETTINGS");
    int64_t growth = 0;
    for (uint32_t i = 0; i < length; i += 6) {
      if (Read16(p + i) != kSettingsInitialWindowSize) continue;  // the others do not matter to us
      const uint32_t window = Read32(p + i + 2);
      if (window > 0x7fffffff) return ProtocolError(c, "SETTINGS (initial window)");
      growth = window - c.peer_initial_window;
      c.peer_initial_window = window;
      for (SimAgent& a : c.agents) {
        if (a.liveness_stream != 0) a.liveness_send_window += growth;
      }
    }
    AppendFrameHeader(c.out, 0, kSettings, kAck, 0);
    MarkDirty(c);
    if (growth > 0) ResumeBlocked(c);
  }

  void OnWindowUpdate(Connection& c, uint32_t stream, uint32_t increment) {
    if (stream == 0) {
      c.send_window += increment;
      ResumeBlocked(c);  // blocked calls wait for this window only (a new stream's is the initial one)
    } else if (StreamSlot* slot = FindStream(c, stream); slot && slot->call == Call::kLiveness) {
      slot->agent->liveness_send_window += increment;
    }
  }

  // The server is leaving: what it answered stays answered, what it did not is a failure. Reading goes on
  // until it closes the connection.
  void OnGoaway(Connection& c, uint32_t error_code) {
    for (SimAgent& a : c.agents) {
      if (!a.passed) Fail(a, "the coordinator sent GOAWAY", error_code);
    }
  }

  // The connection is over (closed, broken, or a protocol error): every agent on it ends.
  void End(Connection& c, const std::string& why) {
    if (c.ended) return;
    c.ended = true;
    if (c.fd >= 0) ::close(c.fd);
    c.fd = -1;
    c.out.clear();
    c.out_sent = 0;
    c.partial.clear();
    for (StreamSlot& s : c.streams) s.call = Call::kNone;
    for (SimAgent& a : c.agents) {
      a.liveness_stream = 0;
      if (!a.passed) Fail(a, why);
      Finish(a);
    }
  }

  // ---- progress ----

  void Count(int AgentProgress::*counter, double AgentProgress::*last_at) {
    shared_.progress.Count(counter, last_at, shared_.options.agents, shared_.control.start.load());
  }

  void Finish(SimAgent& a) {
    if (!std::exchange(a.finished, true)) shared_.progress.Finish(shared_.options.agents);
  }

  // Once per agent.
  void Fail(SimAgent& a, std::string_view why, int64_t code = -1) {
    if (std::exchange(a.failed, true)) return;
    std::string words(why);
    if (code >= 0) words += " (HTTP/2 error code " + std::to_string(code) + ")";
    shared_.progress.Fail(a.rank, words);
  }

  Shared& shared_;
  std::vector<SimAgent> agents_;
  std::vector<uint8_t> in_;  // one read buffer for every connection of the loop
  int slot_ = 0;
  // Scratch messages, refilled per agent: no allocation per send once their strings have grown.
  v1::AgentHeartbeat hello_;  // a heartbeat: the node rank only
  v1::AgentHeartbeat first_;  // the stream's first message, which joins round 0
  v1::JoinRequest join_;
  v1::JobEvent event_;
  v1::BarrierRequest barrier_;
  v1::Assignment assignment_;
};

H2Agents::H2Agents(const SimAgentsOptions& options) : SimAgents(options) {
  if (options.agents < 1 || options.per_connection < 1 || options.threads < 1) {
    throw std::invalid_argument("H2Agents needs at least one agent, one per connection and one thread");
  }
  shared_.reset(
      new Shared{.options = options,
                 .coordinator = ParseIpv4(options.address),
                 .liveness_headers = RequestHeaderBlock("Liveness", options.address, options.token, ""),
                 .join_headers = RequestHeaderBlock("Join", options.address, options.token, "3600S"),
                 .barrier_headers = RequestHeaderBlock("Barrier", options.address, options.token, "3600S"),
                 .progress = progress_,
                 .control = control_});
  connections_ = (options.agents + options.per_connection - 1) / options.per_connection;
  std::vector<std::vector<int>> connections_of(static_cast<size_t>(options.threads));
  for (int c = 0; c < connections_; ++c)
    connections_of[static_cast<size_t>(c % options.threads)].push_back(c);
  for (const auto& mine : connections_of) loops_.push_back(std::make_unique<Loop>(*shared_, mine));
}

H2Agents::~H2Agents() { StopLoops(); }  // before shared_, which the loops use, goes

}  // namespace distrun::bench
