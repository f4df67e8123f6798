// libFuzzer target for the agent channel (runtime/transport/agent_frames.h), the bytes node 0 reads from
// every agent and each agent from node 0: the preface check on a connection's first bytes, frames cut out
// of bytes arriving in pieces (the hello's limit until a hello came, then the message limit), each frame
// read as the coordinator reads it (after the hello, an AgentFrame that the server's own dispatch,
// agent_session.h, converts and hands to a coordination service with a fake clock) and as an agent reads
// it (a CoordinatorFrame, its event and statuses converted, a standby's update converted back and forth
// unchanged). A frame that does not parse or is over the limit ends the connection, as on the wire; any
// exception, a crash, a leak or a sanitizer report is a finding.
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/auth/token_check.h"
#include "runtime/distrun.pb.h"
#include "runtime/service/service.h"
#include "runtime/transport/agent_channel_server.h"
#include "runtime/transport/agent_frames.h"
#include "runtime/transport/agent_session.h"
#include "runtime/transport/proto_convert.h"

namespace {

using namespace distrun;
using Clock = std::chrono::steady_clock;

constexpr size_t kMaxMessageBytes = 4 << 20;  // AgentChannelConfig's default
const std::string kToken = "fuzz-token";

// What the server does with an admitted connection's frames: the same AgentSession, with a link that
// checks every frame it would queue and drops it (no socket, no munge check).
class DroppingLink : public AgentSession::Link {
 public:
  void Send(const v1::CoordinatorFrame& frame) override {
    std::string out;
    AppendFrame(frame, &out);
  }
  void Refuse(const Status& status) override {
    v1::CoordinatorFrame frame;
    ToProto(status, frame.mutable_refused());
    Send(frame);
  }
  void RefuseAgent(const std::string& why) override { Refuse({StatusCode::kUnauthenticated, why}); }
  uint32_t Retransmits() override { return 0; }
};

// A connection: the hello's token check, then the session.
class Connection {
 public:
  Connection(CoordinationService& service, std::shared_ptr<spdlog::logger> log)
      : service_(service), log_(std::move(log)) {}

  // False once the connection is refused: nothing more of it is read.
  bool Handle(const v1::AgentFrame& message) {
    if (!session_) {
      if (!message.has_hello() || !SameToken(kToken, message.hello().token())) return false;
      session_ = std::make_unique<AgentSession>(service_, link_, std::nullopt, log_);
      return true;
    }
    return session_->Handle(message);
  }

  bool admitted() const { return session_ != nullptr; }

 private:
  CoordinationService& service_;
  std::shared_ptr<spdlog::logger> log_;
  std::shared_ptr<DroppingLink> link_ = std::make_shared<DroppingLink>();
  std::unique_ptr<AgentSession> session_;
};

// As an agent reads a frame from node 0 (agent_channel.cc's reader).
void AsAgentReads(std::string_view bytes) {
  v1::CoordinatorFrame frame;
  if (!frame.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return;
  switch (frame.frame_case()) {
    case v1::CoordinatorFrame::kEvent: {
      const JobEvent e = FromProto(frame.event());
      if (e.kind == JobEvent::Kind::kStandby) {
        // A standby's copy of the job survives the trip back to the wire and again.
        v1::JobEvent again;
        ToProto(e, &again);
        if (FromProto(again).standby_update != e.standby_update) __builtin_trap();
      }
      break;
    }
    case v1::CoordinatorFrame::kResult:
      (void)FromProto(frame.result().status());
      break;
    case v1::CoordinatorFrame::kRefused:
      (void)FromProto(frame.refused());
      break;
    default:
      break;
  }
}

// The session logs admissions and refusals; a fuzzer's millions of them say nothing.
std::shared_ptr<spdlog::logger> Quiet() {
  static const auto log =
      std::make_shared<spdlog::logger>("fuzz", std::make_shared<spdlog::sinks::null_sink_mt>());
  return log;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  Clock::time_point now{};
  ServiceConfig config;
  config.num_nodes = 3;
  config.run_id = "fuzz";
  config.clock = [&now] { return now; };
  // The first control byte's bit 0x40 (otherwise unused) makes the job elastic.
  if (!input.empty() && (input[0] & 0x40)) {
    config.elastic = ElasticRange{1, 4, ElasticPolicy::kResize, ScaleUp::kNow};
  }
  CoordinationService service(config);
  Connection connection(service, Quiet());

  // The coordinator's reader (a hello's limit until admitted) and an agent's, fed the same pieces: node 0
  // reads frames after the preface, an agent from the first byte.
  FrameReader server(std::min(kMaxMessageBytes, kMaxHelloFrameBytes));
  FrameReader agent(kMaxMessageBytes);
  std::string first;  // what node 0 peeks at before it knows the protocol
  bool preface = false;
  bool server_open = true;
  bool agent_open = true;
  size_t appended = 0;
  size_t framed = 0;
  size_t at = 0;
  while (at < input.size() && (server_open || agent_open)) {
    // The first byte of each piece says its length and how much time passes after it.
    const auto control = static_cast<uint8_t>(input[at++]);
    std::string_view piece = input.substr(at, std::min<size_t>(control % 64 + 1, input.size() - at));
    at += piece.size();
    agent.Append(piece.data(), piece.size());
    if (server_open && !preface) {
      // A prefix of the preface may still become it; anything longer must start with it.
      first += piece;
      for (size_t n = 0; n <= first.size(); ++n) {
        const std::string_view seen = std::string_view(first).substr(0, n);
        const bool may = n <= kAgentChannelPreface.size() ? kAgentChannelPreface.starts_with(seen)
                                                          : seen.starts_with(kAgentChannelPreface);
        if (MayBeAgentPreface(seen) != may) __builtin_trap();
      }
      const std::string_view seen = std::string_view(first).substr(0, kAgentChannelPreface.size());
      if (!MayBeAgentPreface(seen)) {
        server_open = false;  // another protocol's: handed off
      } else if (seen.size() == kAgentChannelPreface.size()) {
        preface = true;
        piece = std::string_view(first).substr(kAgentChannelPreface.size());
      }
    }
    if (server_open && preface) {
      server.Append(piece.data(), piece.size());
      appended += piece.size();
    }
    std::string_view frame;
    while (server_open && preface) {
      const FrameReader::Result r = server.Next(&frame);
      if (r == FrameReader::Result::kNeedMore) break;
      if (r == FrameReader::Result::kTooLarge) {
        server_open = false;
        break;
      }
      if (frame.size() > server.max_frame_bytes()) __builtin_trap();
      framed += 4 + frame.size();
      v1::AgentFrame message;
      if (!message.ParseFromArray(frame.data(), static_cast<int>(frame.size())) ||
          !connection.Handle(message)) {
        server_open = false;
        break;
      }
      if (connection.admitted()) server.set_max_frame_bytes(kMaxMessageBytes);
    }
    // Every byte after the preface is in a frame read or still held.
    if (server_open && preface && framed + server.buffered() != appended) __builtin_trap();
    while (agent_open) {
      const FrameReader::Result r = agent.Next(&frame);
      if (r == FrameReader::Result::kNeedMore) break;
      if (r == FrameReader::Result::kTooLarge) {
        agent_open = false;
        break;
      }
      AsAgentReads(frame);
    }
    if (control & 0x80) {
      now += std::chrono::milliseconds(uint64_t{control} << 10);
      service.Tick();
    }
  }
  return 0;
}
