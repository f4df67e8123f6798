#pragma once
// What workers use (C++): the runtime's key-value store and barriers, as one worker of the job. The C API
// in include/distrun/client.h wraps this class.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/grpc_client.h"
#include "runtime/types.h"

namespace distrun {

struct ClientOptions {
  std::string coordinator_address;  // DISTRUN_COORDINATOR_ADDRESS, passed in by the caller
  std::string token;                // DISTRUN_TOKEN
  int process_id = 0;               // DISTRUN_PROCESS_ID: who arrives at barriers
  int epoch = -1;                   // DISTRUN_EPOCH, where known: calls of an earlier epoch are refused
  std::chrono::milliseconds call_timeout{30'000};
};

class Client {
 public:
  // Throws UsageError for an empty address or a negative process id.
  explicit Client(ClientOptions options);

  Status Set(const std::string& key, const std::string& value) { return grpc_.KvSet(key, value); }
  Status Get(const std::string& key, std::chrono::milliseconds timeout, std::string* value) {
    return grpc_.KvGet(key, timeout, value);
  }
  Status TryGet(const std::string& key, std::optional<std::string>* value) {
    return grpc_.KvTryGet(key, value);
  }
  Status Add(const std::string& key, int64_t delta, int64_t* value) { return grpc_.KvAdd(key, delta, value); }
  Status CompareAndSet(const std::string& key, const std::optional<std::string>& expected,
                       const std::string& desired, CasResult* result) {
    return grpc_.KvCompareAndSet(key, expected, desired, result);
  }
  Status Delete(const std::string& key, bool* deleted) { return grpc_.KvDelete(key, deleted); }
  Status List(const std::string& prefix, std::vector<std::pair<std::string, std::string>>* entries) {
    return grpc_.KvList(prefix, entries);
  }
  // `count` 0: every worker of the job.
  Status Barrier(const std::string& name, int count, std::chrono::milliseconds timeout) {
    return grpc_.Barrier(name, options_.process_id, count, timeout);
  }

  int process_id() const { return options_.process_id; }

 private:
  static GrpcClientConfig Config(const ClientOptions& options);

  ClientOptions options_;
  GrpcClient grpc_;
};

}  // namespace distrun
