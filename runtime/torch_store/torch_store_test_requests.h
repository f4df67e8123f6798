#pragma once
// For the TCPStore tests: a request as the decoder gives it, from its parts.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/torch_store/torch_store_codec.h"

namespace distrun::testing {

inline TorchStoreRequest Req(TorchStoreOp op, std::vector<std::string> keys = {},
                             std::vector<std::string> values = {}, int64_t delta = 0, uint32_t number = 0) {
  return {op, std::move(keys), std::move(values), delta, number};
}

}  // namespace distrun::testing
