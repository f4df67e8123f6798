#pragma once
// Simulated PyTorch ranks that do on a TCPStore what `init_process_group("nccl")` does there, for
// `distrun-bench torch-store` (torch_store_bench.cc). Each rank, in order (docs/TORCH_STORE_PROTOCOL.md §5,
// §6):
//   1. 2.2+ only: VALIDATE (once per connection) and a PING with its own nonce;
//   2. ADD "init/" 1, as every TCPStore client does when it is made;
//   3. rank 0 SETs the NCCL unique id (128 bytes); every other rank WAITs for it and GETs it, as
//      ProcessGroupNCCL's broadcastUniqueNCCLID does (a TCPStore get is a WAIT, then a GET);
//   4. the store-based barrier of torch 2.x with TORCH_DIST_INIT_BARRIER=1: ADD the barrier key +1; the
//      rank whose ADD answers the world size SETs "<key>:last_worker" = "1"; every rank WAITs for that key.
// Non-blocking sockets on epoll loops (the loops of sim_agents.h), so that 100,000 ranks fit in one process
// and the server is what is measured.
//
// Connections: a real rank has a connection of its own (torch 1.13 a second one, idle, for key callbacks;
// not simulated). Where descriptors run out, --ranks-per-connection K ranks share one, each rank's requests
// in order on it. TCPStore has no request ids: replies come in the order of the requests, except a WAIT's,
// a bare 00 that comes when the key appears, possibly after the replies to requests sent behind it. So on
// a shared connection nothing that has a reply goes behind a WAIT on a key the connection has not seen
// exist; such a WAIT is sent only when every other rank of the connection is at one too (else a rank held
// behind it could be the one the key waits for), one at a time (torch 1.13's server answers only one of
// several pending WAITs of one socket on the same key). WAITs on a key the connection has seen exist are
// answered at once and go like any other request. With one rank per connection this is exactly a rank's
// own order.

#include <memory>
#include <string>

#include "runtime/torch_store/torch_store_codec.h"
#include "sim_agents.h"

namespace distrun::bench {

// The keys of one init, as torch spells them on the wire ("/" + each PrefixStore's prefix + "/" + key).
struct TorchInitKeys {
  std::string uid;          // the NCCL unique id of the default group's first communicator
  std::string barrier;      // the store-based barrier's counter
  std::string last_worker;  // set by the rank that completes the barrier
};

// kLegacy: torch 1.13 in a job whose agent serves the store (TORCHELASTIC_USE_AGENT_STORE=True, restart 0):
// "//worker/attempt_0/default_pg/0/0" and the 1.13 barrier's name "store_based_barrier_key:1".
// kModern: torch 2.5+ in the same setting (no attempt prefix, the backend's device prefix "cuda/"):
// "/default_pg/0//cuda//0" and "store_based_barrier_key:0".
TorchInitKeys InitKeys(TorchStoreDialect dialect);

struct TorchClientsOptions {
  std::string address;  // the store's, IPv4 "a.b.c.d:port"
  TorchStoreDialect dialect = TorchStoreDialect::kLegacy;
  int ranks = 0;
  int per_connection = 1;
  int threads = 1;  // epoll loops; a connection and its ranks belong to one
};

// Progress (SimAgents::progress()): `answered` counts ranks whose ADD "init/" was answered, `joined` ranks
// that hold the NCCL id, `passed` ranks through the barrier; failures name the rank as "node".
class TorchClients final : public SimAgents {
 public:
  // Prepares every rank and starts the loops; nothing is sent before Start.
  explicit TorchClients(const TorchClientsOptions& options);
  ~TorchClients() override;

 private:
  class Loop;
  struct Shared;

  std::unique_ptr<Shared> shared_;
};

}  // namespace distrun::bench
