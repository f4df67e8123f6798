#pragma once
// The coordinator's side of the agent channel (runtime/distrun.proto, top): one epoll loop owns the
// coordinator's listening socket. A connection that opens with the agent preface is an agent, served here
// with a few hundred bytes of state and one read per message; one that opens as PyTorch's TCPStore does
// (torch_store_codec.h) is handed to the job's torch store (torch_store_loops.h), served on loops of its
// own; any other (gRPC's HTTP/2: workers' key-value calls, other clients) is handed to gRPC untouched, so
// one port serves all three.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "runtime/auth/agent_identity.h"
#include "runtime/auth/munge_credentials.h"
#include "runtime/auth/token_check.h"
#include "runtime/service/service.h"

namespace spdlog {
class logger;
}

namespace distrun {

// The most a connection may send in one frame before its hello is accepted: a hello holds the token and
// little else, and nobody may make the coordinator hold megabytes for a peer it does not know yet.
inline constexpr size_t kMaxHelloFrameBytes = kMaxTokenBytes + 1024;

struct AgentChannelConfig {
  std::string token;  // what every hello must carry; never logged
  size_t max_message_bytes = 4 << 20;
  // A connection that has not said which protocol it speaks, or not sent its hello, is closed after this.
  std::chrono::milliseconds hello_timeout{10'000};
  // Takes over a connection that is not an agent's (nothing of it has been read), from `peer`: gRPC's.
  std::function<void(int fd, const std::string& peer)> hand_off;
  // A hello with a wrong token, from `peer`; the caller counts and logs refusals.
  std::function<void(const std::string& peer)> refused;
  // Set: besides the token, a hello must carry a munge credential that `admission` accepts (checked off the
  // loop, credential_checks.h); the agent is admitted once it is.
  std::shared_ptr<const MungeCredentials> munge;
  AdmissionPolicy admission;
  bool check_token = true;  // false: with munge, the credential alone admits
  // PyTorch's TCPStore (GrpcServerConfig's fields of the same names); off: such connections are handed off.
  bool torch_store = false;
  size_t torch_store_max_bytes = size_t{1} << 30;
  bool torch_store_job_hosts_only = false;  // job_hosts.h
  size_t torch_store_threads = 0;           // its loops (torch_store_loops.h); 0: DefaultTorchStoreThreads
  // Whether a connection's peer runs on this host; null: PeerIsThisHost (job_hosts.h). For tests, whose
  // peers are all on loopback.
  std::function<bool(int fd)> peer_is_this_host;
  std::shared_ptr<spdlog::logger> log;
};

class AgentChannelServer {
 public:
  // Serves connections accepted on `listen_fd` (listening, owned from now on) until destroyed.
  AgentChannelServer(CoordinationService& service, int listen_fd, AgentChannelConfig config);
  // Stops accepting and closes every connection (as CloseAll); the service must outlive this.
  ~AgentChannelServer();
  AgentChannelServer(const AgentChannelServer&) = delete;
  AgentChannelServer& operator=(const AgentChannelServer&) = delete;

  // Tells every agent `why` (UNAVAILABLE) and closes its connection; later connections are closed at
  // once. For the service's shutdown.
  void CloseAll(const std::string& why);

  // Agent connections open now (after their hello).
  size_t connections() const;

 private:
  class Loop;
  std::unique_ptr<Loop> loop_;
};

}  // namespace distrun
