#include "runtime/torch_store/torch_store.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <utility>

#include "runtime/recovery/worker_message.h"

namespace distrun {
namespace {

// std::stoll as torch's servers call it: leading space, a sign, then the longest run of digits ("12abc" is
// 12); false with no digits or on overflow, where torch throws.
bool ParseLeadingInt64(const std::string& text, int64_t* value) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const long long parsed = std::strtoll(begin, &end, 10);
  if (end == begin || errno == ERANGE) return false;
  *value = parsed;
  return true;
}

// A key for a message: keys are bytes, so only printable ones are shown as they are, and long ones cut.
std::string Printable(const std::string& key) {
  std::string out = "\"";
  for (size_t i = 0; i < key.size() && i < 64; ++i) {
    const auto c = static_cast<unsigned char>(key[i]);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  if (key.size() > 64) out += "...";
  return out + "\"";
}

}  // namespace

void TorchStore::Connected(uint64_t connection) {
  std::lock_guard lock(mu_);
  connections_.try_emplace(connection);
}

void TorchStore::Disconnected(uint64_t connection) {
  std::lock_guard lock(mu_);
  auto it = connections_.find(connection);
  if (it == connections_.end()) return;
  DropWaiters(it->second);
  connections_.erase(it);
}

std::vector<uint64_t> TorchStore::StartEpoch(int64_t epoch) {
  std::lock_guard lock(mu_);
  if (epoch <= epoch_) return {};
  epoch_ = epoch;
  std::vector<uint64_t> retired;
  retired.reserve(connections_.size());
  for (const auto& entry : connections_) retired.push_back(entry.first);
  std::sort(retired.begin(), retired.end());
  connections_.clear();
  waiters_.clear();
  waiting_on_.clear();
  kv_.clear();
  queues_.clear();
  bytes_ = 0;
  return retired;
}

int64_t TorchStore::epoch() const {
  std::lock_guard lock(mu_);
  return epoch_;
}

size_t TorchStore::size() const {
  std::lock_guard lock(mu_);
  return kv_.size();
}

size_t TorchStore::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

size_t TorchStore::ValueBytes(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? 0 : key.size() + it->second.size();
}

std::string TorchStore::CheckRoom(const TorchStoreRequest& request) const {
  size_t grows = 0;
  const auto& keys = request.keys;
  const auto& values = request.values;
  // A value replaced frees what it held (a COMPARE_SET or ADD that ends up storing nothing is counted as
  // if it stored: the limit is a bound, not an exact sum).
  auto replacing = [this](const std::string& key, size_t value_bytes) {
    const size_t now = ValueBytes(key);
    const size_t after = key.size() + value_bytes;
    return after > now ? after - now : 0;
  };
  switch (request.op) {
    case TorchStoreOp::kSet:
      grows = replacing(keys.at(0), values.at(0).size());
      break;
    case TorchStoreOp::kAppend:
    case TorchStoreOp::kQueuePush:
      grows = keys.at(0).size() + values.at(0).size();
      break;
    case TorchStoreOp::kCompareSet:
      grows = replacing(keys.at(0), values.at(1).size());
      break;
    case TorchStoreOp::kAdd:
      grows = replacing(keys.at(0), 20);  // an int64 in decimal
      break;
    case TorchStoreOp::kMultiSet:
      for (size_t i = 0; i < keys.size(); ++i) grows += keys[i].size() + values.at(i).size();
      break;
    default:
      return {};
  }
  if (bytes_ + grows <= max_bytes_) return {};
  return std::string(TorchStoreOpName(request.op)) + " of " + std::to_string(grows) +
         " bytes: the store holds " + std::to_string(bytes_) + " of its " + std::to_string(max_bytes_) +
         " bytes (keys, values and queued items)";
}

bool TorchStore::Exists(const std::string& key) const {
  if (kv_.count(key) > 0) return true;
  auto queue = queues_.find(key);
  return queue != queues_.end() && !queue->second.empty();
}

void TorchStore::CountKey(uint64_t waiter_id, std::vector<TorchStoreReply>* replies) {
  auto it = waiters_.find(waiter_id);
  if (it == waiters_.end() || --it->second.missing > 0) return;
  const uint64_t connection = it->second.connection;
  waiters_.erase(it);
  auto owner = connections_.find(connection);
  if (owner != connections_.end()) std::erase(owner->second.waiters, waiter_id);
  std::string bytes;
  AppendTorchStoreByte(kTorchStoreStopWaiting, &bytes);
  replies->push_back({connection, std::move(bytes)});
}

void TorchStore::WakeAll(const std::string& key, std::vector<TorchStoreReply>* replies) {
  auto it = waiting_on_.find(key);
  if (it == waiting_on_.end()) return;
  const std::vector<uint64_t> ids = std::move(it->second);
  waiting_on_.erase(it);
  for (uint64_t id : ids) CountKey(id, replies);
}

void TorchStore::WakeOne(const std::string& key, std::vector<TorchStoreReply>* replies) {
  auto it = waiting_on_.find(key);
  if (it == waiting_on_.end()) return;
  const uint64_t id = it->second.front();
  it->second.erase(it->second.begin());
  if (it->second.empty()) waiting_on_.erase(it);
  CountKey(id, replies);
}

void TorchStore::Set(const std::string& key, std::string value, std::vector<TorchStoreReply>* replies) {
  bytes_ = bytes_ - ValueBytes(key) + key.size() + value.size();
  kv_[key] = std::move(value);
  WakeAll(key, replies);
}

void TorchStore::DropWaiters(Connection& connection) {
  for (uint64_t id : connection.waiters) {
    auto waiter = waiters_.find(id);
    if (waiter == waiters_.end()) continue;
    for (const std::string& key : waiter->second.keys) {
      auto list = waiting_on_.find(key);
      if (list == waiting_on_.end()) continue;
      std::erase(list->second, id);
      if (list->second.empty()) waiting_on_.erase(list);
    }
    waiters_.erase(waiter);
  }
  connection.waiters.clear();
}

TorchStoreOutcome TorchStore::HandleRequest(uint64_t connection, const TorchStoreRequest& request) {
  TorchStoreOutcome outcome;
  std::lock_guard lock(mu_);
  if (connections_.count(connection) == 0) {
    outcome.error = std::string(TorchStoreOpName(request.op)) + " from connection " +
                    std::to_string(connection) + ", which is not connected in epoch " +
                    std::to_string(epoch_);
    return outcome;
  }
  // A worker recovering in place keeps its generation's namespace (distrun.torch): one of an older
  // generation never reaches the new world's keys, nor writes beside them.
  for (const std::string& key : request.keys) {
    std::optional<int64_t> generation = GenerationOfKey(key);
    if (generation && *generation != epoch_) {
      outcome.error = std::string(TorchStoreOpName(request.op)) + " of key '" + key.substr(0, 64) +
                      "', which belongs to generation " + std::to_string(*generation) +
                      ", while the job's store is in generation " + std::to_string(epoch_);
      return outcome;
    }
  }
  outcome.error = CheckRoom(request);
  if (outcome.error.empty()) Handle(request, connection, &outcome);
  return outcome;
}

void TorchStore::Handle(const TorchStoreRequest& request, uint64_t connection, TorchStoreOutcome* outcome) {
  // The requester's reply goes first; waits the request completes are answered after it.
  std::string reply;
  bool replies = true;
  std::vector<TorchStoreReply> woken;
  switch (request.op) {
    case TorchStoreOp::kValidate:  // the decoder checked the magic; VALIDATE has no reply
      replies = false;
      break;
    case TorchStoreOp::kPing:
      AppendTorchStoreUint32(request.number, &reply);
      break;
    case TorchStoreOp::kSet:
      Set(request.keys.at(0), request.values.at(0), &woken);
      replies = false;
      break;
    case TorchStoreOp::kCompareSet: {
      // §4's table, torch's every server alike; a key it creates wakes its waiters (1.13's server does not).
      const std::string& key = request.keys.at(0);
      const std::string& expected = request.values.at(0);
      const std::string& desired = request.values.at(1);
      auto it = kv_.find(key);
      if (it == kv_.end() ? expected.empty() : it->second == expected) {
        Set(key, desired, &woken);
        AppendTorchStoreBytes(desired, &reply);
      } else {
        // A missing key with a non-empty `expected` answers `expected` and stores nothing.
        AppendTorchStoreBytes(it == kv_.end() ? expected : it->second, &reply);
      }
      break;
    }
    case TorchStoreOp::kGet: {
      auto it = kv_.find(request.keys.at(0));
      AppendTorchStoreBytes(it == kv_.end() ? std::string_view{} : std::string_view{it->second}, &reply);
      break;
    }
    case TorchStoreOp::kAdd: {
      const std::string& key = request.keys.at(0);
      int64_t value = request.delta;
      auto it = kv_.find(key);
      if (it != kv_.end()) {
        int64_t current = 0;
        if (!ParseLeadingInt64(it->second, &current)) {
          outcome->error = "ADD to key " + Printable(key) + ", whose value " + Printable(it->second) +
                           " is not a decimal int64";
          return;
        }
        // Wraps where torch's signed sum would overflow.
        value = static_cast<int64_t>(static_cast<uint64_t>(current) + static_cast<uint64_t>(request.delta));
      }
      Set(key, std::to_string(value), &woken);
      AppendTorchStoreInt64(value, &reply);
      break;
    }
    case TorchStoreOp::kCheck: {
      const bool ready = std::all_of(request.keys.begin(), request.keys.end(),
                                     [this](const std::string& key) { return Exists(key); });
      AppendTorchStoreByte(ready ? kTorchStoreReady : kTorchStoreNotReady, &reply);
      break;
    }
    case TorchStoreOp::kWait: {
      Waiter waiter;
      waiter.connection = connection;
      for (const std::string& key : request.keys) {
        if (!Exists(key)) waiter.keys.push_back(key);
      }
      if (waiter.keys.empty()) {
        AppendTorchStoreByte(kTorchStoreStopWaiting, &reply);
        break;
      }
      // Answered when a write creates the last missing key; until then nothing is sent for it.
      replies = false;
      const uint64_t id = next_waiter_++;
      for (const std::string& key : waiter.keys) waiting_on_[key].push_back(id);
      waiter.missing = waiter.keys.size();
      waiters_.emplace(id, std::move(waiter));
      connections_.at(connection).waiters.push_back(id);
      break;
    }
    case TorchStoreOp::kGetNumKeys:
      AppendTorchStoreInt64(static_cast<int64_t>(kv_.size()), &reply);
      break;
    case TorchStoreOp::kWatchKey:
      AppendTorchStoreByte(kTorchStoreWatchRegistered, &reply);
      break;
    case TorchStoreOp::kDeleteKey:  // wakes nobody: a waiter waits for keys to appear
      bytes_ -= ValueBytes(request.keys.at(0));
      AppendTorchStoreInt64(static_cast<int64_t>(kv_.erase(request.keys.at(0))), &reply);
      break;
    case TorchStoreOp::kAppend:
      bytes_ -= ValueBytes(request.keys.at(0));
      kv_[request.keys.at(0)] += request.values.at(0);
      bytes_ += ValueBytes(request.keys.at(0));
      WakeAll(request.keys.at(0), &woken);
      replies = false;
      break;
    case TorchStoreOp::kMultiGet:
      for (const std::string& key : request.keys) {
        auto it = kv_.find(key);
        AppendTorchStoreBytes(it == kv_.end() ? std::string_view{} : std::string_view{it->second}, &reply);
      }
      break;
    case TorchStoreOp::kMultiSet:
      for (size_t i = 0; i < request.keys.size(); ++i) Set(request.keys[i], request.values.at(i), &woken);
      replies = false;
      break;
    case TorchStoreOp::kCancelWait:
      // Always WAIT_CANCELED, pending wait or not; a cancelled wait is never answered afterwards.
      DropWaiters(connections_.at(connection));
      AppendTorchStoreByte(kTorchStoreWaitCanceled, &reply);
      break;
    case TorchStoreOp::kQueuePush:
      queues_[request.keys.at(0)].push_back(request.values.at(0));
      bytes_ += request.keys.at(0).size() + request.values.at(0).size();
      WakeOne(request.keys.at(0), &woken);
      replies = false;
      break;
    case TorchStoreOp::kQueuePop: {
      auto it = queues_.find(request.keys.at(0));
      const size_t length = it == queues_.end() ? 0 : it->second.size();
      AppendTorchStoreInt64(static_cast<int64_t>(length), &reply);
      if (length > 0) {
        AppendTorchStoreBytes(it->second.front(), &reply);
        bytes_ -= it->first.size() + it->second.front().size();
        it->second.pop_front();
        if (it->second.empty()) queues_.erase(it);
      }
      break;
    }
    case TorchStoreOp::kQueueLen: {
      auto it = queues_.find(request.keys.at(0));
      AppendTorchStoreInt64(static_cast<int64_t>(it == queues_.end() ? 0 : it->second.size()), &reply);
      break;
    }
    case TorchStoreOp::kList: {
      std::vector<const std::string*> keys;
      keys.reserve(kv_.size());
      for (const auto& entry : kv_) keys.push_back(&entry.first);
      // Sorted so that the same map always lists alike; torch's order is its hash map's.
      std::sort(keys.begin(), keys.end(), [](const std::string* a, const std::string* b) { return *a < *b; });
      AppendTorchStoreInt64(static_cast<int64_t>(keys.size()), &reply);
      for (const std::string* key : keys) AppendTorchStoreBytes(*key, &reply);
      break;
    }
  }
  if (replies) outcome->replies.push_back({connection, std::move(reply)});
  for (TorchStoreReply& w : woken) outcome->replies.push_back(std::move(w));
}

}  // namespace distrun
