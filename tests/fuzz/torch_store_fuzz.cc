// libFuzzer target for PyTorch's TCPStore as node 0's port serves it (runtime/torch_store/): two
// connections whose bytes arrive in pieces, each sniffed from its first bytes (SniffTorchStore), then cut
// into requests by the decoder of its dialect; every request is encoded again and decoded unchanged, and
// served by one store (TorchStore::HandleRequest) between epochs. The decoder's kError and the store's
// refusal (its `error`) end a connection, as on the wire; any exception, a crash, a leak, a sanitizer
// report, a request whose fields do not fit its op, a reply to a connection that is not open or a store
// over its byte limit is a finding.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/torch_store/torch_store.h"
#include "runtime/torch_store/torch_store_codec.h"

namespace {

using namespace distrun;
using Op = TorchStoreOp;

// Small limits, so that an input of a few KiB reaches every one of them.
constexpr TorchStoreLimits kLimits{
    .max_key_bytes = 64, .max_value_bytes = 512, .max_keys_per_request = 16, .max_request_bytes = 1024};
constexpr size_t kMaxStoreBytes = 2048;

bool Same(const TorchStoreRequest& a, const TorchStoreRequest& b) {
  return a.op == b.op && a.keys == b.keys && a.values == b.values && a.delta == b.delta &&
         a.number == b.number;
}

// The keys and values each op carries (torch_store_codec.h's TorchStoreRequest).
bool FieldsFit(const TorchStoreRequest& r) {
  const size_t keys = r.keys.size(), values = r.values.size();
  for (const std::string& k : r.keys) {
    if (k.size() > kLimits.max_key_bytes) return false;
  }
  for (const std::string& v : r.values) {
    if (v.size() > kLimits.max_value_bytes) return false;
  }
  switch (r.op) {
    case Op::kValidate:
      return keys == 0 && values == 0 && r.number == kTorchStoreValidateMagic;
    case Op::kPing:
    case Op::kGetNumKeys:
    case Op::kCancelWait:
    case Op::kList:
      return keys == 0 && values == 0;
    case Op::kSet:
    case Op::kAppend:
    case Op::kQueuePush:
      return keys == 1 && values == 1;
    case Op::kCompareSet:
      return keys == 1 && values == 2;
    case Op::kGet:
    case Op::kAdd:
    case Op::kWatchKey:
    case Op::kDeleteKey:
    case Op::kQueuePop:
    case Op::kQueueLen:
      return keys == 1 && values == 0;
    case Op::kCheck:
    case Op::kWait:
    case Op::kMultiGet:
      return keys <= kLimits.max_keys_per_request && values == 0;
    case Op::kMultiSet:
      return keys <= kLimits.max_keys_per_request && values == keys;
  }
  return false;
}

// What a client of `dialect` sends for `request`, read back by a fresh decoder, is `request` again.
void RoundTrip(TorchStoreDialect dialect, const TorchStoreRequest& request) {
  std::string wire;
  if (dialect == TorchStoreDialect::kModern && request.op != Op::kValidate) {
    TorchStoreRequest validate;
    validate.op = Op::kValidate;
    validate.number = kTorchStoreValidateMagic;
    if (!EncodeTorchStoreRequest(dialect, validate, &wire)) __builtin_trap();
  }
  if (!EncodeTorchStoreRequest(dialect, request, &wire)) __builtin_trap();
  TorchStoreDecoder decoder(dialect, kLimits);
  decoder.Append(wire);
  TorchStoreRequest again;
  if (dialect == TorchStoreDialect::kModern && request.op != Op::kValidate) {
    if (decoder.Next(&again) != TorchStoreDecoder::Result::kRequest) __builtin_trap();
  }
  if (decoder.Next(&again) != TorchStoreDecoder::Result::kRequest || !Same(again, request)) __builtin_trap();
  if (decoder.buffered() != 0) __builtin_trap();
}

// One of the port's connections: its first bytes, until they say whether it speaks TCPStore and which
// dialect, then its decoder.
struct Connection {
  uint64_t id = 0;
  bool open = false;
  std::string first;
  std::optional<TorchStoreDialect> dialect;
  std::unique_ptr<TorchStoreDecoder> decoder;
};

// The sniff of a connection's first bytes: kNeedMore exactly while they are a prefix of VALIDATE's opening;
// the whole opening is a 2.2+ client's.
void CheckSniff(std::string_view first) {
  const std::string_view validate("\x00\xCE\xF7\x85\x3C", 5);
  for (size_t n = 0; n <= first.size(); ++n) {
    const std::string_view seen = first.substr(0, n);
    const TorchStoreSniff sniff = SniffTorchStore(seen);
    const bool prefix = n < validate.size() && validate.starts_with(seen);
    if ((sniff == TorchStoreSniff::kNeedMore) != prefix) __builtin_trap();
    if (seen.starts_with(validate) && sniff != TorchStoreSniff::kModern) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  TorchStore store(kMaxStoreBytes);
  Connection connections[2];
  uint64_t next_id = 1;
  int64_t epoch = 0;
  auto close = [&](Connection& c) {
    if (c.dialect) store.Disconnected(c.id);
    c = Connection{};
  };

  size_t at = 0;
  while (at < input.size()) {
    // The first byte of each piece says its length, which connection sends it, and whether a new round
    // begins before it: the store forgets everything, and the connections of earlier epochs are closed.
    const auto control = static_cast<uint8_t>(input[at++]);
    const std::string_view piece = input.substr(at, std::min<size_t>(control % 32 + 1, input.size() - at));
    at += piece.size();
    Connection& c = connections[(control >> 5) & 1];
    if ((control & 0xC0) == 0xC0) {
      for (uint64_t retired : store.StartEpoch(++epoch)) {
        for (Connection& other : connections) {
          if (other.open && other.id == retired) close(other);
        }
      }
    }
    if (!c.open) {
      c.open = true;
      c.id = next_id++;
    }
    if (!c.dialect) {
      // The port peeks at a new connection's first bytes; nothing of them is consumed.
      c.first += piece;
      const std::string_view head = std::string_view(c.first).substr(0, 5);
      CheckSniff(head);
      const TorchStoreSniff sniff = SniffTorchStore(head);
      if (sniff == TorchStoreSniff::kNeedMore) continue;
      if (sniff == TorchStoreSniff::kNotTorchStore) {  // handed to gRPC
        close(c);
        continue;
      }
      c.dialect = sniff == TorchStoreSniff::kModern ? TorchStoreDialect::kModern : TorchStoreDialect::kLegacy;
      c.decoder = std::make_unique<TorchStoreDecoder>(*c.dialect, kLimits);
      store.Connected(c.id);
      c.decoder->Append(c.first);
    } else {
      c.decoder->Append(piece);
    }
    TorchStoreRequest request;
    for (;;) {
      const TorchStoreDecoder::Result r = c.decoder->Next(&request);
      if (r == TorchStoreDecoder::Result::kNeedMore) break;
      if (r == TorchStoreDecoder::Result::kError) {
        if (c.decoder->error().empty() || c.decoder->Next(&request) != TorchStoreDecoder::Result::kError) {
          __builtin_trap();
        }
        close(c);
        break;
      }
      if (!FieldsFit(request)) __builtin_trap();
      RoundTrip(*c.dialect, request);
      const TorchStoreOutcome outcome = store.HandleRequest(c.id, request);
      for (const TorchStoreReply& reply : outcome.replies) {
        const bool known =
            std::any_of(std::begin(connections), std::end(connections),
                        [&](const Connection& o) { return o.dialect && o.id == reply.connection; });
        if (!known) __builtin_trap();
      }
      if (store.bytes() > kMaxStoreBytes) __builtin_trap();
      if (!outcome.error.empty()) {
        close(c);
        break;
      }
    }
  }
  return 0;
}
