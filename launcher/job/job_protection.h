#pragma once
// What keeps strangers out of a job (DESIGN §4.4): who may join node 0's runtime as an agent, and the token
// workers present to it. In order of preference:
// - loopback: a single-host job's runtime listens on loopback only (and a fresh random token);
// - munge: agents prove their user with a munge credential bound to the job (runtime/auth/agent_identity.h)
// and
//   node 0 admits only its own user's; it makes the workers' token and hands it to each admitted node;
// - token: a job token the user or the launcher gave (DISTRUN_TOKEN, --token-file, the MPI probe's);
// - none: a token derived from the job's identity, which anyone who knows the job can compute.
// A user token and `--munge require` together need both.

#include <memory>
#include <string>

#include "detect/environment.h"
#include "launcher/config/options.h"
#include "launcher/plan/plan.h"
#include "runtime/auth/munge_credentials.h"
#include "runtime/auth/munge_socket.h"

namespace distrun {

// How a user makes a job token; the messages about tokens show it.
inline constexpr char kTokenRecipe[] =
    "export DISTRUN_TOKEN=$(head -c16 /dev/urandom | od -An -tx1 | tr -d ' \\n')";

// The job token: DISTRUN_TOKEN, else --token-file, else the one detection handed out (MPI probe), else a
// fresh random one when this distrun is the whole job. Otherwise the token is derived from the job's
// identity, which keeps jobs apart but is no secret: `insecure` says so. Throws UsageError for an unusable
// token file.
struct JobToken {
  std::string value;
  bool insecure = false;
  bool made_up = false;  // random or derived here, not given: a node arriving later cannot know it
};
JobToken ResolveJobToken(const Plan& plan, const Options& options, const Environment& env);

// Whether every distrun and worker of the job runs on this host (the runtime then listens on loopback).
bool SingleHost(const Plan& plan);
// The loopback address such a job's runtime listens on: ::1 where the coordinator is, else 127.0.0.1.
std::string LoopbackHost(const Plan& plan);

// Where options.munge_socket came from, as messages name it: --munge-socket, DISTRUN_MUNGE_SOCKET, the
// config.
std::string MungeSocketOptionSource(const Options& options);

struct JobProtection {
  enum class Kind { kLoopback, kMunge, kToken, kNone };
  Kind kind = Kind::kNone;
  JobToken token;  // what agents present in their hello
  // What workers get as DISTRUN_TOKEN and every gRPC call must carry. Node 0's is the job's; with munge
  // another node learns it at rendezvous (NodeAssignment::worker_token).
  std::string worker_token;
  // Set where this node proves its user (every hello carries a fresh credential) and, on node 0, checks
  // the agents'.
  std::shared_ptr<const MungeCredentials> munge;
  std::string munge_problem;  // why munge is not in force, where it was tried
  MungeSocket munge_socket;   // munged's socket, where munge was tried

  // One line for --detect and the startup log: which protection is in force.
  std::string Describe() const;
};

// Decides this node's protection; probes munged (a millisecond) where munge may be used. Throws UsageError
// for an unusable token, or where --munge require finds munge not working.
JobProtection ResolveProtection(const Plan& plan, const Options& options, const Environment& env);

}  // namespace distrun
