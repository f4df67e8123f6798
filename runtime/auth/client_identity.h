#pragma once
// What the munge credential of a user's command says (`distrun status`, `stacks`, `kv` run outside the
// job's workers, where DISTRUN_TOKEN is not at hand): the coordinator it was made for. In a job protected by
// munge, node 0 accepts it in place of the job token from the job's own user, as it admits that user's
// agents (agent_identity.h); munged's replay cache makes each credential good for one call.
//
// The payload: "distrun-client/1 port=P", where P is the coordinator's port as the command dialled it. It
// travels in the call's kMungeHeader.

#include <string>

#include "runtime/auth/agent_identity.h"
#include "runtime/auth/munge_credentials.h"

namespace distrun {

inline constexpr char kMungeHeader[] = "x-distrun-munge";

std::string ClientIdentityPayload(int port);

// Empty: the credential admits the call; else why not (for the refusal's message).
std::string CheckClientCredential(const MungeDecoded& decoded, const AdmissionPolicy& policy);

}  // namespace distrun
