#pragma once
// How a client that is not one of the job's workers proves itself to a job's runtime (`distrun status`,
// `stacks`, `kv` run by a user; the Python module's and the C API's client opened with an address and no
// token): with the job token where it has one; else, where munged answers, with a fresh munge credential of
// this user for each call (runtime/auth/client_identity.h), which node 0 accepts from the job's own user when
// the job is protected by munge. So `srun --overlap --jobid J distrun status` needs only the job's
// DISTRUN_COORDINATOR_ADDRESS there.

#include <string>

#include "runtime/auth/munge_socket.h"
#include "runtime/transport/grpc_client.h"

namespace distrun {

struct ClientAuth {
  bool munge = false;         // the calls carry munge credentials, not a token
  std::string munge_problem;  // neither: why munge could not be used
  MungeSocket socket;         // where munge was tried
};

// Sets `config`'s token (`token`, when not empty), or its credential for the port of `config->address`
// (already set and valid) from munged at `socket`.
ClientAuth SetClientAuth(const std::string& token, const MungeSocket& socket, GrpcClientConfig* config);

// The line after "distrun VERB: " for a call the runtime at `address` refused (`why`: its message).
std::string RefusalMessage(const ClientAuth& auth, const std::string& address, const std::string& why);

}  // namespace distrun
