#pragma once
// The runtime module: distrun's runtime (the coordination service, the agent, gRPC, protobuf and abseil) and
// the verbs that speak to a job (kv, barrier, status, stacks, progress, check) are a library of their own,
// distrun-runtime.so, which distrun loads only when it needs them: a launch or one of those verbs.
// `--detect`, `--dry-run`, `--help` and `--version` never map it, and every srun task's or MPI rank's
// `distrun --detect` starts in a third of the time (bench/RESULTS.md, "the runtime as a module").
//
// Both sides are built from one tree, each with its own static copy of the C++ library (a shared libstdc++
// costs every distrun a millisecond at start). So no exception crosses between them: every call returns a
// ModuleError, which this side throws again as the exception the module caught. Arguments pass as the
// project's own types, whose code both sides compile from the same headers; both allocate with the C
// library's malloc.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "detect/environment.h"
#include "launcher/config/options.h"
#include "launcher/job/held_port.h"
#include "launcher/job/job_link.h"
#include "launcher/plan/plan.h"

namespace spdlog {
class logger;
}

namespace distrun {

// The module's file, found beside distrun or in ../libexec/distrun (launcher/process/companion_files.h).
inline constexpr char kRuntimeModuleFile[] = "distrun-runtime.so";
// The one symbol it exports: a function returning its RuntimeModuleApi.
inline constexpr char kRuntimeModuleEntry[] = "distrun_runtime_module";

// An exception the module caught, carried across.
struct ModuleError {
  enum class Kind { kNone, kUsage, kJobLink, kInternal };
  Kind kind = Kind::kNone;
  int exit_code = 1;  // kJobLink's
  std::string message;
};

// A job link that lives in the module (RuntimeLink behind it). Its methods are JobLink's; each reports what
// it would have thrown in `error` instead.
class ModuleLink {
 public:
  virtual ~ModuleLink() = default;
  virtual JobAssignment Rendezvous(int round, const JobAssignment& provisional,
                                   const std::vector<int>& fresh_local, ModuleError& error) = 0;
  virtual void CancelRendezvous(ModuleError& error) = 0;
  virtual bool ReportFailure(const FailedWorker& failure, ModuleError& error) = 0;
  virtual void ReportSuccess(ModuleError& error) = 0;
  virtual void Leave(int round, const std::string& reason, ModuleError& error) = 0;
  virtual void ReportProgress(const NodeProgress& progress, ModuleError& error) = 0;
  virtual void SendStacks(const StacksReply& reply, ModuleError& error) = 0;
  virtual int event_fd() const = 0;
  virtual std::vector<JobDecision> TakeDecisions(ModuleError& error) = 0;
  virtual std::vector<std::pair<std::string, std::string>> WorkerSecrets(ModuleError& error) const = 0;
  virtual void Finish(ModuleError& error) = 0;
};

using EnvVars = std::map<std::string, std::string, std::less<>>;

// What the module's entry returns.
struct RuntimeModuleApi {
  // RuntimeModuleFingerprint() of the module's build: distrun refuses a module of another build.
  uint64_t fingerprint = 0;
  // Runs the verb argv[1] names (check, kv, barrier, status, ...) and sets `exit_code`; false when argv[1]
  // is none of them.
  bool (*run_verb)(int argc, const char* const* argv, const EnvVars& env, int& exit_code,
                   ModuleError& error) = nullptr;
  // This node's link to the job's runtime (node 0 also starts the service); null with `error` set. `held`:
  // a single-host job's port and token, held until now (launcher/job/lazy_link.h); else null.
  ModuleLink* (*open_link)(const Plan& plan, const Options& options, const Environment& env,
                           const std::shared_ptr<spdlog::logger>& log, const std::string& leaving,
                           const HeldPort* held, ModuleError& error) = nullptr;
};

// Changes when the interface or the size of a type that crosses it does. Both sides of one build agree; a
// module left from another build (an installation half replaced) is refused with a message, not run.
constexpr uint64_t RuntimeModuleFingerprint() {
  constexpr uint64_t kInterfaceVersion = 2;
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the sizes
  for (uint64_t v :
       {kInterfaceVersion, uint64_t{sizeof(Plan)}, uint64_t{sizeof(Options)}, uint64_t{sizeof(Environment)},
        uint64_t{sizeof(JobAssignment)}, uint64_t{sizeof(FailedWorker)}, uint64_t{sizeof(NodeProgress)},
        uint64_t{sizeof(StacksReply)}, uint64_t{sizeof(JobDecision)}, uint64_t{sizeof(ModuleError)},
        uint64_t{sizeof(HeldPort)}, uint64_t{sizeof(RuntimeModuleApi)}}) {
    h = (h ^ v) * 1099511628211ull;
  }
  return h;
}

// The module could not be loaded: the message names the file and what to do.
class RuntimeModuleError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// distrun's side: the loaded module.
class RuntimeModule {
 public:
  // Loads distrun-runtime.so for the distrun program at `self`. Throws RuntimeModuleError.
  static RuntimeModule Load(const std::string& self);
  // Where Load would find it; throws the RuntimeModuleError Load would where it is missing.
  static std::string Locate(const std::string& self);
  // Loads the file at `path`, whatever its name. Throws RuntimeModuleError.
  static RuntimeModule LoadFile(const std::string& path);

  // See RuntimeModuleApi::run_verb; throws what the verb threw.
  bool RunVerb(int argc, const char* const* argv, const EnvVars& env, int& exit_code) const;
  // RuntimeLink's constructor, behind the module; throws what it threw.
  std::unique_ptr<JobLink> OpenLink(const Plan& plan, const Options& options, const Environment& env,
                                    const std::shared_ptr<spdlog::logger>& log, const std::string& leaving,
                                    const HeldPort* held = nullptr) const;

 private:
  explicit RuntimeModule(const RuntimeModuleApi* api) : api_(api) {}
  // The module stays loaded for the process's life: gRPC's threads may outlive every object of it.
  const RuntimeModuleApi* api_;
};

// Throws the exception `error` carries; returns when it carries none.
void ThrowModuleError(const ModuleError& error);

}  // namespace distrun
