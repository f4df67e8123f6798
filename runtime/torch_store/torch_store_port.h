#pragma once
// PyTorch's TCPStore as the coordinator's port serves it: the connections found to speak TCPStore
// (SniffTorchStore), each with its decoder, over one TorchStore. No sockets here: the torch store's loops
// (torch_store_loops.h) hand in each connection's bytes and write the replies it gets back to the
// connections they name.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/torch_store/torch_store.h"
#include "runtime/torch_store/torch_store_codec.h"

namespace distrun {

struct TorchStorePortOutput {
  std::vector<TorchStoreReply> replies;  // in order; any connection
  // Set: the connection fed cannot go on (malformed or oversized input, an unknown opcode, a refused
  // request); it names the dialect and the opcode. The caller sends the replies, then closes it.
  std::string error;
};

class TorchStorePort {
 public:
  TorchStorePort(size_t max_store_bytes, TorchStoreLimits limits);

  // A connection the port sniffed as `dialect`; ids are the caller's, unique among open connections.
  void Open(uint64_t connection, TorchStoreDialect dialect);
  // Decodes and serves every whole request in `bytes` (the rest is kept for the next call).
  TorchStorePortOutput Feed(uint64_t connection, std::string_view bytes);
  void Close(uint64_t connection);

  // Begins `epoch` when it is newer than the store's: an empty keyspace. Returns the connections of the
  // earlier epochs, which the caller closes (their workers belong to a round that is over).
  std::vector<uint64_t> StartEpoch(int64_t epoch);

  size_t connections() const { return decoders_.size(); }
  const TorchStore& store() const { return store_; }

 private:
  TorchStoreLimits limits_;
  TorchStore store_;
  std::unordered_map<uint64_t, TorchStoreDecoder> decoders_;
};

}  // namespace distrun
