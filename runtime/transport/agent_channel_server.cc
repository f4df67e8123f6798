#include "runtime/transport/agent_channel_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <vector>

#include "runtime/auth/credential_checks.h"
#include "runtime/auth/job_hosts.h"
#include "runtime/auth/token_check.h"
#include "runtime/distrun.pb.h"
#include "runtime/io/socket_input.h"
#include "runtime/io/socket_output.h"
#include "runtime/io/tcp_retransmits.h"
#include "runtime/io/wakeable_epoll.h"
#include "runtime/torch_store/torch_store_codec.h"
#include "runtime/torch_store/torch_store_loops.h"
#include "runtime/transport/agent_frames.h"
#include "runtime/transport/agent_session.h"
#include "runtime/transport/proto_convert.h"

namespace distrun {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr size_t kReadChunk = 64 * 1024;
// Answers queued for an agent that does not read them: it is dropped past this.
constexpr size_t kMaxQueuedBytes = 16 << 20;
// What an agent may send while its munge credential is checked: its first messages, not more.
constexpr size_t kMaxWhileVerifyingBytes = 1 << 20;
// Refusals (strangers' TCPStore connections, agents munge did not admit) logged one by one; after that every
// this-many-th.
constexpr uint64_t kRefusalsLoggedInFull = 10;
constexpr uint64_t kRefusalLogEvery = 1000;

bool LogRefusal(uint64_t count) { return count <= kRefusalsLoggedInFull || count % kRefusalLogEvery == 0; }
// Waits of the loop and the acceptor: hello deadlines are checked this often, a paused accept retried.
constexpr int kLoopWaitMs = 100;

std::string PeerName(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "an unknown peer";
  char host[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(a->sin_port));
  }
  auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
  ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
  return "[" + std::string(host) + "]:" + std::to_string(ntohs(a->sin6_port));
}

}  // namespace

class AgentChannelServer::Loop {
 public:
  Loop(CoordinationService& service, int listen_fd, AgentChannelConfig config)
      : service_(service),
        config_(std::move(config)),
        log_(config_.log ? config_.log : spdlog::default_logger()),
        listen_fd_(listen_fd),
        buffer_(kReadChunk) {
    if (config_.torch_store) {
      store_ = std::make_unique<TorchStoreLoops>(TorchStoreLoopsConfig{
          .threads = config_.torch_store_threads > 0
                         ? config_.torch_store_threads
                         : DefaultTorchStoreThreads(std::thread::hardware_concurrency()),
          .max_store_bytes = config_.torch_store_max_bytes,
          .current_round = [this] { return service_.CurrentRound(); },
          .keep_retired_open = service_.RecoversInPlace(),
          .close_timeout = config_.hello_timeout,
          .log = log_});
    }
    if (config_.munge) {
      checks_ = std::make_unique<CredentialChecks>(config_.munge, config_.admission,
                                                   [this](uint64_t id, const AdmissionVerdict& verdict) {
                                                     {
                                                       std::lock_guard lock(verdicts_mu_);
                                                       verdicts_.emplace_back(id, verdict);
                                                     }
                                                     Wake();
                                                   });
    }
    stop_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (stop_fd_ < 0) {
      const std::string why = std::strerror(errno);
      CloseFds();
      throw std::runtime_error("the runtime cannot watch its port: " + why);
    }
    thread_ = std::thread([this] { Run(); });
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }

  ~Loop() {
    checks_.reset();  // its verdicts wake this loop
    stop_.store(true);
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(stop_fd_, &one, sizeof one);
    acceptor_.join();
    Wake();
    thread_.join();
    store_.reset();                        // its loops read the service's round
    for (int fd : accepted_) ::close(fd);  // accepted after the loop's last look
    for (auto& [fd, conn] : conns_) {
      std::lock_guard lock(conn->mu);
      conn->dead = true;
      ::close(fd);
    }
    conns_.clear();
    CloseFds();
  }

  void CloseAll(const std::string& why) {
    std::unique_lock lock(close_mu_);
    close_why_ = why;
    close_requested_ = true;
    Wake();
    close_cv_.wait(lock, [this] { return close_done_; });
  }

  size_t connections() const { return open_.load(); }

 private:
  struct Conn {
    Conn(int socket, uint64_t number, size_t max_frame)
        : fd(socket), id(number), reader(std::min(max_frame, kMaxHelloFrameBytes)) {}
    const int fd;
    const uint64_t id;  // unique for the loop's life (descriptors are reused)
    // Loop thread only.
    enum class Phase { kPreface, kHello, kOpen } phase = Phase::kPreface;
    FrameReader reader;
    SteadyClock::time_point hello_deadline;
    bool refusing = false;
    bool verifying = false;              // its hello's munge credential is being checked; frames wait
    std::optional<int> credential_node;  // the node its credential was made for
    bool spoke = false;             // sent a byte (a 1.13 worker's second TCPStore connection never does)
    std::string address;            // an admitted agent's peer address (JobHosts)
    RetransmitCounter retransmits;  // read at each heartbeat: does the link drop packets?
    // Guarded by mu: any thread queues answers.
    std::mutex mu;
    SocketOutput output;
    bool dirty = false;    // in the loop's list of connections with output
    bool closing = false;  // close once `output` is written
    bool dead = false;
    // Once admitted: what its frames do (agent_session.h), and the way back to it the session holds.
    std::shared_ptr<AgentSession::Link> link;
    std::unique_ptr<AgentSession> session;
  };
  using ConnPtr = std::shared_ptr<Conn>;

  // An admitted connection's side of its session; held by the connection, weakly by the session and the
  // service's sinks, so that news for a connection that is gone is dropped.
  class ConnLink : public AgentSession::Link {
   public:
    ConnLink(Loop& loop, const ConnPtr& conn) : loop_(loop), conn_(conn) {}
    void Send(const v1::CoordinatorFrame& frame) override {
      if (auto c = conn_.lock()) loop_.Queue(c, frame);
    }
    void Refuse(const Status& status) override {
      if (auto c = conn_.lock()) loop_.Refuse(c, status);
    }
    void RefuseAgent(const std::string& why) override {
      if (auto c = conn_.lock()) loop_.RefuseAgent(c, why);
    }
    uint32_t Retransmits() override {
      auto c = conn_.lock();
      return c ? c->retransmits.Since(c->fd) : 0;
    }

   private:
    Loop& loop_;
    const std::weak_ptr<Conn> conn_;
  };

  void CloseFds() {
    if (stop_fd_ >= 0) ::close(stop_fd_);
    if (listen_fd_ >= 0) ::close(listen_fd_);
    stop_fd_ = listen_fd_ = -1;
  }

  void Wake() { epoll_.Wake(); }

  void Run() {
    std::vector<epoll_event> events(256);
    auto next_scan = SteadyClock::now();
    while (!stop_.load()) {
      epoll_.WaitForConnections(
          &events, kLoopWaitMs, conns_, [this](const ConnPtr& c) { Flush(c); },
          [this](const ConnPtr& c, uint32_t ev) { Read(c, ev); });
      AddAccepted();
      ApplyVerdicts();
      FlushQueued();
      if (close_requested_pending()) CloseEverything();
      const auto now = SteadyClock::now();
      if (now >= next_scan) {
        next_scan = now + std::chrono::milliseconds(kLoopWaitMs);
        ExpireHellos(now);
      }
    }
  }

  bool close_requested_pending() {
    std::lock_guard lock(close_mu_);
    return close_requested_ && !close_done_;
  }

  // The acceptor's thread. When thousands of agents connect at once, a loop that also reads lets the accept
  // queue (net.core.somaxconn) overflow, and every dropped connection waits a second for the kernel to send
  // its SYN again; this thread only empties the queue.
  void AcceptLoop() {
    bool paused = false;  // out of descriptors: the port is left alone for a moment
    while (!stop_.load()) {
      pollfd fds[2] = {{listen_fd_, static_cast<short>(paused ? 0 : POLLIN), 0}, {stop_fd_, POLLIN, 0}};
      if (::poll(fds, 2, paused ? kLoopWaitMs : -1) < 0 && errno != EINTR) return;
      if (fds[1].revents != 0) return;
      paused = false;
      std::vector<int> taken;
      while (true) {
        int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
          taken.push_back(fd);
          continue;
        }
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          log_->warn("the runtime cannot accept more connections: {} (raise the descriptor limit, ulimit -n)",
                     std::strerror(errno));
          paused = true;
        }
        break;
      }
      if (taken.empty()) continue;
      bool wake = false;
      {
        std::lock_guard lock(accepted_mu_);
        wake = accepted_.empty();
        accepted_.insert(accepted_.end(), taken.begin(), taken.end());
      }
      if (wake) Wake();
    }
  }

  // Loop thread: takes over what the acceptor accepted.
  void AddAccepted() {
    std::vector<int> fds;
    {
      std::lock_guard lock(accepted_mu_);
      fds.swap(accepted_);
    }
    for (int fd : fds) {
      if (closed_all_) {
        ::close(fd);
        continue;
      }
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      auto conn = std::make_shared<Conn>(fd, next_id_++, config_.max_message_bytes);
      conn->hello_deadline = SteadyClock::now() + config_.hello_timeout;
      conns_.emplace(fd, conn);
      // Data that arrived before this is reported at once: adding a ready descriptor raises its first edge.
      epoll_.Watch(fd, EPOLLIN | EPOLLRDHUP | EPOLLET);
    }
  }

  // Edge-triggered: reads what the socket holds (`events`: what epoll reported).
  void Read(const ConnPtr& conn, uint32_t events) {
    if (conn->dead) return;  // dropped by the Flush before: its descriptor may be another's by now
    if (conn->phase == Conn::Phase::kPreface && !ReadPreface(conn)) return;
    const bool open = ReadAvailable(conn->fd, &buffer_, events, [&](std::string_view bytes) {
      if (conn->refusing) return;  // its answer is on the way; the rest is not read
      conn->reader.Append(bytes.data(), bytes.size());
      if (conn->verifying && conn->reader.buffered() > kMaxWhileVerifyingBytes) {
        RefuseAgent(conn, "it sent more than " + std::to_string(kMaxWhileVerifyingBytes) +
                              " bytes before its credential was checked");
        return;
      }
      ProcessFrames(conn);
    });
    if (!open) Drop(conn);  // closed by the agent, or broken
  }

  // Whether the connection is the agent channel's and its preface has been read, or TCPStore's (nothing
  // read: its first request starts at the first byte); a connection that speaks anything else goes to gRPC
  // before a byte of it is read.
  bool ReadPreface(const ConnPtr& conn) {
    char head[kAgentChannelPreface.size()];  // also holds TCPStore's 5 bytes to tell its dialects apart
    ssize_t n = ::recv(conn->fd, head, sizeof head, MSG_PEEK);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
    if (n <= 0) {
      Drop(conn);
      return false;
    }
    conn->spoke = true;
    const std::string_view seen(head, static_cast<size_t>(n));
    if (!MayBeAgentPreface(seen)) {
      const TorchStoreSniff sniff = store_ ? SniffTorchStore(seen) : TorchStoreSniff::kNotTorchStore;
      if (sniff == TorchStoreSniff::kNotTorchStore) {
        HandOff(conn);
        return false;
      }
      return OpenTorchStore(conn, sniff);
    }
    if (seen.size() < kAgentChannelPreface.size()) return false;  // the rest comes with the next edge
    [[maybe_unused]] ssize_t taken = ::recv(conn->fd, head, sizeof head, 0);
    conn->phase = Conn::Phase::kHello;
    return true;
  }

  // The loop lets go of a connection another server takes over (gRPC's, the torch store's): nothing of it
  // is watched, read or closed here any more.
  void Release(const ConnPtr& conn) {
    epoll_.Forget(conn->fd);
    conns_.erase(conn->fd);
    std::lock_guard lock(conn->mu);
    conn->dead = true;
  }

  void HandOff(const ConnPtr& conn) {
    Release(conn);
    if (config_.hand_off && !closed_all_) {
      config_.hand_off(conn->fd, PeerName(conn->fd));
    } else {
      ::close(conn->fd);
    }
  }

  void ProcessFrames(const ConnPtr& conn) {
    std::string_view frame;
    while (!conn->refusing && !conn->verifying) {
      switch (conn->reader.Next(&frame)) {
        case FrameReader::Result::kNeedMore:
          return;
        case FrameReader::Result::kTooLarge:
          Refuse(conn, {StatusCode::kResourceExhausted,
                        std::string(conn->phase == Conn::Phase::kHello ? "a hello" : "a message") +
                            " of more than " + std::to_string(conn->reader.max_frame_bytes()) + " bytes"});
          return;
        case FrameReader::Result::kFrame:
          break;
      }
      v1::AgentFrame message;
      if (!message.ParseFromArray(frame.data(), static_cast<int>(frame.size()))) {
        Refuse(conn, {StatusCode::kInvalidArgument, "a frame that is not a distrun.v1.AgentFrame"});
        return;
      }
      Handle(conn, message);
    }
  }

  void Handle(const ConnPtr& conn, const v1::AgentFrame& message) {
    if (conn->phase == Conn::Phase::kHello) {
      if (!message.has_hello()) {
        Refuse(conn, {StatusCode::kUnauthenticated, "the first message must be a hello with the job token"});
      } else if (config_.check_token && !SameToken(config_.token, message.hello().token())) {
        if (config_.refused) config_.refused(PeerName(conn->fd));
        Refuse(conn, {StatusCode::kUnauthenticated, "missing or wrong job token"});
      } else if (checks_ && message.hello().munge_credential().empty()) {
        RefuseAgent(
            conn,
            "its hello carried no munge credential, which this job requires (munge did not work on its "
            "host: see that node's log)");
      } else if (checks_) {
        conn->verifying = true;
        verifying_.emplace(conn->id, conn);
        checks_->Submit(conn->id, message.hello().munge_credential());
      } else {
        Admit(conn);
      }
      return;
    }
    conn->session->Handle(message);
  }

  void Admit(const ConnPtr& conn) {
    conn->phase = Conn::Phase::kOpen;
    conn->link = std::make_shared<ConnLink>(*this, conn);
    conn->session = std::make_unique<AgentSession>(service_, conn->link, conn->credential_node, log_);
    conn->reader.set_max_frame_bytes(config_.max_message_bytes);
    conn->address = PeerAddress(conn->fd);
    job_hosts_.Add(conn->address);
    ++open_;
  }

  // A refused agent: one line here (the first few, then every this-many-th), the reason on its connection.
  void RefuseAgent(const ConnPtr& conn, const std::string& why) {
    const uint64_t n = ++agents_refused_;
    if (LogRefusal(n)) {
      log_->warn("refused an agent from {}: {} ({} refused so far)", PeerName(conn->fd), why, n);
    }
    Refuse(conn, {StatusCode::kUnauthenticated, "node 0 refused this node: " + why});
  }

  // Loop thread: the credential checks' verdicts; an admitted agent's frames that waited are read now.
  void ApplyVerdicts() {
    std::vector<std::pair<uint64_t, AdmissionVerdict>> verdicts;
    {
      std::lock_guard lock(verdicts_mu_);
      verdicts.swap(verdicts_);
    }
    for (auto& [id, verdict] : verdicts) {
      auto it = verifying_.find(id);
      if (it == verifying_.end()) continue;
      ConnPtr conn = it->second;
      verifying_.erase(it);
      conn->verifying = false;
      if (conn->dead || conn->refusing) continue;
      if (!verdict.refusal.empty()) {
        RefuseAgent(conn, verdict.refusal);
        continue;
      }
      conn->credential_node = verdict.node_rank;
      Admit(conn);
      ProcessFrames(conn);
    }
  }

  void Refuse(const ConnPtr& conn, const Status& status) {
    conn->refusing = true;
    conn->hello_deadline = SteadyClock::now() + config_.hello_timeout;  // to read the answer
    v1::CoordinatorFrame frame;
    ToProto(status, frame.mutable_refused());
    Queue(conn, frame, /*then_close=*/true);
  }

  // Any thread, also under the service's lock (event sinks): appends and leaves the writing to the loop.
  void Queue(const ConnPtr& conn, const v1::CoordinatorFrame& frame, bool then_close = false) {
    {
      std::lock_guard lock(conn->mu);
      if (conn->dead || conn->closing) return;
      AppendFrame(frame, &conn->output.out);
      if (then_close || conn->output.out.size() - conn->output.sent > kMaxQueuedBytes) conn->closing = true;
      if (conn->dirty) return;
      conn->dirty = true;
    }
    bool wake = false;
    {
      std::lock_guard lock(queued_mu_);
      wake = queued_.empty();
      queued_.push_back(conn);
    }
    if (wake && std::this_thread::get_id() != thread_.get_id()) Wake();
  }

  // Until nothing is left: closing a connection can queue news for the others (a lost node stops the job).
  void FlushQueued() {
    std::vector<ConnPtr> queued;
    while (true) {
      {
        std::lock_guard lock(queued_mu_);
        queued.swap(queued_);
      }
      if (queued.empty()) return;
      for (const ConnPtr& conn : queued) {
        {
          std::lock_guard lock(conn->mu);
          conn->dirty = false;
        }
        Flush(conn);
      }
      queued.clear();
    }
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

  // Loop thread; never under conn->mu (detaching runs the service, whose sinks take it). `drain`: read
  // away what the peer sent first, so that the close is orderly; a stranger's connection is just closed.
  void Drop(const ConnPtr& conn, bool drain = true) {
    {
      std::lock_guard lock(conn->mu);
      if (conn->dead) return;
      conn->dead = true;
      conn->output.out.clear();
    }
    if (conn->phase == Conn::Phase::kOpen) {
      --open_;
      job_hosts_.Remove(conn->address);
    }
    verifying_.erase(conn->id);
    epoll_.Forget(conn->fd);
    CloseInOrder(conn->fd, &buffer_, drain);
    conns_.erase(conn->fd);
    if (!conn->session) return;
    for (uint64_t stream : conn->session->TakeStreams()) service_.DetachAgent(stream);
  }

  void ExpireHellos(SteadyClock::time_point now) {
    std::vector<ConnPtr> late;
    for (auto& [fd, conn] : conns_) {
      if ((conn->phase != Conn::Phase::kOpen || conn->refusing) && now >= conn->hello_deadline) {
        late.push_back(conn);
      }
    }
    for (const ConnPtr& conn : late) {
      if (conn->phase == Conn::Phase::kPreface && !conn->spoke && store_ && MayUseTorchStore(*conn)) {
        // torch 1.13's second connection to its store (for WATCH_KEY callbacks) never sends a byte, and a
        // worker whose connection is closed spins on it: a silent one from a job host is never timed out.
        conn->hello_deadline = SteadyClock::time_point::max();
        continue;
      }
      if (conn->phase == Conn::Phase::kPreface || conn->refusing) {
        Drop(conn);  // said nothing to answer, or does not read its answer
      } else {
        Refuse(conn, {StatusCode::kDeadlineExceeded, "no hello within the hello timeout"});
      }
    }
  }

  bool MayUseTorchStore(const Conn& conn) const {
    const bool this_host =
        config_.peer_is_this_host ? config_.peer_is_this_host(conn.fd) : PeerIsThisHost(conn.fd);
    return !config_.torch_store_job_hosts_only || this_host || job_hosts_.Contains(PeerAddress(conn.fd));
  }

  // A connection whose first bytes are TCPStore's: from a stranger it is closed at once; else the torch
  // store's loops take it over (kNeedMore: once the bytes tell the dialects apart). Returns false: nothing
  // more of it is read here.
  bool OpenTorchStore(const ConnPtr& conn, TorchStoreSniff sniff) {
    if (!MayUseTorchStore(*conn)) {
      const uint64_t n = ++strangers_;
      if (LogRefusal(n)) {
        log_->warn(
            "refused a TCPStore connection from {}: the torch store serves only this host and the hosts of "
            "this job's agents ({} refused so far)",
            PeerName(conn->fd), n);
      }
      Drop(conn, /*drain=*/false);
      return false;
    }
    if (sniff == TorchStoreSniff::kNeedMore)
      return false;  // the rest of the 5 bytes comes with the next edge
    Release(conn);
    store_->Adopt(conn->fd,
                  sniff == TorchStoreSniff::kModern ? TorchStoreDialect::kModern : TorchStoreDialect::kLegacy,
                  PeerName(conn->fd));
    return false;
  }

  void CloseEverything() {
    std::string why;
    {
      std::lock_guard lock(close_mu_);
      why = close_why_;
    }
    closed_all_ = true;
    if (store_) store_->CloseAll();
    std::vector<ConnPtr> all;
    for (auto& [fd, conn] : conns_) all.push_back(conn);
    for (const ConnPtr& conn : all) {
      if (conn->phase == Conn::Phase::kOpen && !conn->refusing) {
        Refuse(conn, {StatusCode::kUnavailable, why});
        Flush(conn);  // small: fits the socket; whatever does not is dropped with the connection
      }
      Drop(conn);
    }
    {
      std::lock_guard lock(queued_mu_);
      queued_.clear();
    }
    std::lock_guard lock(close_mu_);
    close_done_ = true;
    close_cv_.notify_all();
  }

  CoordinationService& service_;
  AgentChannelConfig config_;
  std::shared_ptr<spdlog::logger> log_;
  int listen_fd_ = -1;
  WakeableEpoll epoll_{"the runtime cannot watch its port"};
  std::vector<char> buffer_;                // the loop's read buffer
  std::unordered_map<int, ConnPtr> conns_;  // loop thread only
  std::atomic<size_t> open_{0};
  uint64_t next_id_ = 1;  // loop thread
  JobHosts job_hosts_;    // loop thread: addresses of admitted agents
  // PyTorch's store, when served: its connections are its loops' once told apart.
  std::unique_ptr<TorchStoreLoops> store_;
  uint64_t strangers_ = 0;
  uint64_t agents_refused_ = 0;
  // munge credentials (loop thread: the connections waiting for a verdict).
  std::unique_ptr<CredentialChecks> checks_;
  std::unordered_map<uint64_t, ConnPtr> verifying_;
  std::mutex verdicts_mu_;
  std::vector<std::pair<uint64_t, AdmissionVerdict>> verdicts_;
  bool closed_all_ = false;  // loop thread

  std::mutex queued_mu_;
  std::vector<ConnPtr> queued_;  // connections with output to write

  std::mutex close_mu_;
  std::condition_variable close_cv_;
  std::string close_why_;
  bool close_requested_ = false;
  bool close_done_ = false;

  std::mutex accepted_mu_;
  std::vector<int> accepted_;  // accepted, not yet taken over by the loop
  int stop_fd_ = -1;           // ends the acceptor

  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::thread acceptor_;
};

AgentChannelServer::AgentChannelServer(CoordinationService& service, int listen_fd, AgentChannelConfig config)
    : loop_(std::make_unique<Loop>(service, listen_fd, std::move(config))) {}

AgentChannelServer::~AgentChannelServer() = default;

void AgentChannelServer::CloseAll(const std::string& why) { loop_->CloseAll(why); }

size_t AgentChannelServer::connections() const { return loop_->connections(); }

}  // namespace distrun
