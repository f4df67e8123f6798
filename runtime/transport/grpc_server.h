#pragma once
// The coordination service on the wire (runtime/distrun.proto): gRPC's callback API, so that waiting calls
// (rendezvous, KvGet, barriers) hold no thread. Every call must carry the job token; message sizes are
// bounded; in local mode only loopback addresses may be bound. gRPC types stay in grpc_server.cc.

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "runtime/auth/agent_identity.h"
#include "runtime/auth/job_hosts.h"
#include "runtime/auth/munge_credentials.h"
#include "runtime/io/listening_socket.h"
#include "runtime/service/service.h"

namespace spdlog {
class logger;
}

namespace distrun {

struct GrpcServerConfig {
  std::string address = "127.0.0.1:0";  // host:port ([v6]:port); port 0: the OS picks one
  bool loopback_only = false;           // local mode: refuse an address other hosts could reach
  // Bound already (a standby's port, bound when its distrun started): served instead of binding `address`,
  // whose host names it in address().
  std::shared_ptr<ListeningSocket> listen;
  std::string token;  // the job token every call must present; never logged
  // What agents' hellos must carry on the agent channel; empty: `token`. Differs where node 0 made the
  // workers' token (munge).
  std::string agent_token;
  // Set: agents must also present a munge credential that `admission` accepts (its port is filled in).
  std::shared_ptr<const MungeCredentials> munge;
  AdmissionPolicy admission;
  // With munge: the credential alone admits an agent (the agents' token was derived from the job's
  // identity, no secret, and a node arriving later may derive another).
  bool munge_alone = false;
  size_t max_message_bytes = 4 << 20;
  // PyTorch's TCPStore protocol on the same port (runtime/torch_store/torch_store.h): workers'
  // init_process_group with TORCHELASTIC_USE_AGENT_STORE=True. Off: such connections are handed to gRPC,
  // which drops them.
  bool torch_store = false;
  size_t torch_store_max_bytes = size_t{1} << 30;  // keys + values + queued items, every epoch's keyspace
  // TCPStore carries no credentials: true lets only this host and the hosts of admitted agents use the
  // store (multi-host jobs); false lets any peer (a loopback-only server, where every peer is local).
  bool torch_store_job_hosts_only = false;
  size_t torch_store_threads = 0;  // the store's loops (torch_store_loops.h); 0: DefaultTorchStoreThreads
  std::chrono::milliseconds tick_interval{10};          // how often waits are checked for their deadline
  std::chrono::milliseconds progress_interval{10'000};  // how often rendezvous progress is logged
  std::shared_ptr<spdlog::logger> log;                  // null: spdlog's default logger
};

class GrpcServer {
 public:
  // Starts serving `service`, which must outlive the server. Throws UsageError for a non-loopback address
  // in loopback-only mode and std::runtime_error, naming the address, when it cannot listen.
  GrpcServer(CoordinationService& service, GrpcServerConfig config);
  // Fails the service's pending waits, ends every stream and waits until gRPC is done with them.
  ~GrpcServer();
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  int port() const;
  // The bound address with the actual port ("127.0.0.1:40123").
  std::string address() const;
  // Calls refused for a missing or wrong token so far.
  uint64_t refused_calls() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// Splits "host:port" and "[v6]:port"; throws UsageError naming `what` for anything else.
std::pair<std::string, int> SplitHostPort(const std::string& address, const std::string& what);

}  // namespace distrun
