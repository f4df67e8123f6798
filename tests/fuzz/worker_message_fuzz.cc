// libFuzzer target for the worker channel (runtime/recovery/worker_message.h), the bytes a node's distrun
// reads from its workers: frames arriving in pieces, each payload read as a message and as its typed form,
// a message that reads back re-encoded and read again unchanged, and every message fed to a node's
// recovery (launcher/recovery/in_place_recovery.h) between notices and worlds. Any exception other than
// WorkerMessageError, a crash, a leak or a sanitizer report is a finding.
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "launcher/recovery/in_place_recovery.h"
#include "runtime/recovery/worker_message.h"

namespace {

using distrun::WorkerMessage;
using distrun::WorkerMessageError;

class Actions : public distrun::RecoveryActions {
 public:
  bool Send(size_t, const WorkerMessage& m) override {
    (void)distrun::EncodeFrame(m);  // what distrun sends must always encode
    return true;
  }
  void Restart(size_t slot, const std::string&) override { restarted.push_back(slot); }
  void Join(int, const std::vector<int>& fresh) override {
    for (int f : fresh) {
      if (f < 0 || f >= 4) __builtin_trap();
    }
  }
  std::vector<size_t> restarted;
};

void Typed(const WorkerMessage& m) {
  try {
    if (m.name == "hello") (void)distrun::HelloFrom(m);
    if (m.name == "world") {
      distrun::WorldMessage w = distrun::WorldFrom(m);
      if (w.rank < 0 || w.rank >= w.world_size || w.source >= w.world_size) __builtin_trap();
      if (distrun::WorldFrom(distrun::ToMessage(w)) != w) __builtin_trap();
    }
    if (m.name == "ready" || m.name == "up" || m.name == "changed") (void)distrun::GenerationOf(m);
  } catch (const WorkerMessageError&) {
  }
  try {
    const std::string frame = distrun::EncodeFrame(m);
    if (distrun::DecodePayload(std::string_view(frame).substr(4)) != m) __builtin_trap();
  } catch (const WorkerMessageError&) {
    // A decoded message always encodes: names and keys were checked, values hold no newline.
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  static auto log = std::make_shared<spdlog::logger>("fuzz", std::make_shared<spdlog::sinks::null_sink_mt>());
  Actions actions;
  distrun::InPlaceRecovery recovery(4, std::chrono::milliseconds(1000), actions, log);
  auto now = distrun::InPlaceRecovery::Clock::time_point{};
  for (size_t i = 0; i < 4; ++i) recovery.Started(i, 100 + static_cast<pid_t>(i), static_cast<int>(i), now);
  recovery.Handout(0, std::vector<distrun::WorldMessage>(4), now);

  distrun::FrameReader reader;
  size_t at = 0;
  int generation = 0;
  try {
    while (at < input.size()) {
      // The first byte of each piece says its length and what happens around it.
      const auto control = static_cast<uint8_t>(input[at++]);
      const size_t piece = std::min<size_t>(control % 64 + 1, input.size() - at);
      reader.Append(input.substr(at, piece));
      at += piece;
      if (control & 0x40) recovery.Change(++generation, now);
      if ((control & 0x80) && recovery.joining()) {
        recovery.Handout(generation, std::vector<distrun::WorldMessage>(4), now);
      }
      now += std::chrono::milliseconds(control);
      recovery.Tick(now);
      while (std::optional<std::string> payload = reader.Next()) {
        try {
          WorkerMessage m = distrun::DecodePayload(*payload);
          Typed(m);
          recovery.OnMessage(control % 4, m, now);
        } catch (const WorkerMessageError&) {
        }
      }
      for (size_t slot : actions.restarted) recovery.Started(slot, 200, static_cast<int>(slot), now);
      actions.restarted.clear();
    }
  } catch (const WorkerMessageError&) {
    // A frame over the limit: the connection ends.
  }
  try {
    (void)distrun::ParseRanks(input, 1 << 16);
  } catch (const WorkerMessageError&) {
  }
  return 0;
}
