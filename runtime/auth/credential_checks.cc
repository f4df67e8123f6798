#include "runtime/auth/credential_checks.h"

#include <utility>

namespace distrun {

CredentialChecks::CredentialChecks(std::shared_ptr<const MungeCredentials> munge, AdmissionPolicy policy,
                                   Done done)
    : munge_(std::move(munge)),
      policy_(std::move(policy)),
      done_(std::move(done)),
      thread_([this] { Run(); }) {}

CredentialChecks::~CredentialChecks() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CredentialChecks::Submit(uint64_t id, std::string credential) {
  {
    std::lock_guard lock(mu_);
    queue_.emplace_back(id, std::move(credential));
  }
  cv_.notify_one();
}

void CredentialChecks::Run() {
  while (true) {
    std::pair<uint64_t, std::string> next;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    AdmissionVerdict verdict;
    std::string why;
    if (std::optional<MungeDecoded> decoded = munge_->Decode(next.second, &why)) {
      verdict = CheckAgentCredential(*decoded, policy_);
    } else {
      verdict.refusal = why;
    }
    done_(next.first, verdict);
  }
}

}  // namespace distrun
