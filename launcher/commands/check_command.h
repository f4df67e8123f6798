#pragma once
// `distrun check [DISTRUN-OPTIONS] [-- CHECK-OPTIONS]`: a preflight of this node's GPUs and the links
// between them (DESIGN §4, NCCL). It finds the GPUs as every launch does and, when there are some,
// becomes `distrun --nproc-per-node gpu --tag-output off DISTRUN-OPTIONS -- distrun-check-worker
// CHECK-OPTIONS`: an NCCL all-reduce over all workers whose worker 0 prints the bandwidth per message size
// and a verdict. Under srun or mpirun the same detection makes it a check of the whole job.

#include <string>
#include <vector>

#include "detect/environment.h"

namespace distrun {

// What `distrun check` does here: run `argv` (the program is argv[0]), or print `message` and exit with
// `exit_code`.
struct CheckPlan {
  std::vector<std::string> argv;
  std::string message;
  int exit_code = 0;
};

// `self` is this distrun's own path (its directory holds distrun-check-worker); `args` follow "check".
// Throws UsageError for a malformed device variable.
CheckPlan PlanCheck(const Environment& env, const std::string& self, const std::vector<std::string>& args);

// argv[1] is "check". Returns the exit code when nothing is run; otherwise it does not return.
int RunCheckCommand(int argc, const char* const* argv);

// The name of the worker program, installed beside distrun.
inline constexpr const char* kCheckWorkerName = "distrun-check-worker";

}  // namespace distrun
