#include "launcher/job/job_protection.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "detect/errors.h"
#include "detect/parse.h"
#include "detect/random_hex.h"
#include "runtime/auth/job_hosts.h"
#include "runtime/auth/token_check.h"

namespace distrun {
namespace {

std::string ReadTokenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw UsageError("cannot read --token-file '" + path + "' (" + std::strerror(errno) +
                     "); create it with: head -c16 /dev/urandom | od -An -tx1 | tr -d ' \\n' > " + path);
  }
  std::stringstream text;
  text << in.rdbuf();
  std::string token(Trim(text.str()));
  if (token.empty()) {
    throw UsageError("--token-file '" + path + "' is empty; put the job token in it (one line)");
  }
  if (std::string problem = TokenProblem(token); !problem.empty()) {
    throw UsageError("the token in --token-file '" + path + "' " + problem + "; put one token of up to " +
                     std::to_string(kMaxTokenBytes) + " printable characters on one line");
  }
  return token;
}

// Every distrun of the job computes the same value from what they share; anyone who knows the job can too.
std::string DerivedToken(const Plan& plan) {
  std::string identity = "distrun-job/" + plan.topology.job_id + "/" + plan.assignment.coordinator_address;
  uint64_t hash = 1469598103934665603ULL;  // FNV-1a
  for (unsigned char c : identity) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return std::string("job-") + text;
}

}  // namespace

std::string MungeSocketOptionSource(const Options& options) {
  auto it = options.effective.find("munge-socket");
  if (it == options.effective.end()) return "--munge-socket";
  const std::string source = OptionSourceName(it->second.source);
  if (source == "env") return "DISTRUN_MUNGE_SOCKET";
  if (source == "config") return "munge_socket in the config file";
  return "--munge-socket";
}

bool SingleHost(const Plan& plan) {
  const Topology& t = plan.topology;
  // A loopback coordinator can only serve distrun processes on this machine (detection warns otherwise).
  if (IsLoopbackHost(t.coordinator_host)) return true;
  if (t.num_nodes > 1) return false;
  return t.hosts.size() <= 1 || std::all_of(t.hosts.begin(), t.hosts.end(),
                                            [&](const std::string& h) { return h == t.hosts.front(); });
}

std::string LoopbackHost(const Plan& plan) {
  const std::string& host = plan.topology.coordinator_host;
  return host == "::1" || host == "[::1]" ? "::1" : "127.0.0.1";
}

JobToken ResolveJobToken(const Plan& plan, const Options& options, const Environment& env) {
  if (const std::string* t = env.Get("DISTRUN_TOKEN"); t != nullptr && !t->empty()) {
    if (std::string problem = TokenProblem(*t); !problem.empty()) {
      throw UsageError("DISTRUN_TOKEN " + problem + "; set it to one token of up to " +
                       std::to_string(kMaxTokenBytes) + " printable characters, e.g. " + kTokenRecipe);
    }
    return {*t, false};
  }
  if (options.token_file) return {ReadTokenFile(*options.token_file), false};
  if (plan.topology.job_token && !plan.topology.job_token->empty()) return {*plan.topology.job_token, false};
  if (plan.layout.units == 1) return {RandomHex(32), false, true};
  return {DerivedToken(plan), true, true};
}

JobProtection ResolveProtection(const Plan& plan, const Options& options, const Environment& env) {
  JobProtection p;
  p.token = ResolveJobToken(plan, options, env);
  p.worker_token = p.token.value;
  if (!options.join && SingleHost(plan)) {
    p.kind = JobProtection::Kind::kLoopback;
    return p;
  }
  if (options.munge != MungeUse::kOff) {
    p.munge_socket = ChooseMungeSocket(options.munge_socket, MungeSocketOptionSource(options),
                                       env.GetOr("SLURM_CONF", ""), env.root);
    std::string why;
    // No socket, no munged: libmunge is not even loaded (most hosts without Slurm; every --detect there).
    const std::string socket = p.munge_socket.Effective();
    struct stat st;
    std::shared_ptr<MungeCredentials> munge;
    if (::stat(socket.c_str(), &st) != 0) {
      why = "munged does not answer at " + socket + ": " + std::strerror(errno);
    } else {
      munge = MungeCredentials::Load(p.munge_socket.path, &why);
    }
    if (munge && munge->Probe(&why)) {
      p.munge = std::move(munge);
    } else {
      p.munge_problem = why;
    }
  }
  if (options.munge == MungeUse::kRequire && !p.munge) {
    throw UsageError("--munge require, but " + p.munge_problem + " (socket: " + p.munge_socket.Describe() +
                     "); start munged, name its socket with --munge-socket, or use --munge auto");
  }
  // A token made up here (derived from the job's identity, or an arrival's own) protects nothing: munge
  // replaces it, and the workers' comes from node 0 (another node's is replaced at rendezvous).
  if (p.munge && (options.munge == MungeUse::kRequire || p.token.made_up)) {
    p.kind = JobProtection::Kind::kMunge;
    if (p.token.made_up) p.worker_token = RandomHex(32);
  } else {
    p.munge.reset();  // not needed: a token the user gave protects the job
    p.kind = p.token.insecure ? JobProtection::Kind::kNone : JobProtection::Kind::kToken;
  }
  return p;
}

std::string JobProtection::Describe() const {
  switch (kind) {
    case Kind::kLoopback:
      return "loopback only (every distrun of the job is on this host)";
    case Kind::kMunge:
      return std::string(
                 "munge: node 0 admits agents of its own user only and hands the workers its "
                 "token") +
             (token.made_up ? "" : "; and the job token") + "; munged at " + munge_socket.Describe();
    case Kind::kToken:
      return "the job token (DISTRUN_TOKEN, --token-file or the launcher's)";
    case Kind::kNone:
      return "none: no job token" + (munge_problem.empty()
                                         ? std::string(" and munge is off")
                                         : ", and munge does not work: " + munge_problem +
                                               " (socket: " + munge_socket.Describe() + ")");
  }
  return {};
}

}  // namespace distrun
