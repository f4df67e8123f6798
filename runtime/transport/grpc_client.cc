#include "runtime/transport/grpc_client.h"

#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>

#include <mutex>
#include <thread>

#include "runtime/auth/client_identity.h"
#include "runtime/distrun.grpc.pb.h"
#include "runtime/transport/channel_target.h"
#include "runtime/transport/proto_convert.h"

namespace distrun {
namespace {

using namespace std::chrono_literals;

// Waiting calls get this much more than their own timeout, so the service's answer (naming who is
// missing) arrives before the client gives up on its own.
constexpr auto kWaitMargin = 5s;

class Stream final : public LivenessStream {
 public:
  Stream(v1::Coordination::Stub& stub, const std::string& token, int node_rank,
         std::function<void(const JobEvent&)> on_event, std::function<void(const Status&)> on_closed,
         const std::optional<NodeJoin>& first_join)
      : on_event_(std::move(on_event)), on_closed_(std::move(on_closed)) {
    ctx_.AddMetadata(kTokenHeader, token);
    // A coordinator that is still starting is waited for; the agent's heartbeat timeout bounds that.
    ctx_.set_wait_for_ready(true);
    // Without corking, creating the stream sends the headers and blocks until the coordinator answers.
    ctx_.set_initial_metadata_corked(true);
    stream_ = stub.Liveness(&ctx_);
    first_.set_node_rank(node_rank);
    heartbeat_.set_node_rank(node_rank);
    if (first_join) ToProto(*first_join, first_.mutable_join());
    reader_ = std::thread([this] { Read(); });
  }

  ~Stream() override { Close(); }

  bool SendHeartbeat(const LinkNews& news) override {
    // A write still in progress (the coordinator not up yet) makes this heartbeat needless; the caller
    // must not block on it, it has timeouts to check.
    std::unique_lock lock(write_mu_, std::try_to_lock);
    if (!lock.owns_lock()) return true;
    v1::AgentHeartbeat message = heartbeat_;
    SetLinkNews(news, &message);
    return !closed_ && stream_->Write(message);
  }

  bool SendSuccess(int restart_round) override {
    v1::AgentHeartbeat message = heartbeat_;
    message.mutable_success()->set_node_rank(heartbeat_.node_rank());
    message.mutable_success()->set_restart_round(restart_round);
    return WriteNews(message);
  }

  bool SendProgress(const NodeProgress& progress, const LinkNews& news) override {
    std::unique_lock lock(write_mu_, std::try_to_lock);
    if (!lock.owns_lock()) return true;
    v1::AgentHeartbeat message = heartbeat_;
    SetLinkNews(news, &message);
    ToProto(progress, message.mutable_progress());
    return !closed_ && stream_->Write(message);
  }

  bool SendStacks(const StacksReply& reply) override {
    v1::AgentHeartbeat message = heartbeat_;
    ToProto(reply, message.mutable_stacks());
    return WriteNews(message);
  }

  bool SendStandbyApplied(uint64_t applied, bool needs_snapshot) override {
    v1::AgentHeartbeat message = heartbeat_;
    message.mutable_standby()->set_applied(applied);
    message.mutable_standby()->set_needs_snapshot(needs_snapshot);
    return WriteNews(message);
  }

  bool SendJoin(const NodeJoin& join) override {
    v1::AgentHeartbeat message = heartbeat_;
    ToProto(join, message.mutable_join());
    return WriteNews(message);
  }

  // Safe from any thread and more than once; from the reader thread itself (an event callback) it only
  // cancels.
  void Close() override {
    ctx_.TryCancel();
    if (reader_.get_id() == std::this_thread::get_id()) return;
    std::call_once(joined_, [this] {
      if (reader_.joinable()) reader_.join();
    });
  }

 private:
  void Read() {
    {
      // The first message says who is speaking. Sent here, not in the constructor: while the coordinator
      // is not up yet it blocks, and only Close (from another thread) may end that.
      std::lock_guard lock(write_mu_);
      stream_->Write(first_);
    }
    v1::JobEvent event;
    while (stream_->Read(&event)) on_event_(FromProto(event));
    grpc::Status status;
    {
      std::lock_guard lock(write_mu_);
      closed_ = true;
      status = stream_->Finish();
    }
    on_closed_(FromGrpc(status));
  }

  // A message that must go out (unlike a heartbeat, which may be skipped): waits for a write in progress.
  bool WriteNews(const v1::AgentHeartbeat& message) {
    std::lock_guard lock(write_mu_);
    return !closed_ && stream_->Write(message);
  }

  std::function<void(const JobEvent&)> on_event_;
  std::function<void(const Status&)> on_closed_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::AgentHeartbeat, v1::JobEvent>> stream_;
  v1::AgentHeartbeat first_;      // names the node, and may join round 0
  v1::AgentHeartbeat heartbeat_;  // names the node only
  std::mutex write_mu_;
  bool closed_ = false;
  std::once_flag joined_;
  std::thread reader_;
};

}  // namespace

class GrpcClient::Impl {
 public:
  explicit Impl(GrpcClientConfig config) : config_(std::move(config)) {
    // As in grpc_server.cc: Debian's abseil tracks lock order on every lock unless told not to.
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(static_cast<int>(config_.max_message_bytes));
    args.SetMaxSendMessageSize(static_cast<int>(config_.max_message_bytes));
    // *_proxy variables must not route the job's own traffic through a proxy (a known gRPC hang).
    args.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0);
    // No bandwidth-delay probing pings: see grpc_server.cc.
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    // A refused connection is tried again after 100 ms, gRPC's floor for this setting (it raises anything
    // lower to 100), then ×1.6 up to 1 s. Agents, which start with node 0's distrun a few milliseconds
    // before it listens, retry sooner through Connect.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    // Despite its name, gRPC takes this as the time one connection attempt may last. A coordinator busy
    // with thousands of agents' handshakes needs more than a backoff's 100 ms; attempts given up are
    // retried and pile up on it (10,000 agents starting at once never finished). gRPC's default.
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 20'000);
    channel_ =
        grpc::CreateCustomChannel(ChannelTarget(config_.address), grpc::InsecureChannelCredentials(), args);
    stub_ = v1::Coordination::NewStub(channel_);
  }

  // A context with the token and a deadline `extra` beyond the call timeout.
  void Prepare(grpc::ClientContext* ctx, std::chrono::milliseconds extra = 0ms) const {
    if (!config_.token.empty() || !config_.credential) {
      ctx->AddMetadata(kTokenHeader, config_.token);
    } else if (std::string credential = config_.credential(); !credential.empty()) {
      ctx->AddMetadata(kMungeHeader, credential);
    }
    if (config_.epoch >= 0) ctx->AddMetadata(kEpochHeader, std::to_string(config_.epoch));
    ctx->set_wait_for_ready(config_.wait_for_ready);
    ctx->set_deadline(std::chrono::system_clock::now() + config_.call_timeout + extra);
  }

  Status Convert(const grpc::Status& status) const {
    Status s = FromGrpc(status);
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
        (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
         status.error_message() == "Deadline Exceeded")) {
      // gRPC's own words say nothing about where; the service's messages already do.
      s.message = "cannot reach the distrun runtime at " + config_.address + ": " + status.error_message();
    }
    return s;
  }

  GrpcClientConfig config_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Coordination::Stub> stub_;
};

GrpcClient::GrpcClient(GrpcClientConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}
GrpcClient::~GrpcClient() = default;

const std::string& GrpcClient::address() const { return impl_->config_.address; }

Status GrpcClient::Join(const NodeJoin& join, std::chrono::milliseconds timeout, NodeAssignment* assignment) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx, timeout);
  v1::JoinRequest req;
  ToProto(join, &req);
  v1::Assignment resp;
  Status s = impl_->Convert(impl_->stub_->Join(&ctx, req, &resp));
  if (s.ok()) *assignment = FromProto(resp);
  return s;
}

Status GrpcClient::ReportFailure(int restart_round, const FailedWorker& failure, bool* root_cause) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  v1::FailureReport req;
  req.set_restart_round(restart_round);
  ToProto(failure, req.mutable_failure());
  v1::FailureReportAck resp;
  Status s = impl_->Convert(impl_->stub_->ReportFailure(&ctx, req, &resp));
  *root_cause = s.ok() && resp.root_cause();
  return s;
}

Status GrpcClient::ReportSuccess(int node_rank, int restart_round) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  v1::SuccessReport req;
  req.set_node_rank(node_rank);
  req.set_restart_round(restart_round);
  v1::SuccessReportAck resp;
  return impl_->Convert(impl_->stub_->ReportSuccess(&ctx, req, &resp));
}

Status GrpcClient::KvSet(const std::string& key, const std::string& value) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  v1::KvSetRequest req;
  req.set_key(key);
  req.set_value(value);
  v1::KvSetResponse resp;
  return impl_->Convert(impl_->stub_->KvSet(&ctx, req, &resp));
}

Status GrpcClient::KvGet(const std::string& key, std::chrono::milliseconds timeout, std::string* value) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx, timeout + kWaitMargin);
  v1::KvGetRequest req;
  req.set_key(key);
  req.set_timeout_ms(timeout.count());
  v1::KvGetResponse resp;
  Status s = impl_->Convert(impl_->stub_->KvGet(&ctx, req, &resp));
  if (s.ok()) *value = resp.value();
  return s;
}

Status GrpcClient::KvTryGet(const std::string& key, std::optional<std::string>* value) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  v1::KvTryGetRequest req;
  req.set_key(key);
  v1::KvGetResponse resp;
  Status s = impl_->Convert(impl_->stub_->KvTryGet(&ctx, req, &resp));
  value->reset();
  if (s.ok() && resp.found()) *value = resp.value();
  return s;
}

Status GrpcClient::Stacks(std::chrono::milliseconds timeout, StacksReply* reply) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx, timeout);
  v1::StacksRequest req;
  req.set_timeout_ms(timeout.count());
  v1::StacksReply resp;
  Status s = impl_->Convert(impl_->stub_->Stacks(&ctx, req, &resp));
  if (s.ok()) *reply = FromProto(resp);
  return s;
}

Status GrpcClient::Describe(JobStatusView* status) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  v1::JobStatus resp;
  Status s = impl_->Convert(impl_->stub_->Describe(&ctx, v1::StatusRequest(), &resp));
  if (s.ok()) *status = FromProto(resp);
  return s;
}

Status GrpcClient::KvAdd(const std::string& key, int64_t delta, int64_t* value) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  v1::KvAddRequest req;
  req.set_key(key);
  req.set_delta(delta);
  v1::KvAddResponse resp;
  Status s = impl_->Convert(impl_->stub_->KvAdd(&ctx, req, &resp));
  if (s.ok()) *value = resp.value();
  return s;
}

Status GrpcClient::KvCompareAndSet(const std::string& key, const std::optional<std::string>& expected,
                                   const std::string& desired, CasResult* result) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  v1::KvCompareAndSetRequest req;
  req.set_key(key);
  req.set_expect_absent(!expected.has_value());
  if (expected) req.set_expected(*expected);
  req.set_desired(desired);
  v1::KvCompareAndSetResponse resp;
  Status s = impl_->Convert(impl_->stub_->KvCompareAndSet(&ctx, req, &resp));
  if (s.ok()) *result = CasResult{resp.swapped(), resp.found(), resp.current()};
  return s;
}

Status GrpcClient::KvDelete(const std::string& key, bool* deleted) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  v1::KvDeleteRequest req;
  req.set_key(key);
  v1::KvDeleteResponse resp;
  Status s = impl_->Convert(impl_->stub_->KvDelete(&ctx, req, &resp));
  *deleted = s.ok() && resp.deleted();
  return s;
}

Status GrpcClient::KvList(const std::string& prefix,
                          std::vector<std::pair<std::string, std::string>>* entries) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  v1::KvListRequest req;
  req.set_prefix(prefix);
  v1::KvListResponse resp;
  Status s = impl_->Convert(impl_->stub_->KvList(&ctx, req, &resp));
  entries->clear();
  if (s.ok()) {
    for (const auto& e : resp.entries()) entries->emplace_back(e.key(), e.value());
  }
  return s;
}

Status GrpcClient::Barrier(const std::string& name, int process_id, int count,
                           std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx, timeout + kWaitMargin);
  v1::BarrierRequest req;
  req.set_name(name);
  req.set_process_id(process_id);
  req.set_count(count);
  req.set_timeout_ms(timeout.count());
  v1::BarrierResponse resp;
  return impl_->Convert(impl_->stub_->Barrier(&ctx, req, &resp));
}

std::unique_ptr<LivenessStream> GrpcClient::OpenLiveness(int node_rank,
                                                         std::function<void(const JobEvent&)> on_event,
                                                         std::function<void(const Status&)> on_closed,
                                                         const std::optional<NodeJoin>& first_join) {
  return std::make_unique<Stream>(*impl_->stub_, impl_->config_.token, node_rank, std::move(on_event),
                                  std::move(on_closed), first_join);
}

}  // namespace distrun
