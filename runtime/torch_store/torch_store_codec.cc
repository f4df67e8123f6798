#include "runtime/torch_store/torch_store_codec.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <utility>

namespace distrun {
namespace {

// Opcode -> op, by dialect (§1: E1 as torch 1.13 speaks it, E3 through LIST).
constexpr std::array kLegacyOps{
    TorchStoreOp::kSet,        TorchStoreOp::kCompareSet, TorchStoreOp::kGet,
    TorchStoreOp::kAdd,        TorchStoreOp::kCheck,      TorchStoreOp::kWait,
    TorchStoreOp::kGetNumKeys, TorchStoreOp::kWatchKey,   TorchStoreOp::kDeleteKey};
constexpr std::array kModernOps{
    TorchStoreOp::kValidate,   TorchStoreOp::kSet,    TorchStoreOp::kCompareSet, TorchStoreOp::kGet,
    TorchStoreOp::kAdd,        TorchStoreOp::kCheck,  TorchStoreOp::kWait,       TorchStoreOp::kGetNumKeys,
    TorchStoreOp::kDeleteKey,  TorchStoreOp::kAppend, TorchStoreOp::kMultiGet,   TorchStoreOp::kMultiSet,
    TorchStoreOp::kCancelWait, TorchStoreOp::kPing,   TorchStoreOp::kQueuePush,  TorchStoreOp::kQueuePop,
    TorchStoreOp::kQueueLen,   TorchStoreOp::kList};

constexpr std::string_view kValidatePrefix{"\x00\xCE\xF7\x85\x3C", 5};

template <typename T>
T Load(const char* p) {
  T value;
  std::memcpy(&value, p, sizeof value);
  return value;
}

template <typename T>
void Store(T value, std::string* out) {
  const size_t at = out->size();
  out->resize(at + sizeof value);
  std::memcpy(out->data() + at, &value, sizeof value);
}

bool IsCounted(TorchStoreOp op) {
  return op == TorchStoreOp::kCheck || op == TorchStoreOp::kWait || op == TorchStoreOp::kMultiGet ||
         op == TorchStoreOp::kMultiSet;
}

}  // namespace

const char* TorchStoreDialectName(TorchStoreDialect dialect) {
  return dialect == TorchStoreDialect::kLegacy ? "tcpstore 1.13" : "tcpstore 2.2+";
}

TorchStoreSniff SniffTorchStore(std::string_view prefix) {
  if (prefix.empty()) return TorchStoreSniff::kNeedMore;
  const auto first = static_cast<unsigned char>(prefix[0]);
  if (first > 0x08) return TorchStoreSniff::kNotTorchStore;
  if (first != 0x00) return TorchStoreSniff::kLegacy;
  const size_t n = std::min(prefix.size(), kValidatePrefix.size());
  if (prefix.substr(0, n) != kValidatePrefix.substr(0, n)) return TorchStoreSniff::kLegacy;
  return n == kValidatePrefix.size() ? TorchStoreSniff::kModern : TorchStoreSniff::kNeedMore;
}

const char* TorchStoreOpName(TorchStoreOp op) {
  switch (op) {
    case TorchStoreOp::kValidate:
      return "VALIDATE";
    case TorchStoreOp::kSet:
      return "SET";
    case TorchStoreOp::kCompareSet:
      return "COMPARE_SET";
    case TorchStoreOp::kGet:
      return "GET";
    case TorchStoreOp::kAdd:
      return "ADD";
    case TorchStoreOp::kCheck:
      return "CHECK";
    case TorchStoreOp::kWait:
      return "WAIT";
    case TorchStoreOp::kGetNumKeys:
      return "GETNUMKEYS";
    case TorchStoreOp::kWatchKey:
      return "WATCH_KEY";
    case TorchStoreOp::kDeleteKey:
      return "DELETE_KEY";
    case TorchStoreOp::kAppend:
      return "APPEND";
    case TorchStoreOp::kMultiGet:
      return "MULTI_GET";
    case TorchStoreOp::kMultiSet:
      return "MULTI_SET";
    case TorchStoreOp::kCancelWait:
      return "CANCEL_WAIT";
    case TorchStoreOp::kPing:
      return "PING";
    case TorchStoreOp::kQueuePush:
      return "QUEUE_PUSH";
    case TorchStoreOp::kQueuePop:
      return "QUEUE_POP";
    case TorchStoreOp::kQueueLen:
      return "QUEUE_LEN";
    case TorchStoreOp::kList:
      return "LIST";
  }
  return "?";
}

bool TorchStoreOpcode(TorchStoreDialect dialect, TorchStoreOp op, uint8_t* code) {
  const auto find = [&](const auto& ops) {
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i] == op) {
        *code = static_cast<uint8_t>(i);
        return true;
      }
    }
    return false;
  };
  return dialect == TorchStoreDialect::kLegacy ? find(kLegacyOps) : find(kModernOps);
}

TorchStoreDecoder::TorchStoreDecoder(TorchStoreDialect dialect, TorchStoreLimits limits)
    : dialect_(dialect), limits_(limits) {}

void TorchStoreDecoder::Append(std::string_view bytes) {
  // Drop what earlier requests used before growing, so a long-lived connection holds one partial field.
  if (consumed_ > 0 && consumed_ == buffer_.size()) {
    buffer_.clear();
    consumed_ = 0;
  } else if (consumed_ > 4096 && consumed_ * 2 > buffer_.size()) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  buffer_.append(bytes);
}

TorchStoreDecoder::Result TorchStoreDecoder::Fail(std::string message) {
  error_ = std::string(TorchStoreDialectName(dialect_)) + " " + std::move(message);
  return Result::kError;
}

TorchStoreDecoder::Field TorchStoreDecoder::NextField() const {
  const size_t done = fields_done_;
  switch (request_.op) {
    case TorchStoreOp::kValidate:
    case TorchStoreOp::kPing:
      return done == 0 ? Field::kUint32 : Field::kNone;
    case TorchStoreOp::kSet:
    case TorchStoreOp::kAppend:
    case TorchStoreOp::kQueuePush:
      return done == 0 ? Field::kKey : done == 1 ? Field::kValue : Field::kNone;
    case TorchStoreOp::kCompareSet:
      return done == 0 ? Field::kKey : done <= 2 ? Field::kValue : Field::kNone;
    case TorchStoreOp::kGet:
    case TorchStoreOp::kWatchKey:
    case TorchStoreOp::kDeleteKey:
    case TorchStoreOp::kQueuePop:
    case TorchStoreOp::kQueueLen:
      return done == 0 ? Field::kKey : Field::kNone;
    case TorchStoreOp::kAdd:
      return done == 0 ? Field::kKey : done == 1 ? Field::kInt64 : Field::kNone;
    case TorchStoreOp::kCheck:
    case TorchStoreOp::kWait:
    case TorchStoreOp::kMultiGet:
      return done == 0 ? Field::kCount : done <= count_ ? Field::kKey : Field::kNone;
    case TorchStoreOp::kMultiSet:
      if (done == 0) return Field::kCount;
      if (done > 2 * count_) return Field::kNone;
      return done % 2 == 1 ? Field::kKey : Field::kValue;
    case TorchStoreOp::kGetNumKeys:
    case TorchStoreOp::kCancelWait:
    case TorchStoreOp::kList:
      return Field::kNone;
  }
  return Field::kNone;
}

TorchStoreDecoder::Result TorchStoreDecoder::Next(TorchStoreRequest* request) {
  if (!error_.empty()) return Result::kError;
  for (;;) {
    const size_t available = buffer_.size() - consumed_;
    const char* p = buffer_.data() + consumed_;
    if (!in_request_) {
      if (available < 1) return Result::kNeedMore;
      const auto code = static_cast<unsigned char>(p[0]);
      const bool legacy = dialect_ == TorchStoreDialect::kLegacy;
      const size_t known = legacy ? kLegacyOps.size() : kModernOps.size();
      if (code >= known) return Fail("unknown opcode " + std::to_string(code));
      const TorchStoreOp op = legacy ? kLegacyOps[code] : kModernOps[code];
      if (!legacy && !validated_ && op != TorchStoreOp::kValidate) {
        return Fail(std::string("first request is ") + TorchStoreOpName(op) + " (opcode " +
                    std::to_string(code) + "), not VALIDATE");
      }
      request_ = TorchStoreRequest{};
      request_.op = op;
      fields_done_ = 0;
      count_ = 0;
      request_bytes_ = 0;
      in_request_ = true;
      ++consumed_;
      continue;
    }
    const auto name = [&] {
      uint8_t code = 0;
      TorchStoreOpcode(dialect_, request_.op, &code);
      return std::string(TorchStoreOpName(request_.op)) + " (opcode " + std::to_string(code) + ")";
    };
    switch (NextField()) {
      case Field::kNone:
        in_request_ = false;
        if (request_.op == TorchStoreOp::kValidate) {
          if (request_.number != kTorchStoreValidateMagic) {
            char magic[64];
            std::snprintf(magic, sizeof magic, ": magic 0x%08X, expected 0x%08X", request_.number,
                          kTorchStoreValidateMagic);
            return Fail(name() + magic);
          }
          validated_ = true;
        }
        *request = std::move(request_);
        return Result::kRequest;
      case Field::kUint32:
        if (available < 4) return Result::kNeedMore;
        request_.number = Load<uint32_t>(p);
        consumed_ += 4;
        break;
      case Field::kInt64:
        if (available < 8) return Result::kNeedMore;
        request_.delta = Load<int64_t>(p);
        consumed_ += 8;
        break;
      case Field::kCount:
        if (available < 8) return Result::kNeedMore;
        count_ = Load<uint64_t>(p);
        if (count_ > limits_.max_keys_per_request) {
          return Fail(name() + ": " + std::to_string(count_) + " keys, over the limit of " +
                      std::to_string(limits_.max_keys_per_request));
        }
        {
          // Only what a few keys take: the count is the peer's word, the keys are not here yet.
          const size_t reserve = std::min<uint64_t>(count_, 1024);
          request_.keys.reserve(reserve);
          if (request_.op == TorchStoreOp::kMultiSet) request_.values.reserve(reserve);
        }
        consumed_ += 8;
        break;
      case Field::kKey:
      case Field::kValue: {
        if (available < 8) return Result::kNeedMore;
        const bool key = NextField() == Field::kKey;
        const auto size = Load<uint64_t>(p);
        const size_t limit = key ? limits_.max_key_bytes : limits_.max_value_bytes;
        if (size > limit) {
          return Fail(name() + ": " + (key ? "key" : "value") + " of " + std::to_string(size) +
                      " bytes, over the limit of " + std::to_string(limit));
        }
        if (request_bytes_ + size > limits_.max_request_bytes) {
          return Fail(name() + ": over " + std::to_string(limits_.max_request_bytes) +
                      " bytes of keys and values");
        }
        if (available - 8 < size) return Result::kNeedMore;
        (key ? request_.keys : request_.values).emplace_back(p + 8, size);
        request_bytes_ += size;
        consumed_ += 8 + size;
        break;
      }
    }
    ++fields_done_;
  }
}

void AppendTorchStoreByte(uint8_t value, std::string* out) { out->push_back(static_cast<char>(value)); }

void AppendTorchStoreUint32(uint32_t value, std::string* out) { Store(value, out); }

void AppendTorchStoreInt64(int64_t value, std::string* out) { Store(value, out); }

void AppendTorchStoreBytes(std::string_view bytes, std::string* out) {
  Store(static_cast<uint64_t>(bytes.size()), out);
  out->append(bytes);
}

bool EncodeTorchStoreRequest(TorchStoreDialect dialect, const TorchStoreRequest& request, std::string* out) {
  uint8_t code = 0;
  if (!TorchStoreOpcode(dialect, request.op, &code)) return false;
  AppendTorchStoreByte(code, out);
  if (IsCounted(request.op)) {
    // MULTI_SET's count goes out as int64 (§2); the bytes are the same for any real count.
    Store(static_cast<uint64_t>(request.keys.size()), out);
    for (size_t i = 0; i < request.keys.size(); ++i) {
      AppendTorchStoreBytes(request.keys[i], out);
      if (request.op == TorchStoreOp::kMultiSet) AppendTorchStoreBytes(request.values.at(i), out);
    }
    return true;
  }
  for (const std::string& key : request.keys) AppendTorchStoreBytes(key, out);
  for (const std::string& value : request.values) AppendTorchStoreBytes(value, out);
  if (request.op == TorchStoreOp::kAdd) AppendTorchStoreInt64(request.delta, out);
  if (request.op == TorchStoreOp::kValidate || request.op == TorchStoreOp::kPing) {
    AppendTorchStoreUint32(request.number, out);
  }
  return true;
}

}  // namespace distrun
