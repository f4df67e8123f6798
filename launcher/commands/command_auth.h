#pragma once
// How a user's command proves itself to a job's runtime (`distrun status`, `stacks`, `kv`): the job token
// where DISTRUN_TOKEN is set (every worker has it), else a munge credential per call from munged at
// DISTRUN_MUNGE_SOCKET, else at the socket Slurm's configuration names, else at libmunge's default
// (runtime/client/client_auth.h, runtime/auth/munge_socket.h).

#include <functional>
#include <map>
#include <string>

#include "runtime/client/client_auth.h"
#include "runtime/transport/grpc_client.h"

namespace distrun {

using CommandAuth = ClientAuth;

// Sets `config`'s token, or its credential for the port of `config->address` (already set and valid),
// from DISTRUN_TOKEN, DISTRUN_MUNGE_SOCKET and SLURM_CONF in `env`.
CommandAuth SetCommandAuth(const std::map<std::string, std::string, std::less<>>& env,
                           GrpcClientConfig* config);

}  // namespace distrun
