#pragma once
// PyTorch's TCPStore connections once the port's loop has told them apart (agent_channel_server.cc): served
// by event loops of their own over one TorchStorePort. A rank costs the store ~50 us, nearly all of it the
// kernel's (its accept, a send per reply, which on loopback also runs the receiver's side), so one loop
// serves ~20,000 ranks a second; loops on node 0's other cores serve several times that, and agents' frames
// never wait behind a burst of ranks.
//
// Each connection belongs to one loop, which alone reads, writes and closes it. The port (keys, waiters,
// decoders) is shared under one mutex; a reply for a connection of another loop is appended to that
// connection's output under the same mutex, so every connection's replies keep the order the store made them
// in, and its loop is woken to write them.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/torch_store/torch_store_port.h"

namespace spdlog {
class logger;
}

namespace distrun {

struct TorchStoreLoopsConfig {
  size_t threads = 1;
  size_t max_store_bytes = size_t{1} << 30;  // TorchStore's limit
  // Per connection: output it has not read; over it, it is closed. One MULTI_GET's worth, and some.
  size_t max_queued_bytes = TorchStoreLimits{}.max_request_bytes + (size_t{16} << 20);
  // The job's epoch (CoordinationService::CurrentRound), read before each connection's requests and every
  // 100 ms; a newer one empties the store and closes the earlier epochs' connections. Null: always 0.
  std::function<int()> current_round;
  // Recovering in place (--recovery in-process): an earlier epoch's connections are not closed when the
  // next begins, but left idle until their client closes them, or refused (and closed) at their next
  // request. The survivors' processes keep their destroyed group's store objects until Python frees them,
  // and torch 1.13's client spins on a connection its server closed (its callback thread polls the EOF at
  // 100 % of a core).
  bool keep_retired_open = false;
  // A connection closed for an error gets this long to read the replies that came before.
  std::chrono::milliseconds close_timeout{10'000};
  std::shared_ptr<spdlog::logger> log;
};

// The number of loops for a machine with `cores` cores: one per four, at least one, at most four (a rank
// costs the kernel's work on both ends of its connection; node 0's own workers need the rest).
size_t DefaultTorchStoreThreads(unsigned cores);

class TorchStoreLoops {
 public:
  explicit TorchStoreLoops(TorchStoreLoopsConfig config);
  // Closes every connection.
  ~TorchStoreLoops();
  TorchStoreLoops(const TorchStoreLoops&) = delete;
  TorchStoreLoops& operator=(const TorchStoreLoops&) = delete;

  // Takes over `fd` (non-blocking, nothing of it read yet), a TCPStore connection in `dialect` from `peer`
  // (for messages). Any thread.
  void Adopt(int fd, TorchStoreDialect dialect, std::string peer);
  // Closes every connection, and each one adopted later at once (the job is over); returns when they are.
  void CloseAll();

  size_t threads() const { return loops_.size(); }

 private:
  class Loop;
  struct Conn;
  using ConnPtr = std::shared_ptr<Conn>;

  // A connection's loop: serves its bytes (any replies go to their connections' outputs).
  void Feed(const ConnPtr& conn, std::string_view bytes);
  // A connection's loop, closing it: the port forgets it.
  void Forget(const Conn& conn);
  void SyncEpoch();

  TorchStoreLoopsConfig config_;
  std::shared_ptr<spdlog::logger> log_;
  std::atomic<bool> closed_{false};
  // Written under mu_; read without it first, so that a request in an unchanged epoch takes mu_ once.
  std::atomic<int> epoch_ = 0;
  std::mutex mu_;  // guards what follows, up to loops_
  TorchStorePort port_;
  std::unordered_map<uint64_t, ConnPtr> open_;  // by id
  uint64_t next_id_ = 1;
  size_t next_loop_ = 0;
  std::vector<std::unique_ptr<Loop>> loops_;  // made in the constructor, then unchanged
};

}  // namespace distrun
