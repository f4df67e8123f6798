#include "launcher/commands/check_command.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "detect/devices.h"

namespace distrun {
namespace {

namespace fs = std::filesystem;

constexpr const char* kUsage =
    "usage: distrun check [DISTRUN-OPTIONS] [-- CHECK-OPTIONS]\n"
    "\n"
    "Runs an NCCL all-reduce of floats from 8 B to 1 GiB over one worker per GPU (of this node, or of the\n"
    "whole job under srun or mpirun) and prints, per size, the time and the algorithm and bus bandwidth\n"
    "(busbw = algbw * 2(n-1)/n, as nccl-tests), then a verdict. Exit 0: passed; 1: failed or no GPU.\n"
    "\n"
    "DISTRUN-OPTIONS are distrun's own (default --nproc-per-node gpu --tag-output off).\n"
    "CHECK-OPTIONS: --min-bytes SIZE (8)  --max-bytes SIZE (1G)  --factor N (2)  --warmup N (5)\n"
    "               --iters N (20)  --min-busbw GBPS (fail below this peak bus bandwidth)\n";

bool HasOption(const std::vector<std::string>& args, const std::string& name) {
  return std::any_of(args.begin(), args.end(),
                     [&](const std::string& a) { return a == name || a.starts_with(name + "="); });
}

std::string Quote(const std::string* value) { return value ? "'" + *value + "'" : std::string("unset"); }

}  // namespace

CheckPlan PlanCheck(const Environment& env, const std::string& self, const std::vector<std::string>& args) {
  auto dashes = std::find(args.begin(), args.end(), "--");
  std::vector<std::string> distrun_args(args.begin(), dashes);
  std::vector<std::string> worker_args(dashes == args.end() ? dashes : dashes + 1, args.end());
  if (HasOption(distrun_args, "--help") || HasOption(distrun_args, "-h")) return {{}, kUsage, 0};

  const std::string host = env.hostname.empty() ? std::string("this host") : env.hostname;
  const std::string head = "distrun: check: ";
  std::optional<VisibleDevices> visible = ReadVisibleDevices(env);
  if (visible && visible->tokens.empty()) {
    return {{},
            head + "no GPU found on " + host + " (" + visible->variable + "=" +
                Quote(env.Get(visible->variable)) + " hides every GPU); nothing to check",
            1};
  }
  // The same discovery as a launch; with a variable set, it still tells whether any GPU is there at all.
  DiscoveredGpus found = DiscoverGpus(env);
  if (found.gpus.empty()) {
    return {
        {},
        head + "no GPU found on " + host + " (" +
            (visible ? visible->variable + "=" + Quote(env.Get(visible->variable)) + "; " : std::string()) +
            found.searched + "); nothing to check",
        1};
  }
  const size_t count = visible ? visible->tokens.size() : found.gpus.size();
  const std::string gpus = std::to_string(count) + " GPU" + (count == 1 ? "" : "s");
  if (found.source == "kfd") {
    return {{},
            head + host + " has " + gpus + " from AMD (KFD); the check runs NCCL, which needs NVIDIA GPUs",
            1};
  }
  const fs::path worker = fs::path(self).parent_path() / kCheckWorkerName;
  std::error_code ec;
  if (!fs::is_regular_file(worker, ec) || ::access(worker.c_str(), X_OK) != 0) {
    return {{},
            head + host + " has " + gpus + ", but this distrun was built without NCCL: " + worker.string() +
                " is missing; build distrun where the CUDA toolkit and NCCL are installed "
                "(cmake -DDISTRUN_WITH_NCCL=ON)",
            1};
  }
  CheckPlan plan;
  plan.argv.push_back(self);
  if (!HasOption(distrun_args, "--nproc-per-node"))
    plan.argv.insert(plan.argv.end(), {"--nproc-per-node", "gpu"});
  // Only worker 0 prints the table: rank tags would only clutter it.
  if (!HasOption(distrun_args, "--tag-output")) plan.argv.insert(plan.argv.end(), {"--tag-output", "off"});
  plan.argv.insert(plan.argv.end(), distrun_args.begin(), distrun_args.end());
  plan.argv.push_back("--");
  plan.argv.push_back(worker.string());
  plan.argv.insert(plan.argv.end(), worker_args.begin(), worker_args.end());
  return plan;
}

int RunCheckCommand(int argc, const char* const* argv) {
  Environment env = Environment::FromProcess();
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) {
    std::fprintf(stderr, "distrun: check: cannot find distrun's own program (/proc/self/exe: %s)\n",
                 ec.message().c_str());
    return 1;
  }
  std::vector<std::string> args(argv + std::min(argc, 2), argv + argc);
  CheckPlan plan = PlanCheck(env, self.string(), args);
  if (plan.argv.empty()) {
    std::fputs((plan.message + (plan.message.ends_with('\n') ? "" : "\n")).c_str(),
               plan.exit_code == 0 ? stdout : stderr);
    return plan.exit_code;
  }
  std::vector<char*> exec_argv;
  for (std::string& a : plan.argv) exec_argv.push_back(a.data());
  exec_argv.push_back(nullptr);
  std::fflush(nullptr);
  ::execv(exec_argv[0], exec_argv.data());
  std::fprintf(stderr, "distrun: check: cannot run %s: %s\n", exec_argv[0], std::strerror(errno));
  return 1;
}

}  // namespace distrun
