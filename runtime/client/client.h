#pragma once
// What workers use (C++): the runtime's key-value store and barriers, as one worker of the job. The C API
// in include/distrun/client.h wraps this class.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/auth/munge_socket.h"
#include "runtime/client/client_auth.h"
#include "runtime/service/types.h"
#include "runtime/transport/grpc_client.h"

namespace distrun {

struct ClientOptions {
  std::string coordinator_address;  // DISTRUN_COORDINATOR_ADDRESS, passed in by the caller
  std::string token;                // DISTRUN_TOKEN; empty outside the job: munge proves the user instead
  MungeSocket munge_socket;         // where munged listens, for a client without a token
  int process_id = 0;               // DISTRUN_PROCESS_ID: who arrives at barriers
  int epoch = -1;                   // DISTRUN_EPOCH, where known: calls of an earlier epoch are refused
  std::chrono::milliseconds call_timeout{30'000};
};

class Client {
 public:
  // Throws UsageError for an empty address or a negative process id.
  explicit Client(ClientOptions options);

  Status Set(const std::string& key, const std::string& value) { return Said(grpc_.KvSet(key, value)); }
  Status Get(const std::string& key, std::chrono::milliseconds timeout, std::string* value) {
    return Said(grpc_.KvGet(key, timeout, value));
  }
  Status TryGet(const std::string& key, std::optional<std::string>* value) {
    return Said(grpc_.KvTryGet(key, value));
  }
  Status Add(const std::string& key, int64_t delta, int64_t* value) {
    return Said(grpc_.KvAdd(key, delta, value));
  }
  Status CompareAndSet(const std::string& key, const std::optional<std::string>& expected,
                       const std::string& desired, CasResult* result) {
    return Said(grpc_.KvCompareAndSet(key, expected, desired, result));
  }
  Status Delete(const std::string& key, bool* deleted) { return Said(grpc_.KvDelete(key, deleted)); }
  Status List(const std::string& prefix, std::vector<std::pair<std::string, std::string>>* entries) {
    return Said(grpc_.KvList(prefix, entries));
  }
  // `count` 0: every worker of the job.
  Status Barrier(const std::string& name, int count, std::chrono::milliseconds timeout) {
    return Said(grpc_.Barrier(name, options_.process_id, count, timeout));
  }

  int process_id() const { return options_.process_id; }
  const ClientAuth& auth() const { return auth_; }

 private:
  static GrpcClientConfig Config(const ClientOptions& options, ClientAuth* auth);
  // A refusal says what was presented and what to do, as the command-line verbs do.
  Status Said(Status s) const;

  ClientOptions options_;
  ClientAuth auth_;
  GrpcClient grpc_;
};

}  // namespace distrun
