#include "runtime/torch_store/torch_store_loops.h"

#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <thread>
#include <utility>

#include "runtime/io/socket_input.h"
#include "runtime/io/socket_output.h"
#include "runtime/io/wakeable_epoll.h"

namespace distrun {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr size_t kReadChunk = 64 * 1024;
constexpr int kLoopWaitMs = 100;

}  // namespace

size_t DefaultTorchStoreThreads(unsigned cores) { return std::clamp<size_t>(cores / 4, 1, 4); }

struct TorchStoreLoops::Conn {
  Conn(int socket, std::string from) : fd(socket), peer(std::move(from)) {}
  const int fd;
  const std::string peer;
  uint64_t id = 0;       // set before it is shared
  Loop* loop = nullptr;  // likewise
  // Its loop only: when a connection closed for an error is dropped even with its replies unread.
  SteadyClock::time_point close_by = SteadyClock::time_point::max();
  // Guarded by mu: any loop queues replies.
  std::mutex mu;
  SocketOutput output;
  bool dirty = false;    // posted to its loop for writing
  bool closing = false;  // close once `output` is written
  bool dead = false;
};

class TorchStoreLoops::Loop {
 public:
  explicit Loop(TorchStoreLoops& owner)
      : owner_(owner), epoll_("the torch store cannot watch its connections"), buffer_(kReadChunk) {
    thread_ = std::thread([this] { Run(); });
  }

  ~Loop() {
    Stop();
    for (Op& op : inbox_) {
      if (op.kind == Op::kAdopt) ::close(op.conn->fd);  // never watched
    }
    for (auto& [fd, conn] : conns_) {
      std::lock_guard lock(conn->mu);
      conn->dead = true;
      ::close(fd);
    }
  }

  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  // Ends the thread; other loops may still post (their posts wait in the inbox until this is destroyed).
  void Stop() {
    stop_.store(true);
    epoll_.Wake();
    if (thread_.joinable()) thread_.join();
  }

  void Adopt(const ConnPtr& conn) { Post({Op::kAdopt, conn}); }
  // Its output grew (any thread).
  void MarkDirty(const ConnPtr& conn) { Post({Op::kFlush, conn}); }
  // Its epoch is over (any thread).
  void Retire(const ConnPtr& conn) { Post({Op::kRetire, conn}); }

  void CloseAllAndWait() {
    std::unique_lock lock(inbox_mu_);
    close_all_ = true;
    epoll_.Wake();
    closed_cv_.wait(lock, [this] { return closed_all_done_; });
  }

 private:
  struct Op {
    enum Kind { kAdopt, kFlush, kRetire } kind;
    ConnPtr conn;
  };

  void Post(Op op) {
    bool wake = false;
    {
      std::lock_guard lock(inbox_mu_);
      wake = inbox_.empty();
      inbox_.push_back(std::move(op));
    }
    if (wake && std::this_thread::get_id() != thread_.get_id()) epoll_.Wake();
  }

  void Run() {
    std::vector<epoll_event> events(256);
    auto next_scan = SteadyClock::now();
    while (!stop_.load()) {
      epoll_.WaitForConnections(
          &events, kLoopWaitMs, conns_, [this](const ConnPtr& c) { Flush(c); },
          [this](const ConnPtr& c, uint32_t ev) { Read(c, ev); });
      TakeInbox();
      const auto now = SteadyClock::now();
      if (now >= next_scan) {
        next_scan = now + std::chrono::milliseconds(kLoopWaitMs);
        owner_.SyncEpoch();
        std::vector<ConnPtr> late;
        for (auto& [fd, conn] : conns_) {
          if (now >= conn->close_by) late.push_back(conn);
        }
        for (const ConnPtr& conn : late) Drop(conn);
      }
    }
  }

  // Until nothing is left: serving one connection's bytes can post more for this loop.
  void TakeInbox() {
    std::vector<Op> ops;
    while (true) {
      bool close_all = false;
      {
        std::lock_guard lock(inbox_mu_);
        ops.swap(inbox_);
        close_all = close_all_ && !closed_all_done_;
      }
      if (close_all) {
        CloseEverything(ops);
        return;
      }
      if (ops.empty()) return;
      for (const Op& op : ops) {
        switch (op.kind) {
          case Op::kAdopt: {
            conns_.emplace(op.conn->fd, op.conn);
            // Bytes that came before are reported at once: adding a ready descriptor raises its first edge.
            epoll_.Watch(op.conn->fd, EPOLLIN | EPOLLRDHUP | EPOLLET);
            break;
          }
          case Op::kFlush: {
            std::lock_guard lock(op.conn->mu);
            op.conn->dirty = false;
          }
            Flush(op.conn);
            break;
          case Op::kRetire:
            Drop(op.conn);
            break;
        }
      }
      ops.clear();
    }
  }

  void CloseEverything(std::vector<Op>& ops) {
    for (const Op& op : ops) {
      if (op.kind == Op::kAdopt) conns_.emplace(op.conn->fd, op.conn);  // Drop's epoll_ctl DEL fails: fine
    }
    std::vector<ConnPtr> all;
    for (auto& [fd, conn] : conns_) all.push_back(conn);
    for (const ConnPtr& conn : all) Drop(conn);
    std::lock_guard lock(inbox_mu_);
    inbox_.clear();
    closed_all_done_ = true;
    closed_cv_.notify_all();
  }

  // Edge-triggered: reads what the socket holds (`events`: what epoll reported).
  void Read(const ConnPtr& conn, uint32_t events) {
    if (conn->dead) return;  // dropped by the Flush before: its descriptor may be another's by now
    const bool open = ReadAvailable(conn->fd, &buffer_, events, [&](std::string_view bytes) {
      if (conn->close_by != SteadyClock::time_point::max()) return;  // closing: the rest is not read
      owner_.Feed(conn, bytes);
    });
    if (!open) Drop(conn, /*peer_gone=*/true);  // closed by the worker, or broken
  }

  // Writes what is queued; watches for room when the socket is full; closes a connection that is done.
  void Flush(const ConnPtr& conn) {
    bool drop = false;
    {
      std::lock_guard lock(conn->mu);
      if (conn->dead) return;
      drop =
          !WriteQueued(epoll_.fd(), conn->fd, &conn->output) || (conn->closing && conn->output.out.empty());
    }
    if (drop) Drop(conn);
  }

  // Never under conn->mu or the owner's mutex. `peer_gone`: its input ended or broke, so nothing is left to
  // read away before an orderly close, and close() alone sends what ends it.
  void Drop(const ConnPtr& conn, bool peer_gone = false) {
    {
      std::lock_guard lock(conn->mu);
      if (conn->dead) return;
      conn->dead = true;
      conn->output.out.clear();
    }
    owner_.Forget(*conn);
    epoll_.Forget(conn->fd);
    if (peer_gone) {
      ::close(conn->fd);
    } else {
      CloseInOrder(conn->fd, &buffer_);
    }
    conns_.erase(conn->fd);
  }

  TorchStoreLoops& owner_;
  WakeableEpoll epoll_;
  std::vector<char> buffer_;
  std::unordered_map<int, ConnPtr> conns_;  // this loop's thread only
  std::atomic<bool> stop_{false};
  std::mutex inbox_mu_;
  std::vector<Op> inbox_;
  bool close_all_ = false;
  bool closed_all_done_ = false;
  std::condition_variable closed_cv_;
  std::thread thread_;  // last: starts once the rest is made
};

TorchStoreLoops::TorchStoreLoops(TorchStoreLoopsConfig config)
    : config_(std::move(config)),
      log_(config_.log ? config_.log : spdlog::default_logger()),
      port_(config_.max_store_bytes, TorchStoreLimits{}) {
  for (size_t i = 0; i < std::max<size_t>(config_.threads, 1); ++i)
    loops_.push_back(std::make_unique<Loop>(*this));
}

TorchStoreLoops::~TorchStoreLoops() {
  for (auto& loop : loops_) loop->Stop();  // all of them first: a running loop posts to the others
  loops_.clear();
}

void TorchStoreLoops::Adopt(int fd, TorchStoreDialect dialect, std::string peer) {
  if (closed_.load()) {
    ::close(fd);
    return;
  }
  SyncEpoch();
  auto conn = std::make_shared<Conn>(fd, std::move(peer));
  {
    std::lock_guard lock(mu_);
    conn->id = next_id_++;
    conn->loop = loops_[next_loop_++ % loops_.size()].get();
    port_.Open(conn->id, dialect);
    open_.emplace(conn->id, conn);
  }
  conn->loop->Adopt(conn);
}

void TorchStoreLoops::CloseAll() {
  closed_.store(true);
  for (auto& loop : loops_) loop->CloseAllAndWait();
}

void TorchStoreLoops::Feed(const ConnPtr& conn, std::string_view bytes) {
  SyncEpoch();
  std::vector<ConnPtr> woken;
  TorchStorePortOutput out;
  {
    std::lock_guard lock(mu_);
    if (!open_.contains(conn->id)) return;  // retired with an earlier epoch; its loop closes it
    out = port_.Feed(conn->id, bytes);
    for (TorchStoreReply& reply : out.replies) {
      auto it = open_.find(reply.connection);
      if (it == open_.end()) continue;
      Conn& to = *it->second;
      std::lock_guard conn_lock(to.mu);
      if (to.dead || to.closing) continue;
      to.output.out.append(reply.bytes);
      if (to.output.out.size() - to.output.sent > config_.max_queued_bytes)
        to.closing = true;  // it does not read
      if (!to.dirty) {
        to.dirty = true;
        woken.push_back(it->second);
      }
    }
    if (!out.error.empty()) {
      // torch's servers close such a connection too: its client throws, and the service goes on. What came
      // before is written first.
      std::lock_guard conn_lock(conn->mu);
      conn->closing = true;
      if (!conn->dirty) {
        conn->dirty = true;
        woken.push_back(conn);
      }
    }
  }
  if (!out.error.empty()) {
    log_->warn("closed the TCPStore connection from {}: {}", conn->peer, out.error);
    conn->close_by = SteadyClock::now() + config_.close_timeout;
  }
  for (const ConnPtr& c : woken) c->loop->MarkDirty(c);
}

void TorchStoreLoops::Forget(const Conn& conn) {
  std::lock_guard lock(mu_);
  if (open_.erase(conn.id) > 0) port_.Close(conn.id);
}

void TorchStoreLoops::SyncEpoch() {
  if (!config_.current_round) return;
  const int round = config_.current_round();
  if (round <= epoch_.load()) return;
  std::vector<ConnPtr> retired;
  {
    std::lock_guard lock(mu_);
    if (round <= epoch_) return;  // another loop began it meanwhile
    epoch_ = round;
    for (uint64_t id : port_.StartEpoch(round)) {
      auto it = open_.find(id);
      if (it == open_.end() || config_.keep_retired_open) continue;  // refused at its next request
      retired.push_back(it->second);
      open_.erase(it);
      port_.Close(id);
    }
  }
  if (!retired.empty()) {
    log_->debug("epoch {}: a fresh torch store; closing {} TCPStore connection(s) of earlier epochs", round,
                retired.size());
  } else if (config_.keep_retired_open) {
    log_->debug(
        "epoch {}: a fresh torch store; earlier epochs' connections are refused at their next request",
        round);
  }
  for (const ConnPtr& conn : retired) conn->loop->Retire(conn);
}

}  // namespace distrun
