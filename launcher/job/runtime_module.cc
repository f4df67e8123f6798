#include "launcher/job/runtime_module.h"

#include <dlfcn.h>
#include <unistd.h>

#include <type_traits>

#include "detect/errors.h"
#include "launcher/process/companion_files.h"

namespace distrun {
namespace {

// Runs one call of the module's link and throws what it reports.
template <typename F>
auto Call(F&& f) {
  ModuleError error;
  if constexpr (std::is_void_v<decltype(f(error))>) {
    f(error);
    ThrowModuleError(error);
  } else {
    auto result = f(error);
    ThrowModuleError(error);
    return result;
  }
}

// The supervisor's JobLink over the module's ModuleLink: each call throws here what the module caught.
class LoadedLink final : public JobLink {
 public:
  explicit LoadedLink(ModuleLink* link) : link_(link) {}

  JobAssignment Rendezvous(int round, const JobAssignment& provisional,
                           const std::vector<int>& fresh_local) override {
    return Call([&](ModuleError& e) { return link_->Rendezvous(round, provisional, fresh_local, e); });
  }
  void CancelRendezvous() override {
    Call([&](ModuleError& e) { link_->CancelRendezvous(e); });
  }
  bool ReportFailure(const FailedWorker& failure) override {
    return Call([&](ModuleError& e) { return link_->ReportFailure(failure, e); });
  }
  void ReportSuccess() override {
    Call([&](ModuleError& e) { link_->ReportSuccess(e); });
  }
  void Leave(int round, const std::string& reason) override {
    Call([&](ModuleError& e) { link_->Leave(round, reason, e); });
  }
  void ReportProgress(const NodeProgress& progress) override {
    Call([&](ModuleError& e) { link_->ReportProgress(progress, e); });
  }
  void SendStacks(const StacksReply& reply) override {
    Call([&](ModuleError& e) { link_->SendStacks(reply, e); });
  }
  int event_fd() const override { return link_->event_fd(); }
  std::vector<JobDecision> TakeDecisions() override {
    return Call([&](ModuleError& e) { return link_->TakeDecisions(e); });
  }
  std::vector<std::pair<std::string, std::string>> WorkerSecrets() const override {
    return Call([&](ModuleError& e) { return link_->WorkerSecrets(e); });
  }
  void Finish() override {
    Call([&](ModuleError& e) { link_->Finish(e); });
  }

 private:
  std::unique_ptr<ModuleLink> link_;  // deleted by its own (virtual) destructor, in the module
};

}  // namespace

void ThrowModuleError(const ModuleError& error) {
  switch (error.kind) {
    case ModuleError::Kind::kNone:
      return;
    case ModuleError::Kind::kUsage:
      throw UsageError(error.message);
    case ModuleError::Kind::kJobLink:
      throw JobLinkError(error.message, error.exit_code);
    case ModuleError::Kind::kInternal:
      throw std::runtime_error(error.message);
  }
  throw std::runtime_error(error.message);
}

RuntimeModule RuntimeModule::Load(const std::string& self) { return LoadFile(Locate(self)); }

std::string RuntimeModule::Locate(const std::string& self) {
  std::string path = FindCompanionFile(self, kRuntimeModuleFile, R_OK);
  if (path.empty()) {
    throw RuntimeModuleError(std::string("the runtime module ") + kRuntimeModuleFile + " is neither beside " +
                             (self.empty() ? std::string("this program") : self) +
                             " nor in ../libexec/distrun: distrun needs it to launch a job or to speak to "
                             "one; reinstall distrun (both come together)");
  }
  return path;
}

RuntimeModule RuntimeModule::LoadFile(const std::string& path) {
  // RTLD_LOCAL: its symbols stay its own. NODELETE: it is never unmapped (see api_).
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    throw RuntimeModuleError("cannot load the runtime module " + path + ": " + (why ? why : "unknown error") +
                             "; reinstall distrun");
  }
  using Entry = const RuntimeModuleApi* (*)();
  auto entry = reinterpret_cast<Entry>(::dlsym(handle, kRuntimeModuleEntry));
  const RuntimeModuleApi* api = entry ? entry() : nullptr;
  if (api == nullptr) {
    throw RuntimeModuleError(path + " is not distrun's runtime module (no " + kRuntimeModuleEntry +
                             "); reinstall distrun");
  }
  if (api->fingerprint != RuntimeModuleFingerprint()) {
    throw RuntimeModuleError("the runtime module " + path +
                             " comes from another build of distrun than this program; install both from "
                             "one build (they come together)");
  }
  return RuntimeModule(api);
}

bool RuntimeModule::RunVerb(int argc, const char* const* argv, const EnvVars& env, int& exit_code) const {
  ModuleError error;
  bool ran = api_->run_verb(argc, argv, env, exit_code, error);
  ThrowModuleError(error);
  return ran;
}

std::unique_ptr<JobLink> RuntimeModule::OpenLink(const Plan& plan, const Options& options,
                                                 const Environment& env,
                                                 const std::shared_ptr<spdlog::logger>& log,
                                                 const std::string& leaving, const HeldPort* held) const {
  ModuleError error;
  ModuleLink* link = api_->open_link(plan, options, env, log, leaving, held, error);
  ThrowModuleError(error);
  return std::make_unique<LoadedLink>(link);
}

}  // namespace distrun
