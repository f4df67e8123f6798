// distrun's entry point: wires environment → options → topology → plan → action.

#include <spdlog/logger.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "detect/detection.h"
#include "detect/environment.h"
#include "detect/errors.h"
#include "launcher/config/command_line.h"
#include "launcher/config/config_file.h"
#include "launcher/config/options.h"
#include "launcher/job/job_link.h"
#include "launcher/job/job_protection.h"
#include "launcher/job/lazy_link.h"
#include "launcher/job/runtime_module.h"
#include "launcher/plan/mpi_program.h"
#include "launcher/plan/plan.h"
#include "launcher/plan/worker_command.h"
#include "launcher/process/output.h"
#include "launcher/process/prompt_thread.h"
#include "launcher/remote/host_loss.h"
#include "launcher/remote/remote_node.h"
#include "launcher/remote/ssh_launch.h"
#include "launcher/report/detect_report.h"
#include "launcher/supervise/sentinel.h"
#include "launcher/supervise/supervisor.h"
#include "launcher/version.h"

namespace distrun {
namespace {

constexpr int kUsageExit = 2;

#if defined(__SANITIZE_ADDRESS__)
#define DISTRUN_ORDERLY_EXIT 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DISTRUN_ORDERLY_EXIT 1
#endif
#endif

// The job is over on this node: every process it started is gone and node 0's service has told the other
// nodes. What is left of the runtime is gRPC's orderly shutdown (the server drained, a dozen threads
// joined, static state torn down), which costs 2-5 ms at the end of every job; the kernel closes the
// sockets just as well, so distrun exits at once. The idle threads that started the workers end with the
// process too, rather than being woken and joined one by one. Sanitizer builds take the orderly path, so
// that leak checking still covers the runtime.
int EndJob(int exit_code, std::unique_ptr<JobLink> link, std::unique_ptr<Spawner> spawner) {
#ifdef DISTRUN_ORDERLY_EXIT
  (void)spawner;  // null: the supervisor joined its threads
  link.reset();
  return exit_code;
#else
  (void)spawner.release();
  (void)link.release();
  std::fflush(nullptr);
  std::_Exit(exit_code);
#endif
}

void PrintWarnings(const Plan& plan) {
  for (const auto& w : plan.warnings) std::fprintf(stderr, "distrun: warning: %s\n", w.c_str());
}

// MPI's probe forks this process and its child allocates and loads libmpi, which is only safe while no other
// thread of distrun's allocates or loads: the probe first calls `settle`, which waits for such a thread.
void SettleBeforeProbe(Environment& env, std::function<void()> settle) {
  if (!env.mpi_probe) return;
  env.mpi_probe = [probe = std::move(env.mpi_probe),
                   settle = std::move(settle)](const std::vector<std::string>& libraries) {
    settle();
    return probe(libraries);
  };
}

int RunLaunch(int argc, const char* const* argv, UniqueFd launcher_channel);

int Run(int argc, const char* const* argv) {
  // A host's side of a job started over ssh (launcher/remote/): its check and start message, then an
  // ordinary distrun of the job that listens to the launcher on stdin.
  if (argc > 1 && std::string_view(argv[1]) == kRemoteNodeFlag) {
    return RunRemoteNode(Environment::FromProcess(), Version());
  }
  UniqueFd launcher_channel;
  if (argc > 1 && std::string_view(argv[1]) == kLauncherChannelFlag) {
    launcher_channel = LauncherWatch::TakeChannel();
    std::vector<const char*> rest(argv, argv + argc);
    rest.erase(rest.begin() + 1);
    return RunLaunch(static_cast<int>(rest.size()), rest.data(), std::move(launcher_channel));
  }
  return RunLaunch(argc, argv, UniqueFd());
}

int RunLaunch(int argc, const char* const* argv, UniqueFd launcher_channel) {
  // A verb (kv, status, check, ...) lives in the runtime module, as the runtime does; options and
  // --detect do not load it.
  std::optional<RuntimeModule> module;
  std::optional<Environment> read_for_verb;  // a command given without --: read once, used again below
  if (argc > 1 && argv[1][0] != '-') {
    read_for_verb = Environment::FromProcess();
    module = RuntimeModule::Load(read_for_verb->program);
    int exit_code = 0;
    if (module->RunVerb(argc, argv, read_for_verb->vars, exit_code)) return exit_code;
  }
  CommandLine cl = ParseCommandLine(argc, argv);
  if (cl.action == Action::kHelp) {
    std::fputs(cl.help_text.c_str(), stdout);
    return 0;
  }
  if (cl.action == Action::kVersion) {
    std::printf("%s\n", VersionLine().c_str());
    return 0;
  }
  Environment env = read_for_verb ? std::move(*read_for_verb) : Environment::FromProcess();
  std::optional<std::string> config_path = cl.config_path;
  if (!config_path) {
    if (const std::string* p = env.Get("DISTRUN_CONFIG")) config_path = *p;
  }
  ConfigFile config = LoadConfigFile(config_path, "distrun.yaml");
  Options options = ResolveOptions(cl.flags, env.vars, config.values, cl.defaults);
  if (cl.form) options.script_form = cl.form;
  options.command = !cl.command.empty()
                        ? WorkerCommand(cl.command, cl.command_after_dashes, options.script_form, env)
                        : WorkerCommand(config.command, true, options.script_form, env);
  // A job over ssh is started from here; a host's distrun of it is one node, whatever a config file says.
  if (launcher_channel) options.hosts.clear();
  if (!options.hosts.empty() && (cl.action == Action::kLaunch || cl.action == Action::kDryRun)) {
    // The launcher tells a node 0 that left the job (which an elastic job goes on without) by its code.
    static_assert(kNodeLeftExitCode == kFencedExitCode);
    return RunSshLaunch(options, cl.action == Action::kDryRun, env, Version(), MakeLogger(options.log_level));
  }

  // Before detection, which may start the CUDA driver's or MPI's threads: they must inherit the mask.
  if (cl.action == Action::kLaunch) BlockSupervisedSignals(options);
  // The sentinel's spawn waits for its exec: begun now, on a thread with the mask above, it runs beside
  // detection and planning instead of holding the workers back (the supervisor starts it otherwise). MPI's
  // probe forks this process: it waits until that thread has ended (under AddressSanitizer a fork beside
  // it hung a probe's child in CI).
  std::shared_ptr<SentinelStart> sentinel_starting;
  if (cl.action == Action::kLaunch && !options.command.empty()) {
    if (std::string program = FindSentinelProgram(env.program); !program.empty()) {
      sentinel_starting = std::make_shared<SentinelStart>(std::move(program));
      SettleBeforeProbe(env, [sentinel_starting] { sentinel_starting->Finish(); });
    }
  }
  // A launch needs the runtime module, unless the job's runtime may start late (launcher/job/lazy_link.h),
  // which the plan tells. Where the options already say it cannot, the module is mapped and relocated on a
  // thread of its own (with the mask above) while this one detects and plans. The MPI probe then waits for
  // it: the probe forks and loads libmpi in the child, and a fork while another thread is inside dlopen
  // leaves the child's loader half-updated (glibc then asserts in _dl_sort_maps_dfs).
  // The probe joins the thread rather than wait for the module: the thread frees what it held after the
  // module is ready.
  std::shared_future<RuntimeModule> module_loading;
  std::shared_ptr<PromptThread> module_loader;
  auto load_module = [&] {
    auto load = std::make_shared<std::packaged_task<RuntimeModule()>>(
        [program = env.program] { return RuntimeModule::Load(program); });
    module_loading = load->get_future().share();
    module_loader = std::make_shared<PromptThread>([load] { (*load)(); });
  };
  if (cl.action == Action::kLaunch && !module && !LazyLink::MayFit(options)) {
    load_module();
    SettleBeforeProbe(env, [module_loader] { module_loader->join(); });
  }
  // torchrun's -r/-t without a directory for the files: like torchrun, distrun makes one.
  const bool made_log_dir =
      cl.action == Action::kLaunch && !options.log_dir && (options.redirects.given() || options.tee.given());
  if (made_log_dir) options.log_dir = MakeLogDir(env.GetOr("TMPDIR", "/tmp"));
  Topology topology = DetectTopology(env, options.topology);
  // --detect shows what the launcher's variables said; a job cannot start without its coordinator.
  if (cl.action == Action::kLaunch && !topology.coordinator_problem.empty()) {
    throw UsageError(topology.coordinator_problem);
  }
  LocalLayout layout = ComputeLocalLayout(topology, options, env);
  JobAssignment assignment = ProvisionalAssignment(topology, layout, options);
  Plan plan = MakePlan(topology, layout, assignment, options, env);

  if (cl.action == Action::kDetect || cl.action == Action::kDryRun) {
    if (options.format == DetectFormat::kText || options.format == DetectFormat::kEnv) PrintWarnings(plan);
    std::string protection;
    try {
      protection = ResolveProtection(plan, options, env).Describe();
    } catch (const UsageError& e) {
      protection = std::string("unusable: ") + e.what();  // a launch would stop with this
    }
    std::string report = RenderDetectReport(plan, options, protection);
    if (cl.action == Action::kDryRun && options.format == DetectFormat::kText) {
      std::string cmd;
      for (const auto& a : options.command) cmd += (cmd.empty() ? "" : " ") + a;
      report += "command           " + (cmd.empty() ? std::string("(none)") : cmd) + "\n";
    }
    std::fputs(report.c_str(), stdout);
    return 0;
  }
  if (options.command.empty()) {
    throw UsageError(
        "no command to run; give one after -- (distrun -- python train.py), set 'command:' in "
        "distrun.yaml, or use --detect");
  }
  CheckMpiProgram(plan, options.command, env);
  std::shared_ptr<spdlog::logger> log = MakeLogger(options.log_level);
  // Started over ssh: the launcher's words (and its silence) reach the supervisor as signals.
  std::optional<LauncherWatch> launcher_watch;
  if (launcher_channel) launcher_watch.emplace(std::move(launcher_channel), options.heartbeat_timeout_s, log);
  for (const auto& w : plan.warnings) log->warn("{}", w);
  if (made_log_dir) log->info("the workers' log files (--redirects, --tee) are in {}", *options.log_dir);
  // Every distrun is an agent of the job's runtime; node 0's also hosts its service. A single-host job's
  // starts when something needs it; a missing module is said now all the same, before any worker starts.
  const bool starts_late = LazyLink::Fits(plan, options);
  if (starts_late && !module) {
    RuntimeModule::Locate(env.program);
  } else if (!module && !module_loading.valid()) {
    load_module();  // beside the supervisor's start (its sentinel, its files)
  }
  // What the link is made of, kept by whichever link starts the runtime (a late one, beyond the supervisor).
  // The link reads the plan's topology, layout and assignment, never a worker's plan: the workers' are not
  // copied (64 workers' variables were 0.3 ms before the first start).
  struct LinkInputs {
    Plan plan;
    Options options;
    Environment env;
    std::shared_ptr<spdlog::logger> log;
  };
  auto in = std::make_shared<const LinkInputs>(
      LinkInputs{Plan{plan.topology, plan.layout, plan.assignment, {}, plan.warnings}, options, env, log});
  JobLinkFactory make_link = [in, module, module_loading,
                              starts_late](const std::string& leaving) -> std::unique_ptr<JobLink> {
    if (starts_late && leaving.empty()) {
      auto start = [in](const HeldPort& held) {
        return RuntimeModule::Load(in->env.program)
            .OpenLink(in->plan, in->options, in->env, in->log, "", &held);
      };
      if (std::unique_ptr<JobLink> lazy = LazyLink::Hold(in->plan, in->options, in->env, in->log, start)) {
        return lazy;
      }
    }
    const RuntimeModule runtime = module                   ? *module
                                  : module_loading.valid() ? module_loading.get()
                                                           : RuntimeModule::Load(in->env.program);
    return runtime.OpenLink(in->plan, in->options, in->env, in->log, leaving);
  };
  int exit_code = 0;
  std::unique_ptr<JobLink> link;
  std::unique_ptr<Spawner> spawner;
  {
    Supervisor supervisor(std::move(plan), std::move(options), std::move(env), log, std::move(make_link));
    if (sentinel_starting) supervisor.AdoptSentinel(std::move(sentinel_starting));
    exit_code = supervisor.Run();
    if (launcher_watch) exit_code = RemoteNodeExitCode(exit_code, launcher_watch->launcher_lost());
    link = supervisor.ReleaseLink();
#ifndef DISTRUN_ORDERLY_EXIT
    spawner =
        supervisor.ReleaseSpawner();  // sanitizer builds join its threads with the supervisor, as before
#endif
  }
  if (link) link->Finish();
  log->flush();
  return EndJob(exit_code, std::move(link), std::move(spawner));
}

}  // namespace
}  // namespace distrun

int main(int argc, char** argv) {
  try {
    return distrun::Run(argc, argv);
  } catch (const distrun::UsageError& e) {
    std::fprintf(stderr, "distrun: error: %s\n", e.what());
    return distrun::kUsageExit;
  } catch (const distrun::RuntimeModuleError& e) {
    std::fprintf(stderr, "distrun: error: %s\n", e.what());
    return 1;
  } catch (const distrun::JobLinkError& e) {
    std::fprintf(stderr, "distrun: error: %s\n", e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "distrun: internal error: %s; please report it\n", e.what());
    return 1;
  }
}
