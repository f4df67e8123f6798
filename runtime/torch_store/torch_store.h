#pragma once
// PyTorch's TCPStore semantics (docs/TORCH_STORE_PROTOCOL.md §4) over one key-value map that every
// connection shares, whichever dialect it speaks: a torch 1.13 worker and a 2.x one see the same keys.
// No sockets here: the port's event loop decodes requests (runtime/torch_store/torch_store_codec.h), hands
// them in with the connection they came from, and writes the replies it gets back to the connections they
// name.
//
// Semantics follow torch's libuv server where the servers differ: GET and MULTI_GET of a missing key
// answer empty bytes; every write that creates a key wakes its waiters, COMPARE_SET included. WAIT is
// answered late: a connection goes on being read and answered while its WAIT is pending (CANCEL_WAIT
// comes in behind it), and the STOP_WAITING byte is sent when the last of its keys appears. The server
// has no wait timeout: clients time out on their own. WATCH_KEY (1.13) is acknowledged but sends no events:
// torch 1.13's Python binding cannot ask for them.
//
// Epochs: each restart round gets a fresh keyspace (torch after PR #135957 no longer namespaces keys by
// attempt, so a store that outlives a round must forget it). StartEpoch drops every key, queue and wait,
// and retires the connections of earlier epochs: the caller closes them, and their requests are refused.
//
// Thread-safe; replies come back to the caller, never through callbacks.

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/torch_store/torch_store_codec.h"

namespace distrun {

// Bytes for one connection.
struct TorchStoreReply {
  uint64_t connection = 0;
  std::string bytes;
};

struct TorchStoreOutcome {
  // To send now, in order: the requester's reply (if its op has one) and the STOP_WAITING bytes of
  // waits the request completed, on any connection.
  std::vector<TorchStoreReply> replies;
  // Set: the request was refused (ADD on a value that is not a number, a connection of an earlier epoch);
  // torch's servers close the connection then, and so must the caller, after sending `replies`.
  std::string error;
};

class TorchStore {
 public:
  // `max_bytes`: keys, values and queued items together; a write past it is refused (its connection is
  // closed), so that a runaway client cannot take node 0's memory.
  explicit TorchStore(size_t max_bytes = size_t{1} << 30) : max_bytes_(max_bytes) {}
  TorchStore(const TorchStore&) = delete;
  TorchStore& operator=(const TorchStore&) = delete;

  // A connection the port found to speak TCPStore joins the current epoch. Ids are the caller's, unique
  // among open connections.
  void Connected(uint64_t connection);
  // Its waits are dropped; nothing is sent for them.
  void Disconnected(uint64_t connection);

  TorchStoreOutcome HandleRequest(uint64_t connection, const TorchStoreRequest& request);

  // Begins epoch `epoch` (greater than the current one, else nothing changes and nothing is returned)
  // with an empty keyspace. Returns the connections of earlier epochs, for the caller to close; they are
  // forgotten here, as if disconnected.
  std::vector<uint64_t> StartEpoch(int64_t epoch);
  int64_t epoch() const;

  // Keys in the key-value map (queues apart), for tests and status.
  size_t size() const;
  // What counts against max_bytes now.
  size_t bytes() const;

 private:
  struct Waiter {
    uint64_t connection = 0;
    std::vector<std::string> keys;  // the keys it waits on that were missing, one entry per registration
    size_t missing = 0;
  };
  struct Connection {
    std::vector<uint64_t> waiters;  // ids into waiters_
  };

  bool Exists(const std::string& key) const;
  // A write made `key` exist: every waiter registered on it counts it (libuv's wakeupWaitingClients).
  void WakeAll(const std::string& key, std::vector<TorchStoreReply>* replies);
  // QUEUE_PUSH: only the oldest waiter counts it (libuv's wakeupOneWaitingClient).
  void WakeOne(const std::string& key, std::vector<TorchStoreReply>* replies);
  void CountKey(uint64_t waiter_id, std::vector<TorchStoreReply>* replies);
  void Set(const std::string& key, std::string value, std::vector<TorchStoreReply>* replies);
  // The bytes `request` would add at most; an error naming the limit when they do not fit.
  std::string CheckRoom(const TorchStoreRequest& request) const;
  size_t ValueBytes(const std::string& key) const;
  void DropWaiters(Connection& connection);
  void Handle(const TorchStoreRequest& request, uint64_t connection, TorchStoreOutcome* outcome);

  mutable std::mutex mu_;
  const size_t max_bytes_;
  size_t bytes_ = 0;
  int64_t epoch_ = 0;
  std::unordered_map<std::string, std::string> kv_;
  std::unordered_map<std::string, std::deque<std::string>> queues_;
  std::unordered_map<uint64_t, Connection> connections_;
  std::unordered_map<uint64_t, Waiter> waiters_;
  std::unordered_map<std::string, std::vector<uint64_t>> waiting_on_;  // key -> waiter ids, oldest first
  uint64_t next_waiter_ = 1;
};

}  // namespace distrun
