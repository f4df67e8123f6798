#pragma once
// The hang watch's commands (DESIGN §4.2):
//   distrun progress STEP   a worker (a shell script) reports the step it reached
//   distrun stacks          every worker's current stack, merged into one picture, without stopping the job
//   distrun status          the job as node 0 sees it: epoch, nodes, each rank's step, rate and age
// `progress` writes the worker's slot of its node's progress board (DISTRUN_PROGRESS_FILE,
// DISTRUN_PROGRESS_SLOT); `stacks` and `status` ask node 0's runtime, found like `distrun kv` finds it
// (DISTRUN_COORDINATOR_ADDRESS, DISTRUN_TOKEN or a munge credential: command_auth.h), so any shell that has
// the job's address and token, or its user's munge where munge protects the job, may run them (inside
// `srun --overlap --jobid`, say).

#include <map>
#include <string>
#include <vector>

namespace distrun {

bool IsWatchVerb(const std::string& word);
// `args` starts with the verb. Returns the exit code: 0; 2 usage error or not in a job; 3 the runtime
// cannot be reached or refused the call.
int RunWatchVerb(const std::vector<std::string>& args,
                 const std::map<std::string, std::string, std::less<>>& env);

}  // namespace distrun
