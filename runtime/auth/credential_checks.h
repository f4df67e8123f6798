#pragma once
// Node 0's checks of agents' munge credentials, off the port's event loop: decoding asks munged (about a
// millisecond, seconds when munged is in trouble), and the loop serves every other connection meanwhile.
// One thread decodes the credentials in the order they came and hands each verdict to `done`.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/auth/agent_identity.h"
#include "runtime/auth/munge_credentials.h"

namespace distrun {

class CredentialChecks {
 public:
  // `done` runs on the checks' thread with the id given to Submit.
  using Done = std::function<void(uint64_t id, const AdmissionVerdict& verdict)>;

  CredentialChecks(std::shared_ptr<const MungeCredentials> munge, AdmissionPolicy policy, Done done);
  // Joins the thread; credentials not yet checked get no verdict.
  ~CredentialChecks();
  CredentialChecks(const CredentialChecks&) = delete;
  CredentialChecks& operator=(const CredentialChecks&) = delete;

  void Submit(uint64_t id, std::string credential);

 private:
  void Run();

  std::shared_ptr<const MungeCredentials> munge_;
  AdmissionPolicy policy_;
  Done done_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<uint64_t, std::string>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace distrun
