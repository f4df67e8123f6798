#pragma once
// How a user's command proves itself to a job's runtime (`distrun status`, `stacks`, `kv`): with the job
// token where DISTRUN_TOKEN is set (every worker has it); else, where munged answers, with a fresh munge
// credential of this user for each call (runtime/client_identity.h), which node 0 accepts from the job's
// own user when the job is protected by munge. So `srun --overlap --jobid J distrun status` needs only the
// job's DISTRUN_COORDINATOR_ADDRESS there.

#include <functional>
#include <map>
#include <string>

#include "runtime/grpc_client.h"

namespace distrun {

struct CommandAuth {
  bool munge = false;         // the calls carry munge credentials, not a token
  std::string munge_problem;  // neither: why munge could not be used
};

// Sets `config`'s token, or its credential for the port of `config->address` (already set and valid),
// from DISTRUN_TOKEN and DISTRUN_MUNGE_SOCKET in `env`.
CommandAuth SetCommandAuth(const std::map<std::string, std::string, std::less<>>& env,
                           GrpcClientConfig* config);

// The line after "distrun VERB: " for a call the runtime at `address` refused (`why`: its message).
std::string RefusalMessage(const CommandAuth& auth, const std::string& address, const std::string& why);

}  // namespace distrun
