#pragma once
// What an admitted agent's frames ask of the coordination service, apart from the socket they came on: the
// liveness stream's nodes (an agent's one; several for a peer that carries more than one node, a relay or a
// benchmark), heartbeats, joins, reports and calls. The agent channel server holds one per connection and
// hands it every frame after the hello; the fuzz target runs the same dispatch with no socket at all.

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/distrun.pb.h"
#include "runtime/service/service.h"

namespace spdlog {
class logger;
}

namespace distrun {

class AgentSession {
 public:
  // The connection's side: where answers go. Frames may be sent from any thread, also under the service's
  // lock (its event sinks); the others are called from the thread that calls Handle.
  class Link {
   public:
    virtual ~Link() = default;
    virtual void Send(const v1::CoordinatorFrame& frame) = 0;
    // Answers `status` and ends the connection; nothing more of it is handled.
    virtual void Refuse(const Status& status) = 0;
    // The same for an agent that may not join at all (logged apart: such refusals may come by thousands).
    virtual void RefuseAgent(const std::string& why) = 0;
    // Segments the connection sent again since the last call (tcp_retransmits.h): a lossy link's sign.
    virtual uint32_t Retransmits() = 0;
  };

  // `link` outlives nothing: the service's sinks hold it weakly and drop what a closed connection would get.
  // `credential_node`: the node the agent's munge credential was made for, where one was checked.
  AgentSession(CoordinationService& service, std::weak_ptr<Link> link, std::optional<int> credential_node,
               std::shared_ptr<spdlog::logger> log);

  // One frame after the hello. Returns false once the connection is refused: nothing more of it is read.
  bool Handle(const v1::AgentFrame& message);

  // The service's streams this connection attached, taken once it ends (each to be detached).
  std::vector<uint64_t> TakeStreams();

 private:
  struct WireNode {
    int wire;  // as the messages say it: an arrival's -1
    int node;  // the service's node rank
    uint64_t stream;
  };

  bool Liveness(const v1::AgentHeartbeat& message);
  void Call(const v1::AgentCall& call);
  void SendEvent(int wire, const JobEvent& event);
  void SendResult(uint64_t id, const Status& status);

  CoordinationService& service_;
  const std::weak_ptr<Link> link_;
  const std::optional<int> credential_node_;
  const std::shared_ptr<spdlog::logger> log_;
  std::mutex mu_;  // nodes_: read by TakeStreams, which the connection's end may call from its own thread
  std::vector<WireNode> nodes_;
};

}  // namespace distrun
