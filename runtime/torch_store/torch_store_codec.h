#pragma once
// PyTorch's TCPStore wire protocol (docs/TORCH_STORE_PROTOCOL.md §2, §3, §7): how a connection's bytes
// become requests and how replies are written, for the two dialects distrun serves. No sockets here: the
// port's event loop feeds bytes in and writes what runtime/torch_store/torch_store.h answers.
//
// Integers are in host byte order (little-endian on every platform torch supports); strings are a u64
// length and raw bytes, no terminator.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace distrun {

enum class TorchStoreDialect {
  kLegacy,  // torch 1.13 (and 2.0): opcodes 0–8 with WATCH_KEY, no handshake ("E1")
  kModern,  // torch 2.2+: opens with VALIDATE; opcodes 0–17 ("E3")
};

// "tcpstore 1.13" / "tcpstore 2.2+", for messages.
const char* TorchStoreDialectName(TorchStoreDialect dialect);

// The one-time handshake of a 2.2+ client: opcode 0 and this u32, CE F7 85 3C on the wire.
inline constexpr uint32_t kTorchStoreValidateMagic = 0x3C85F7CE;

enum class TorchStoreSniff { kModern, kLegacy, kNotTorchStore, kNeedMore };

// What a connection speaks, judged from its first bytes (§7): 00 CE F7 85 3C is a 2.2+ client; any other
// start with a byte 0x00–0x08 is a 1.13 client (a 1.13 SET also opens with 00, but its next 4 bytes are
// the low half of its key's length, the magic only for a key of 1 GiB or more). kNeedMore only while the
// bytes so far are a prefix of the magic; an empty prefix needs more too (a 1.13 client's second
// connection never sends a byte, so the caller must not time it out).
TorchStoreSniff SniffTorchStore(std::string_view prefix);

enum class TorchStoreOp : uint8_t {
  kValidate,  // 2.2+
  kSet,
  kCompareSet,
  kGet,
  kAdd,
  kCheck,
  kWait,
  kGetNumKeys,
  kWatchKey,  // 1.13
  kDeleteKey,
  kAppend,  // 2.2+ from here on
  kMultiGet,
  kMultiSet,
  kCancelWait,
  kPing,       // 2.5+
  kQueuePush,  // 2.8+
  kQueuePop,
  kQueueLen,
  kList,  // 2.10+
};

// "SET", "QUEUE_POP": the names the document and torch's sources use.
const char* TorchStoreOpName(TorchStoreOp op);

// One request, whatever the dialect. The fields an op does not use stay empty.
struct TorchStoreRequest {
  TorchStoreOp op = TorchStoreOp::kGetNumKeys;
  // In wire order: the key of the single-key ops; every key of CHECK, WAIT, MULTI_GET and MULTI_SET.
  std::vector<std::string> keys;
  // SET, APPEND, QUEUE_PUSH: the value; COMPARE_SET: {expected, desired}; MULTI_SET: one per key.
  std::vector<std::string> values;
  int64_t delta = 0;    // ADD
  uint32_t number = 0;  // VALIDATE: the magic; PING: the nonce
};

// libuv's limits (§4), which real clients stay within; over one, the connection cannot go on.
struct TorchStoreLimits {
  size_t max_key_bytes = 8 << 10;
  size_t max_value_bytes = 8 << 20;
  size_t max_keys_per_request = 128 << 10;  // CHECK, WAIT, MULTI_GET, MULTI_SET
  // Keys and values of one request together: a MULTI_SET within the other limits could still be 1 TiB.
  size_t max_request_bytes = 64 << 20;
};

// The wire code of `op` in `dialect`; false when the dialect has no such op.
bool TorchStoreOpcode(TorchStoreDialect dialect, TorchStoreOp op, uint8_t* code);

// Cuts the requests out of one connection's bytes, however they were split. A 2.2+ connection must open
// with a VALIDATE carrying the magic; a wrong magic later is an error too.
class TorchStoreDecoder {
 public:
  enum class Result { kRequest, kNeedMore, kError };

  TorchStoreDecoder(TorchStoreDialect dialect, TorchStoreLimits limits);

  TorchStoreDialect dialect() const { return dialect_; }

  void Append(std::string_view bytes);
  // kRequest: `request` holds the next request. kError: error() says why, naming the opcode; the caller
  // closes the connection, and every later call answers kError again.
  Result Next(TorchStoreRequest* request);
  const std::string& error() const { return error_; }
  // Bytes held: the unread part of a request.
  size_t buffered() const { return buffer_.size() - consumed_; }

 private:
  enum class Field { kKey, kValue, kInt64, kUint32, kCount, kNone };

  Result Fail(std::string message);
  // The next field the request being read needs, after its opcode.
  Field NextField() const;

  TorchStoreDialect dialect_;
  TorchStoreLimits limits_;
  std::string buffer_;
  size_t consumed_ = 0;
  std::string error_;
  bool validated_ = false;  // 2.2+: the opening VALIDATE was read

  // The request being read: its opcode is read, fields_done_ of its fields too.
  bool in_request_ = false;
  TorchStoreRequest request_;
  size_t fields_done_ = 0;
  uint64_t count_ = 0;  // CHECK, WAIT, MULTI_*: the number of keys announced
  size_t request_bytes_ = 0;
};

// Replies (§3). Each appends to `out`.
void AppendTorchStoreByte(uint8_t value, std::string* out);
void AppendTorchStoreUint32(uint32_t value, std::string* out);
void AppendTorchStoreInt64(int64_t value, std::string* out);
void AppendTorchStoreBytes(std::string_view bytes, std::string* out);  // u64 length, then the bytes

// Reply codes (u8).
inline constexpr uint8_t kTorchStoreReady = 0;            // CHECK
inline constexpr uint8_t kTorchStoreNotReady = 1;         // CHECK
inline constexpr uint8_t kTorchStoreStopWaiting = 0;      // WAIT
inline constexpr uint8_t kTorchStoreWaitCanceled = 1;     // CANCEL_WAIT
inline constexpr uint8_t kTorchStoreWatchRegistered = 3;  // WATCH_KEY (1.13)

// A request as a client of `dialect` sends it, for tests and tools; false when the dialect has no such op.
bool EncodeTorchStoreRequest(TorchStoreDialect dialect, const TorchStoreRequest& request, std::string* out);

}  // namespace distrun
