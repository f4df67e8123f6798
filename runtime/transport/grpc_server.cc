#include "runtime/transport/grpc_server.h"

#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/server_posix.h>
#include <netdb.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "detect/errors.h"
#include "runtime/auth/client_identity.h"
#include "runtime/auth/token_check.h"
#include "runtime/distrun.grpc.pb.h"
#include "runtime/io/listening_socket.h"
#include "runtime/transport/agent_channel_server.h"
#include "runtime/transport/proto_convert.h"

namespace distrun {
namespace {

using namespace std::chrono_literals;

// Refusals are logged one by one at first, then only now and then: a port scanner must not flood the log.
constexpr uint64_t kRefusalsLoggedInFull = 5;
constexpr uint64_t kRefusalLogEvery = 1000;

std::chrono::milliseconds Millis(int64_t ms) { return std::chrono::milliseconds(ms); }

}  // namespace

std::pair<std::string, int> SplitHostPort(const std::string& address, const std::string& what) {
  size_t colon = address.rfind(':');
  std::string host = colon == std::string::npos ? std::string() : address.substr(0, colon);
  std::string port = colon == std::string::npos ? std::string() : address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  bool digits =
      !port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos;
  int number = digits ? std::stoi(port) : -1;
  if (host.empty() || (host.find(':') != std::string::npos && address.front() != '[') || number < 0 ||
      number > 65535) {
    throw UsageError(what + " '" + address + "' is not host:port (IPv6 as [addr]:port)");
  }
  return {host, number};
}

class GrpcServer::Impl final : public v1::Coordination::CallbackService {
 public:
  Impl(CoordinationService& service, GrpcServerConfig config)
      : service_(service),
        config_(std::move(config)),
        log_(config_.log ? config_.log : spdlog::default_logger()) {}

  void Start() {
    auto [host, port] = SplitHostPort(config_.address, "runtime address");
    if (config_.loopback_only && !IsLoopbackHost(host)) {
      throw UsageError("in local mode the runtime listens on loopback only, but its address is '" +
                       config_.address + "'; use 127.0.0.1 or ::1");
    }
    // Debian builds abseil without NDEBUG, so every absl::Mutex lock inside gRPC also updates a process-wide
    // lock-order graph under one global lock: 13% of the coordinator's CPU at 2,000 agents. It is a
    // debugging aid; gRPC's own builds run without it.
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
    // The port is distrun's own (agent_channel_server.h): agents speak the agent channel on it and every
    // other connection is handed to gRPC, which listens on no port of its own.
    ListeningSocket listening = config_.listen && config_.listen->valid() ? std::move(*config_.listen)
                                                                          : ListeningSocket::Open(host, port);
    listening.Listen();  // a reserved port (a standby's) starts to listen only now
    port_ = listening.port();
    int listen_fd = listening.Release();
    AgentChannelConfig channel;
    channel.token = config_.agent_token.empty() ? config_.token : config_.agent_token;
    channel.munge = config_.munge;
    channel.check_token = !(config_.munge && config_.munge_alone);
    channel.admission = config_.admission;
    channel.admission.port = port_;
    channel.max_message_bytes = config_.max_message_bytes;
    channel.torch_store = config_.torch_store;
    channel.torch_store_max_bytes = config_.torch_store_max_bytes;
    channel.torch_store_job_hosts_only = config_.torch_store_job_hosts_only;
    channel.torch_store_threads = config_.torch_store_threads;
    channel.log = log_;
    channel.hand_off = [this](int fd, const std::string& peer) {
      grpc::Server* server = Serving();
      if (server == nullptr) {
        ::close(fd);
        return;
      }
      {
        std::lock_guard lock(peers_mu_);
        peers_[fd] = peer;
      }
      grpc::AddInsecureChannelFromFd(server, fd);
    };
    channel.refused = [this](const std::string& peer) {
      CountRefusal("hello on the agent channel", peer, "wrong job token");
    };
    agents_ = std::make_unique<AgentChannelServer>(service_, listen_fd, std::move(channel));
    bound_ = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port_);
    ticker_ = std::thread([this] { TickLoop(); });
  }

  void Stop() {
    {
      std::lock_guard lock(tick_mu_);
      stopping_ = true;
    }
    tick_cv_.notify_all();
    if (ticker_.joinable()) ticker_.join();
    if (!agents_) return;  // never started: the service was not exposed and stays usable
    // Pending waits finish their calls before gRPC is told to shut down, so no callback outlives it.
    service_.Shutdown();
    // Before gRPC's shutdown: the agent channel hands no connection to gRPC after this.
    agents_->CloseAll("the coordination service is shutting down");
    CloseStreams();
    {
      std::lock_guard lock(grpc_mu_);
      grpc_closed_ = true;
      if (server_) server_->Shutdown(std::chrono::system_clock::now() + 1s);
    }
    agents_.reset();
    server_.reset();
  }

  int port() const { return port_; }
  const std::string& address() const { return bound_; }
  uint64_t refused() const { return refused_.load(); }

  // ---- unary calls ----

  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* ctx, const v1::JoinRequest* req,
                                 v1::Assignment* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (!Authorized(ctx, "Join", reactor)) return reactor;
    service_.Join(FromProto(*req), [reactor, resp](const Status& s, const NodeAssignment& a) {
      if (s.ok()) ToProto(a, resp);
      reactor->Finish(ToGrpc(s));
    });
    return reactor;
  }

  grpc::ServerUnaryReactor* ReportFailure(grpc::CallbackServerContext* ctx, const v1::FailureReport* req,
                                          v1::FailureReportAck* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (!Authorized(ctx, "ReportFailure", reactor)) return reactor;
    bool root = false;
    Status s = service_.ReportFailure(req->restart_round(), FromProto(req->failure()), &root);
    resp->set_root_cause(root);
    // The reporting node prints the failure summary and every other node names it: here only for -v.
    if (root) log_->debug("job failure: {}", DescribeFailure(FromProto(req->failure())));
    reactor->Finish(ToGrpc(s));
    return reactor;
  }

  grpc::ServerUnaryReactor* ReportSuccess(grpc::CallbackServerContext* ctx, const v1::SuccessReport* req,
                                          v1::SuccessReportAck*) override {
    auto* reactor = ctx->DefaultReactor();
    if (!Authorized(ctx, "ReportSuccess", reactor)) return reactor;
    reactor->Finish(ToGrpc(service_.ReportSuccess(req->node_rank(), req->restart_round())));
    return reactor;
  }

  grpc::ServerUnaryReactor* KvSet(grpc::CallbackServerContext* ctx, const v1::KvSetRequest* req,
                                  v1::KvSetResponse*) override {
    auto* reactor = ctx->DefaultReactor();
    if (!WorkerCall(ctx, "KvSet", reactor)) return reactor;
    // A write is answered once it is held where a takeover finds it (the service's on_held).
    Status s = service_.KvSet(req->key(), req->value(),
                              [reactor](const Status& held) { reactor->Finish(ToGrpc(held)); });
    if (!s.ok()) reactor->Finish(ToGrpc(s));
    return reactor;
  }

  grpc::ServerUnaryReactor* KvGet(grpc::CallbackServerContext* ctx, const v1::KvGetRequest* req,
                                  v1::KvGetResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (!WorkerCall(ctx, "KvGet", reactor)) return reactor;
    service_.KvGet(req->key(), Millis(req->timeout_ms()),
                   [reactor, resp](const Status& s, const std::string& v) {
                     if (s.ok()) {
                       resp->set_found(true);
                       resp->set_value(v);
                     }
                     reactor->Finish(ToGrpc(s));
                   });
    return reactor;
  }

  grpc::ServerUnaryReactor* KvTryGet(grpc::CallbackServerContext* ctx, const v1::KvTryGetRequest* req,
                                     v1::KvGetResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (!WorkerCall(ctx, "KvTryGet", reactor)) return reactor;
    std::optional<std::string> value;
    Status s = service_.KvTryGet(req->key(), &value);
    resp->set_found(value.has_value());
    if (value) resp->set_value(*value);
    reactor->Finish(ToGrpc(s));
    return reactor;
  }

  grpc::ServerUnaryReactor* KvAdd(grpc::CallbackServerContext* ctx, const v1::KvAddRequest* req,
                                  v1::KvAddResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (!WorkerCall(ctx, "KvAdd", reactor)) return reactor;
    // The service writes the result before on_held may run, on this thread or the acknowledging one.
    auto value = std::make_shared<int64_t>(0);
    Status s =
        service_.KvAdd(req->key(), req->delta(), value.get(), [reactor, resp, value](const Status& held) {
          resp->set_value(*value);
          reactor->Finish(ToGrpc(held));
        });
    if (!s.ok()) reactor->Finish(ToGrpc(s));
    return reactor;
  }

  grpc::ServerUnaryReactor* KvCompareAndSet(grpc::CallbackServerContext* ctx,
                                            const v1::KvCompareAndSetRequest* req,
                                            v1::KvCompareAndSetResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (!WorkerCall(ctx, "KvCompareAndSet", reactor)) return reactor;
    auto r = std::make_shared<CasResult>();
    std::optional<std::string> expected;
    if (!req->expect_absent()) expected = req->expected();
    Status s = service_.KvCompareAndSet(req->key(), expected, req->desired(), r.get(),
                                        [reactor, resp, r](const Status& held) {
                                          resp->set_swapped(r->swapped);
                                          resp->set_found(r->found);
                                          resp->set_current(r->current);
                                          reactor->Finish(ToGrpc(held));
                                        });
    if (!s.ok()) reactor->Finish(ToGrpc(s));
    return reactor;
  }

  grpc::ServerUnaryReactor* KvDelete(grpc::CallbackServerContext* ctx, const v1::KvDeleteRequest* req,
                                     v1::KvDeleteResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (!WorkerCall(ctx, "KvDelete", reactor)) return reactor;
    auto deleted = std::make_shared<bool>(false);
    Status s = service_.KvDelete(req->key(), deleted.get(), [reactor, resp, deleted](const Status& held) {
      resp->set_deleted(*deleted);
      reactor->Finish(ToGrpc(held));
    });
    if (!s.ok()) reactor->Finish(ToGrpc(s));
    return reactor;
  }

  grpc::ServerUnaryReactor* KvList(grpc::CallbackServerContext* ctx, const v1::KvListRequest* req,
                                   v1::KvListResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (!WorkerCall(ctx, "KvList", reactor)) return reactor;
    std::vector<std::pair<std::string, std::string>> entries;
    Status s = service_.KvList(req->prefix(), &entries);
    size_t bytes = 0;
    for (auto& [k, v] : entries) {
      bytes += k.size() + v.size() + 16;
      if (bytes > config_.max_message_bytes) {
        s = {StatusCode::kResourceExhausted, "the keys under prefix '" + req->prefix() +
                                                 "' do not fit in one message; list a narrower prefix"};
        resp->Clear();
        break;
      }
      auto* e = resp->add_entries();
      e->set_key(k);
      e->set_value(v);
    }
    reactor->Finish(ToGrpc(s));
    return reactor;
  }

  grpc::ServerUnaryReactor* Barrier(grpc::CallbackServerContext* ctx, const v1::BarrierRequest* req,
                                    v1::BarrierResponse*) override {
    auto* reactor = ctx->DefaultReactor();
    if (!WorkerCall(ctx, "Barrier", reactor)) return reactor;
    service_.Barrier(req->name(), req->process_id(), req->count(), Millis(req->timeout_ms()),
                     [reactor](const Status& s) { reactor->Finish(ToGrpc(s)); });
    return reactor;
  }

  grpc::ServerUnaryReactor* Stacks(grpc::CallbackServerContext* ctx, const v1::StacksRequest* req,
                                   v1::StacksReply* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (!Authorized(ctx, "Stacks", reactor)) return reactor;
    service_.CollectStacks(Millis(req->timeout_ms()), [this, reactor, resp](const StacksReply& reply) {
      ToProto(reply, resp);
      FitStacks(resp);
      reactor->Finish(grpc::Status::OK);
    });
    return reactor;
  }

  // Thousands of ranks' dumps may outgrow one message: each gets an equal share, cut at its end (its
  // innermost frames, which faulthandler and gdb print first, are kept).
  void FitStacks(v1::StacksReply* reply) const {
    const size_t limit = config_.max_message_bytes - std::min(config_.max_message_bytes / 8, size_t{1} << 16);
    if (reply->ByteSizeLong() <= limit || reply->workers_size() == 0) return;
    const size_t share = limit / static_cast<size_t>(reply->workers_size()) / 2;
    for (v1::WorkerStack& w : *reply->mutable_workers()) {
      if (w.text().size() > share) w.mutable_text()->resize(share);
      if (w.error().size() > share) w.mutable_error()->resize(share);
    }
  }

  grpc::ServerUnaryReactor* Describe(grpc::CallbackServerContext* ctx, const v1::StatusRequest*,
                                     v1::JobStatus* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (!Authorized(ctx, "Describe", reactor)) return reactor;
    ToProto(service_.Overview(), resp);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  // ---- liveness stream ----

  class LivenessReactor final : public grpc::ServerBidiReactor<v1::AgentHeartbeat, v1::JobEvent> {
   public:
    LivenessReactor(Impl& impl, bool authorized) : impl_(impl) {
      if (!authorized) {
        Close({grpc::StatusCode::UNAUTHENTICATED, "missing or wrong job token"});
        return;
      }
      StartRead(&in_);
    }

    void OnReadDone(bool ok) override {
      if (!ok) {  // the agent closed its side, or the connection broke
        Detach();
        Close(grpc::Status::OK);
        return;
      }
      if (!stream_id_) {
        uint64_t id = 0;
        in_node_rank_ = in_.node_rank();
        Status s = impl_.service_.AttachAgent(
            in_node_rank_, [this](const JobEvent& e) { Enqueue(e); }, &id);
        if (!s.ok()) {
          Close(ToGrpc(s));
          return;
        }
        {
          std::lock_guard lock(mu_);
          stream_id_ = id;
        }
        // Answered at once: the agent's first sign of a live coordinator (its heartbeat timeout counts from
        // the last answer).
        Enqueue(JobEvent{});
      } else if (!in_.has_join() && !in_.has_success()) {
        impl_.service_.Heartbeat(*stream_id_, std::chrono::milliseconds(in_.unanswered_ms()), 0,
                                 std::chrono::microseconds(in_.round_trip_us()));
      }
      if (in_.has_join() && !Join(in_.join())) return;  // closed: a join for another node
      if (in_.has_success()) {
        Status s = impl_.service_.ReportSuccess(in_node_rank_, in_.success().restart_round());
        if (!s.ok()) impl_.log_->debug("node {}'s success report: {}", in_node_rank_, s.message);
      }
      if (in_.has_progress()) impl_.service_.ReportProgress(in_node_rank_, FromProto(in_.progress()));
      if (in_.has_stacks()) impl_.service_.ReportStacks(in_node_rank_, FromProto(in_.stacks()));
      if (in_.has_standby() && stream_id_) {  // never a stream's first message
        impl_.service_.StandbyApplied(*stream_id_, in_.standby().applied(), in_.standby().needs_snapshot());
      }
      StartRead(&in_);
    }

    void OnWriteDone(bool ok) override {
      std::lock_guard lock(mu_);
      writing_ = false;
      if (!ok) return;  // the stream is broken; OnReadDone or OnCancel follows
      queue_.pop_front();
      if (!queue_.empty() && !finished_) {
        writing_ = true;
        StartWrite(&queue_.front());
      }
    }

    void OnCancel() override { Detach(); }

    void OnDone() override {
      Detach();
      impl_.Forget(this);
      Unref();
    }

    // Ends the stream from the server's side (shutdown, refusal); safe to call more than once.
    void Close(const grpc::Status& status) {
      std::lock_guard lock(mu_);
      if (finished_) return;
      finished_ = true;
      Finish(status);
    }

    void Ref() { refs_.fetch_add(1); }
    void Unref() {
      if (refs_.fetch_sub(1) == 1) delete this;
    }

   private:
    // Runs under the service's lock: queue only.
    void Enqueue(const JobEvent& event) {
      std::lock_guard lock(mu_);
      if (finished_) return;
      v1::JobEvent wire;
      ToProto(event, &wire);
      queue_.push_back(std::move(wire));
      if (!writing_) {
        writing_ = true;
        StartWrite(&queue_.front());
      }
    }

    // A join sent on the stream: the answer comes back on it. The reactor stays alive until the service has
    // answered, which it always does (rendezvous completes, fails, times out, or the service shuts down).
    // False when the stream was closed instead (a join for another node).
    bool Join(const v1::JoinRequest& request) {
      NodeJoin join = FromProto(request);
      if (join.node_rank != in_node_rank_) {
        Close({grpc::StatusCode::INVALID_ARGUMENT, "node " + std::to_string(in_node_rank_) +
                                                       "'s liveness stream joined as node " +
                                                       std::to_string(join.node_rank)});
        return false;
      }
      Ref();
      impl_.service_.Join(join, [this](const Status& status, const NodeAssignment& assignment) {
        JobEvent answer;
        answer.kind = JobEvent::Kind::kJoined;
        answer.join_status = status;
        answer.assignment = assignment;
        Enqueue(answer);
        Unref();
      });
      return true;
    }

    void Detach() {
      std::optional<uint64_t> id;
      {
        std::lock_guard lock(mu_);
        id = std::exchange(stream_id_, std::nullopt);
      }
      if (id) impl_.service_.DetachAgent(*id);
    }

    Impl& impl_;
    std::atomic<int> refs_{1};  // gRPC's, until OnDone; Stop holds more while it closes streams
    v1::AgentHeartbeat in_;
    std::mutex mu_;
    std::optional<uint64_t> stream_id_;
    std::deque<v1::JobEvent> queue_;
    bool writing_ = false;
    bool finished_ = false;
    int in_node_rank_ = -1;  // from the stream's first message
  };

  grpc::ServerBidiReactor<v1::AgentHeartbeat, v1::JobEvent>* Liveness(
      grpc::CallbackServerContext* ctx) override {
    bool authorized = Authorized(ctx, "Liveness", nullptr);
    auto* reactor = new LivenessReactor(*this, authorized);
    std::lock_guard lock(streams_mu_);
    streams_.insert(reactor);
    return reactor;
  }

 private:
  bool Authorized(grpc::CallbackServerContext* ctx, const char* method, grpc::ServerUnaryReactor* reactor) {
    const auto& md = ctx->client_metadata();
    auto it = md.find(kTokenHeader);
    if (it != md.end() && SameToken(config_.token, std::string_view(it->second.data(), it->second.size()))) {
      return true;
    }
    std::string why = it == md.end() ? "no job token" : "wrong job token";
    // A user's command without the token: its munge credential, where the job is protected by munge.
    // Decoding waits on munged (about a millisecond), on this call's thread.
    if (auto m = md.find(kMungeHeader); m != md.end() && it == md.end() && config_.munge) {
      std::string problem;
      if (auto decoded = config_.munge->Decode(std::string(m->second.data(), m->second.size()), &problem)) {
        AdmissionPolicy policy = config_.admission;
        policy.port = port_;
        problem = CheckClientCredential(*decoded, policy);
      }
      if (problem.empty()) return true;
      why = "munge credential refused: " + problem;
    }
    CountRefusal(std::string(method) + " call", PeerOf(*ctx), why);
    if (reactor) reactor->Finish({grpc::StatusCode::UNAUTHENTICATED, why});
    return false;
  }

  // A worker's call: authorized, and not of an epoch the job has left (a worker of a fenced node, or one
  // that outlived its epoch's stop, must not touch the new epoch's store or barriers).
  bool WorkerCall(grpc::CallbackServerContext* ctx, const char* method, grpc::ServerUnaryReactor* reactor) {
    if (!Authorized(ctx, method, reactor)) return false;
    const auto& md = ctx->client_metadata();
    auto it = md.find(kEpochHeader);
    if (it == md.end()) return true;  // a shell outside the job, or an older client
    const std::string text(it->second.data(), it->second.size());
    int epoch = -1;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), epoch);
    if (ec != std::errc() || end != text.data() + text.size() || epoch < 0) {
      reactor->Finish(
          {grpc::StatusCode::INVALID_ARGUMENT, "the call's epoch '" + text + "' is not a number"});
      return false;
    }
    const int current = service_.CurrentRound();
    if (epoch >= current) return true;
    reactor->Finish({grpc::StatusCode::FAILED_PRECONDITION,
                     std::string(kFencedPrefix) + "this worker belongs to epoch " + std::to_string(epoch) +
                         ", but the job is in epoch " + std::to_string(current) +
                         "; a worker of an earlier epoch must stop"});
    return false;
  }

  // gRPC names a connection it was handed by its descriptor ("fd:12"); the address is what helps.
  std::string PeerOf(const grpc::CallbackServerContext& ctx) {
    std::string peer = ctx.peer();
    if (peer.rfind("fd:", 0) != 0) return peer;
    std::lock_guard lock(peers_mu_);
    auto it = peers_.find(std::atoi(peer.c_str() + 3));
    return it == peers_.end() ? peer : it->second;
  }

  // `why` never holds the token given, right or wrong.
  void CountRefusal(const std::string& what, const std::string& peer, const std::string& why) {
    uint64_t n = ++refused_;
    if (n <= kRefusalsLoggedInFull || n % kRefusalLogEvery == 0) {
      log_->warn("refused a {} from {}: {} ({} refused so far)", what, peer, why, n);
    }
  }

  void Forget(LivenessReactor* reactor) {
    std::lock_guard lock(streams_mu_);
    streams_.erase(reactor);
  }

  void CloseStreams() {
    std::vector<LivenessReactor*> open;
    {
      std::lock_guard lock(streams_mu_);
      for (auto* r : streams_) {
        r->Ref();
        open.push_back(r);
      }
    }
    for (auto* r : open) {
      r->Close({grpc::StatusCode::UNAVAILABLE, "the coordination service is shutting down"});
      r->Unref();
    }
  }

  // gRPC serves the workers' and users' calls only (node 0's agent calls the service in process, the others
  // speak the agent channel), so it starts with the first connection handed to it, on the port's loop: a
  // job whose workers never call the runtime never starts it, and no job waits for it to start (its
  // threads and global state cost a local launch ~1 ms: bench/RESULTS.md). nullptr: shut down, or gRPC
  // could not start (logged).
  grpc::Server* Serving() {
    std::lock_guard lock(grpc_mu_);
    if (server_ || grpc_closed_) return server_.get();
    grpc::ServerBuilder builder;
    builder.RegisterService(this);
    builder.SetMaxReceiveMessageSize(static_cast<int>(config_.max_message_bytes));
    builder.SetMaxSendMessageSize(static_cast<int>(config_.max_message_bytes));
    // Bandwidth-delay probing pings every new connection to size flow-control windows for bulk transfers;
    // coordination messages are small. Off (here and in every client) it saves a third of the
    // coordinator's sendmsg calls per joining client (strace: 10.9 → 7.0 at 500 agents).
    builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    // No keepalive pings from the server (gRPC's default: every 2 hours): clients' deadlines and agents'
    // heartbeats already catch a silent peer, and each connection's keepalive timer is one more entry in
    // gRPC's timer list, which Debian's build (asserts on) checks by walking a hash chain.
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, INT_MAX);
    server_ = builder.BuildAndStart();
    if (!server_) {
      grpc_closed_ = true;
      log_->error("the runtime cannot start its gRPC server: workers' and commands' calls are refused");
    }
    return server_.get();
  }

  void TickLoop() {
    auto next_progress = std::chrono::steady_clock::now() + config_.progress_interval;
    std::unique_lock lock(tick_mu_);
    while (!tick_cv_.wait_for(lock, config_.tick_interval, [this] { return stopping_; })) {
      lock.unlock();
      service_.Tick();
      if (std::chrono::steady_clock::now() >= next_progress) {
        next_progress += config_.progress_interval;
        std::string progress = service_.RendezvousProgress();
        if (!progress.empty()) log_->info("rendezvous: {}", progress);
      }
      lock.lock();
    }
  }

  CoordinationService& service_;
  GrpcServerConfig config_;
  std::shared_ptr<spdlog::logger> log_;
  std::mutex grpc_mu_;
  std::unique_ptr<grpc::Server> server_;  // built by the first hand-off (Serving)
  bool grpc_closed_ = false;
  std::unique_ptr<AgentChannelServer> agents_;
  int port_ = 0;
  std::string bound_;
  std::atomic<uint64_t> refused_{0};

  std::mutex streams_mu_;
  std::set<LivenessReactor*> streams_;

  // Descriptor → address of the connections handed to gRPC (an entry is replaced when the number is reused).
  std::mutex peers_mu_;
  std::unordered_map<int, std::string> peers_;

  std::mutex tick_mu_;
  std::condition_variable tick_cv_;
  bool stopping_ = false;
  std::thread ticker_;
};

GrpcServer::GrpcServer(CoordinationService& service, GrpcServerConfig config)
    : impl_(std::make_unique<Impl>(service, std::move(config))) {
  try {
    impl_->Start();
  } catch (...) {
    impl_->Stop();
    throw;
  }
}

GrpcServer::~GrpcServer() { impl_->Stop(); }

int GrpcServer::port() const { return impl_->port(); }
std::string GrpcServer::address() const { return impl_->address(); }
uint64_t GrpcServer::refused_calls() const { return impl_->refused(); }

}  // namespace distrun
