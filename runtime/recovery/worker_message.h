#pragma once
// The worker channel's wire form (ARCHITECTURE.md, "Recovering in place"): what a node's distrun and its
// workers say to each other on the node's Unix socket. A frame is a 4-byte big-endian length (at most
// kMaxWorkerFrameBytes) and that many bytes of text: the message's name on the first line, then one
// `key=value` line per field. A value holds no newline; lists of ranks are ranges ("0-7,12"). Unknown keys
// are kept and ignored, so either end may add some. Both ends use this file: launcher/recovery/ (the node)
// and the client library (workers that are not Python); python/distrun/torch.py speaks the same bytes.

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace distrun {

inline constexpr uint32_t kMaxWorkerFrameBytes = 1u << 20;
inline constexpr int kWorkerChannelVersion = 1;
// The variable naming the node's socket ("@name": an abstract one), and the others a worker reads.
inline constexpr char kRecoverySocketVariable[] = "DISTRUN_RECOVERY_SOCKET";
inline constexpr char kRecoveryModeVariable[] = "DISTRUN_RECOVERY";
inline constexpr char kRecoveryTimeoutVariable[] = "DISTRUN_RECOVERY_TIMEOUT";
// The store's namespace of a generation ("distrun/g3"): node 0's store refuses another generation's keys.
inline constexpr char kGenerationPrefix[] = "distrun/g";
std::string GenerationStorePrefix(int generation);
// The generation a store key belongs to ("distrun/g3/x" → 3, as torch's PrefixStore joins prefix and key
// with '/'), or nullopt for a key outside every generation's namespace.
std::optional<int64_t> GenerationOfKey(std::string_view key);

// A frame or message that cannot be read: what was wrong, for the one line the reader logs.
class WorkerMessageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct WorkerMessage {
  std::string name;  // hello, ready, up (worker); world, changed, error (distrun)
  std::vector<std::pair<std::string, std::string>> fields;

  WorkerMessage& Add(std::string key, std::string value);
  WorkerMessage& Add(std::string key, int64_t value);
  // The first field named `key`; null when absent.
  const std::string* Find(std::string_view key) const;
  // The integer at `key`, within [min, max]. Throws WorkerMessageError naming the message and the key
  // when it is absent or not such an integer.
  int64_t Int(std::string_view key, int64_t min, int64_t max) const;
  bool operator==(const WorkerMessage&) const = default;
};

// The frame of `message`. Throws WorkerMessageError for a name or key that is empty or not [a-z0-9_.A-Z],
// a value with a newline, or a message longer than kMaxWorkerFrameBytes.
std::string EncodeFrame(const WorkerMessage& message);
// A frame's payload. Throws WorkerMessageError for a payload that is not a message.
WorkerMessage DecodePayload(std::string_view payload);

// Frames out of a byte stream that arrives in pieces.
class FrameReader {
 public:
  void Append(std::string_view bytes);
  // The next whole frame's payload, or nullopt until more bytes come. Throws WorkerMessageError when a
  // frame says it is longer than kMaxWorkerFrameBytes (the stream is then unusable).
  std::optional<std::string> Next();
  size_t buffered() const { return buffer_.size() - start_; }

 private:
  std::string buffer_;
  size_t start_ = 0;
};

// Sorted, distinct ranks as ranges: {0,1,2,3,7} → "0-3,7"; {} → "".
std::string FormatRanks(std::vector<int> ranks);
// The inverse, sorted and distinct. Throws WorkerMessageError for anything else, or for more than
// `max_ranks` ranks in all.
std::vector<int> ParseRanks(std::string_view text, size_t max_ranks = size_t{1} << 24);

// The messages, typed. To*/From* convert; From* throws WorkerMessageError naming what is missing.
struct HelloMessage {
  int version = kWorkerChannelVersion;
  int64_t pid = 0;
  int generation = -1;  // the world it holds; -1: none (a new process)
};
struct WorldMessage {
  int generation = 0;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int group_rank = 0;
  int group_world_size = 1;
  bool is_new = false;  // the process holds no training state (a spare's, or one started again)
  int source = -1;      // the rank every rank takes its state from; -1: no process kept any
  std::vector<int> lost;
  std::vector<int> joined;
  std::string store_prefix;
  // The worker's variables this world sets or changes (env.NAME=value on the wire).
  std::vector<std::pair<std::string, std::string>> env;
  bool operator==(const WorldMessage&) const = default;
};

WorkerMessage ToMessage(const HelloMessage& hello);
HelloMessage HelloFrom(const WorkerMessage& message);
WorkerMessage ToMessage(const WorldMessage& world);
WorldMessage WorldFrom(const WorkerMessage& message);
// ready, up and changed carry a generation alone.
WorkerMessage GenerationMessage(std::string name, int generation);
int GenerationOf(const WorkerMessage& message);
WorkerMessage ErrorMessage(const std::string& text);

}  // namespace distrun
