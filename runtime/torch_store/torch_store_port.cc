#include "runtime/torch_store/torch_store_port.h"

#include <utility>

namespace distrun {

TorchStorePort::TorchStorePort(size_t max_store_bytes, TorchStoreLimits limits)
    : limits_(limits), store_(max_store_bytes) {}

void TorchStorePort::Open(uint64_t connection, TorchStoreDialect dialect) {
  decoders_.insert_or_assign(connection, TorchStoreDecoder(dialect, limits_));
  store_.Connected(connection);
}

TorchStorePortOutput TorchStorePort::Feed(uint64_t connection, std::string_view bytes) {
  TorchStorePortOutput out;
  auto it = decoders_.find(connection);
  if (it == decoders_.end()) {
    out.error = "bytes from a connection that is not open";
    return out;
  }
  TorchStoreDecoder& decoder = it->second;
  decoder.Append(bytes);
  TorchStoreRequest request;
  while (true) {
    switch (decoder.Next(&request)) {
      case TorchStoreDecoder::Result::kNeedMore:
        return out;
      case TorchStoreDecoder::Result::kError:
        out.error = decoder.error();
        return out;
      case TorchStoreDecoder::Result::kRequest:
        break;
    }
    TorchStoreOutcome outcome = store_.HandleRequest(connection, request);
    for (TorchStoreReply& reply : outcome.replies) out.replies.push_back(std::move(reply));
    if (!outcome.error.empty()) {
      out.error = std::string(TorchStoreDialectName(decoder.dialect())) + " " + outcome.error;
      return out;
    }
  }
}

void TorchStorePort::Close(uint64_t connection) {
  decoders_.erase(connection);
  store_.Disconnected(connection);
}

std::vector<uint64_t> TorchStorePort::StartEpoch(int64_t epoch) {
  std::vector<uint64_t> retired = store_.StartEpoch(epoch);
  for (uint64_t id : retired) decoders_.erase(id);
  return retired;
}

}  // namespace distrun
