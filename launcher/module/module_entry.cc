// The runtime module's side of launcher/job/runtime_module.h: the one symbol distrun-runtime.so exports,
// and the guard that turns every exception into a ModuleError before it could leave the module.

#include <exception>

#include "detect/errors.h"
#include "launcher/commands/check_command.h"
#include "launcher/commands/kv_command.h"
#include "launcher/commands/watch_commands.h"
#include "launcher/job/runtime_module.h"
#include "launcher/module/runtime_link.h"

namespace distrun {
namespace {

template <typename F>
auto Guard(ModuleError& error, F&& f) -> decltype(f()) {
  using Result = decltype(f());
  try {
    return f();
  } catch (const UsageError& e) {
    error = {ModuleError::Kind::kUsage, 2, e.what()};
  } catch (const JobLinkError& e) {
    error = {ModuleError::Kind::kJobLink, e.exit_code(), e.what()};
  } catch (const std::exception& e) {
    error = {ModuleError::Kind::kInternal, 1, e.what()};
  } catch (...) {
    error = {ModuleError::Kind::kInternal, 1, "an unknown exception in the runtime module"};
  }
  if constexpr (!std::is_void_v<Result>) return Result{};
}

class GuardedLink final : public ModuleLink {
 public:
  explicit GuardedLink(std::unique_ptr<RuntimeLink> link) : link_(std::move(link)) {}
  ~GuardedLink() override {
    ModuleError ignored;
    Guard(ignored, [&] { link_.reset(); });
  }

  JobAssignment Rendezvous(int round, const JobAssignment& provisional, const std::vector<int>& fresh_local,
                           ModuleError& error) override {
    return Guard(error, [&] { return link_->Rendezvous(round, provisional, fresh_local); });
  }
  void CancelRendezvous(ModuleError& error) override {
    Guard(error, [&] { link_->CancelRendezvous(); });
  }
  bool ReportFailure(const FailedWorker& failure, ModuleError& error) override {
    return Guard(error, [&] { return link_->ReportFailure(failure); });
  }
  void ReportSuccess(ModuleError& error) override {
    Guard(error, [&] { link_->ReportSuccess(); });
  }
  void Leave(int round, const std::string& reason, ModuleError& error) override {
    Guard(error, [&] { link_->Leave(round, reason); });
  }
  void ReportProgress(const NodeProgress& progress, ModuleError& error) override {
    Guard(error, [&] { link_->ReportProgress(progress); });
  }
  void SendStacks(const StacksReply& reply, ModuleError& error) override {
    Guard(error, [&] { link_->SendStacks(reply); });
  }
  int event_fd() const override { return link_->event_fd(); }
  std::vector<JobDecision> TakeDecisions(ModuleError& error) override {
    return Guard(error, [&] { return link_->TakeDecisions(); });
  }
  std::vector<std::pair<std::string, std::string>> WorkerSecrets(ModuleError& error) const override {
    return Guard(error, [&] { return link_->WorkerSecrets(); });
  }
  void Finish(ModuleError& error) override {
    Guard(error, [&] { link_->Finish(); });
  }

 private:
  std::unique_ptr<RuntimeLink> link_;
};

bool RunVerb(int argc, const char* const* argv, const EnvVars& env, int& exit_code, ModuleError& error) {
  return Guard(error, [&] {
    if (argc < 2) return false;
    std::string verb = argv[1];
    if (verb == "check") {
      exit_code = RunCheckCommand(argc, argv);
    } else if (IsWatchVerb(verb)) {
      exit_code = RunWatchVerb(std::vector<std::string>(argv + 1, argv + argc), env);
    } else if (IsRuntimeVerb(verb)) {
      exit_code = RunRuntimeVerb(std::vector<std::string>(argv + 1, argv + argc), env);
    } else {
      return false;
    }
    return true;
  });
}

ModuleLink* OpenLink(const Plan& plan, const Options& options, const Environment& env,
                     const std::shared_ptr<spdlog::logger>& log, const std::string& leaving,
                     const HeldPort* held, ModuleError& error) {
  return Guard(error, [&]() -> ModuleLink* {
    return new GuardedLink(std::make_unique<RuntimeLink>(plan, options, env, log, leaving, held));
  });
}

constexpr RuntimeModuleApi kApi{RuntimeModuleFingerprint(), &RunVerb, &OpenLink};

}  // namespace
}  // namespace distrun

extern "C" __attribute__((visibility("default"))) const distrun::RuntimeModuleApi* distrun_runtime_module();
extern "C" const distrun::RuntimeModuleApi* distrun_runtime_module() { return &distrun::kApi; }
