#pragma once
// What an agent's munge credential says (DESIGN §4.4): the job and the node it was made for, so that a
// credential is good for one hello of one node of one job. munged adds the agent's uid and refuses to
// decode a credential twice or after its time to live; node 0 admits only agents of its own user.
//
// The payload: "distrun-agent/1 port=P node=N run=ID", where P is the coordinator's port as the agent
// dialled it, N the node rank the agent speaks for (-1 for one arriving at an elastic job) and ID the
// job's run id where the agent knows it (empty otherwise: node 0 then checks the port alone).

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "runtime/auth/munge_credentials.h"

namespace distrun {

struct AgentIdentity {
  int port = 0;
  int node_rank = 0;
  std::string run_id;
};

std::string AgentIdentityPayload(const AgentIdentity& identity);
std::optional<AgentIdentity> ParseAgentIdentity(std::string_view payload);

// What node 0 requires of an agent's credential.
struct AdmissionPolicy {
  uid_t uid = 0;  // the job's user: node 0's
  int port = 0;   // node 0's port
  std::string run_id;
};

struct AdmissionVerdict {
  std::string refusal;  // empty: admitted
  int node_rank = 0;    // the node the credential was made for
};

// Whether a decoded credential admits its agent. The gid is not checked: a user's jobs may run under
// different groups on different hosts (sg, newgrp, Slurm's --gid), and the uid alone is the user.
AdmissionVerdict CheckAgentCredential(const MungeDecoded& decoded, const AdmissionPolicy& policy);

}  // namespace distrun
