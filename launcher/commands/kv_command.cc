#include "launcher/commands/kv_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

#include "detect/errors.h"
#include "detect/parse.h"
#include "launcher/commands/command_auth.h"
#include "launcher/config/options.h"
#include "runtime/transport/grpc_client.h"

namespace distrun {
namespace {

using Env = std::map<std::string, std::string, std::less<>>;

constexpr int kUsageExit = 2;
constexpr int kTimeoutExit = 124;
// Calls that do not wait on other workers: a script should learn soon that the service is not there.
constexpr std::chrono::milliseconds kCallTimeout{10'000};
// Without --timeout a wait lasts as long as the service allows (a day).
constexpr std::chrono::milliseconds kNoTimeout{24LL * 3600 * 1000};

constexpr const char* kUsage =
    "usage: distrun kv set KEY VALUE | get KEY [--timeout S] | try-get KEY | wait KEY... [--timeout S]\n"
    "                 | add KEY DELTA | cas KEY EXPECTED NEW | del KEY | ls [PREFIX]\n"
    "       distrun barrier NAME [--timeout S]\n"
    "Run as a worker of distrun (DISTRUN_COORDINATOR_ADDRESS and DISTRUN_TOKEN are set for every worker), "
    "or\n"
    "where DISTRUN_COORDINATOR_ADDRESS is set and munge protects the job (a munge credential of the job's "
    "user).\n"
    "cas: an empty EXPECTED means the key must be absent.\n"
    "Exit codes: 0 done; 1 no such key (try-get, del) or value differed (cas); 2 usage error;\n"
    "3 the runtime cannot be reached or refused the call; 124 a wait timed out.\n";

struct Invocation {
  std::string verb;  // "kv get", "barrier"
  std::vector<std::string> operands;
  std::optional<std::chrono::milliseconds> timeout;
  bool help = false;
};

Invocation Parse(const std::vector<std::string>& args) {
  Invocation inv;
  size_t i = 1;
  if (args[0] == "kv") {
    if (args.size() < 2)
      throw UsageError("distrun kv needs an operation: set, get, try-get, wait, add, cas, del or ls");
    inv.verb = "kv " + args[1];
    i = 2;
    if (args[1] == "-h" || args[1] == "--help") inv.help = true;
  } else {
    inv.verb = args[0];
  }
  bool options_end = false;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (!options_end && a == "--") {
      options_end = true;
    } else if (!options_end && (a == "-h" || a == "--help")) {
      inv.help = true;
    } else if (!options_end && (a == "--timeout" || a.starts_with("--timeout="))) {
      std::string value;
      if (a == "--timeout") {
        if (i + 1 == args.size()) throw UsageError(inv.verb + ": --timeout needs a value in seconds");
        value = args[++i];
      } else {
        value = a.substr(10);
      }
      double s = ParseSeconds("--timeout", value);
      inv.timeout = std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
    } else if (!options_end && a.starts_with("--")) {
      throw UsageError(inv.verb + ": unknown option '" + a +
                       "'; the only option is --timeout (put -- before a "
                       "value that starts with --)");
    } else {
      inv.operands.push_back(a);
    }
  }
  return inv;
}

void Arity(const Invocation& inv, size_t min, size_t max, const char* shape) {
  if (inv.operands.size() < min || inv.operands.size() > max) {
    throw UsageError(inv.verb + " takes " + shape + ", not " + std::to_string(inv.operands.size()) +
                     " argument(s); see distrun kv --help");
  }
}

int Fail(const Invocation& inv, Status s, const std::string& address, const CommandAuth& auth) {
  const bool waits = inv.verb == "kv get" || inv.verb == "kv wait" || inv.verb == "barrier";
  // A call that waits on nobody ran out of time only because the service did not answer.
  if (s.code == StatusCode::kDeadlineExceeded && !waits) s.code = StatusCode::kUnavailable;
  std::string what = s.message.empty() ? StatusCodeName(s.code) : s.message;
  if (s.code == StatusCode::kDeadlineExceeded) {
    std::fprintf(stderr, "distrun: %s: %s\n", inv.verb.c_str(), what.c_str());
    return kTimeoutExit;
  }
  if (s.code == StatusCode::kUnavailable) {
    // As `distrun status` says it (watch_commands.cc): the client's message names the address already.
    if (what.find(address) == std::string::npos) {
      what = "cannot reach the distrun runtime at " + address + " (" + what + ")";
    }
    std::fprintf(stderr, "distrun: %s: %s; is the job still running?\n", inv.verb.c_str(), what.c_str());
  } else if (s.code == StatusCode::kUnauthenticated) {
    std::fprintf(stderr, "distrun: %s: %s\n", inv.verb.c_str(), RefusalMessage(auth, address, what).c_str());
  } else if (s.code == StatusCode::kInvalidArgument || s.code == StatusCode::kOutOfRange) {
    std::fprintf(stderr, "distrun: %s: %s\n", inv.verb.c_str(), what.c_str());
    return kUsageExit;
  } else {
    std::fprintf(stderr, "distrun: %s: %s\n", inv.verb.c_str(), what.c_str());
  }
  return kVerbServiceExit;
}

void PrintValue(const std::string& value) {
  std::fwrite(value.data(), 1, value.size(), stdout);
  std::fputc('\n', stdout);
}

int64_t ParseDelta(const std::string& text) {
  try {
    size_t used = 0;
    long long v = std::stoll(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  throw UsageError("kv add: DELTA '" + text + "' is not an integer (such as 1 or -3)");
}

int Execute(const Invocation& inv, const Env& env) {
  auto get = [&env](const char* name) -> std::string {
    auto it = env.find(name);
    return it == env.end() ? std::string() : it->second;
  };
  GrpcClientConfig config;
  config.address = get("DISTRUN_COORDINATOR_ADDRESS");
  // A worker's calls carry its epoch, so that a worker the job went on without is refused.
  if (std::string epoch = get("DISTRUN_EPOCH"); !epoch.empty())
    config.epoch = ParseCount("DISTRUN_EPOCH", epoch);
  // --timeout also bounds reaching the service, so that a script's wait is never longer than it asked.
  config.call_timeout =
      inv.timeout ? std::clamp(*inv.timeout, std::chrono::milliseconds(100), kCallTimeout) : kCallTimeout;
  if (config.address.empty()) {
    throw UsageError(inv.verb +
                     ": DISTRUN_COORDINATOR_ADDRESS is not set; run this as a worker of distrun "
                     "(distrun -- your_script.sh)");
  }
  ParseHostPort("DISTRUN_COORDINATOR_ADDRESS", config.address);
  // A worker (DISTRUN_PROCESS_ID set) may call while node 0's runtime is still starting: its calls wait for
  // it. A user's command outside the job meets a runtime that has ended: a refused connection fails at once.
  config.wait_for_ready = !get("DISTRUN_PROCESS_ID").empty();
  const CommandAuth auth = SetCommandAuth(env, &config);
  GrpcClient client(config);
  const std::vector<std::string>& op = inv.operands;
  const std::chrono::milliseconds wait = inv.timeout.value_or(kNoTimeout);
  Status s;

  if (inv.verb == "kv set") {
    Arity(inv, 2, 2, "KEY VALUE");
    s = client.KvSet(op[0], op[1]);
  } else if (inv.verb == "kv get") {
    Arity(inv, 1, 1, "KEY");
    std::string value;
    s = client.KvGet(op[0], wait, &value);
    if (s.ok()) PrintValue(value);
  } else if (inv.verb == "kv try-get") {
    Arity(inv, 1, 1, "KEY");
    std::optional<std::string> value;
    s = client.KvTryGet(op[0], &value);
    if (s.ok() && !value) return kVerbNegativeExit;
    if (s.ok()) PrintValue(*value);
  } else if (inv.verb == "kv wait") {
    Arity(inv, 1, SIZE_MAX, "one or more KEYs");
    auto deadline = std::chrono::steady_clock::now() + wait;
    for (const std::string& key : op) {
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      std::string ignored;
      s = client.KvGet(key, std::max(left, std::chrono::milliseconds(0)), &ignored);
      if (!s.ok()) break;
    }
  } else if (inv.verb == "kv add") {
    Arity(inv, 2, 2, "KEY DELTA");
    int64_t result = 0;
    s = client.KvAdd(op[0], ParseDelta(op[1]), &result);
    if (s.ok()) std::printf("%lld\n", static_cast<long long>(result));
  } else if (inv.verb == "kv cas") {
    Arity(inv, 3, 3, "KEY EXPECTED NEW");
    std::optional<std::string> expected;
    if (!op[1].empty()) expected = op[1];
    CasResult result;
    s = client.KvCompareAndSet(op[0], expected, op[2], &result);
    if (s.ok() && !result.swapped) {
      std::fprintf(stderr, "distrun: kv cas: key '%s' %s; not changed\n", op[0].c_str(),
                   result.found ? ("holds '" + result.current + "'").c_str() : "is absent");
      return kVerbNegativeExit;
    }
  } else if (inv.verb == "kv del") {
    Arity(inv, 1, 1, "KEY");
    bool deleted = false;
    s = client.KvDelete(op[0], &deleted);
    if (s.ok() && !deleted) return kVerbNegativeExit;
  } else if (inv.verb == "kv ls") {
    Arity(inv, 0, 1, "an optional PREFIX");
    std::vector<std::pair<std::string, std::string>> entries;
    s = client.KvList(op.empty() ? std::string() : op[0], &entries);
    if (s.ok()) {
      for (const auto& entry : entries) PrintValue(entry.first);
    }
  } else if (inv.verb == "barrier") {
    Arity(inv, 1, 1, "NAME");
    std::string id = get("DISTRUN_PROCESS_ID");
    if (id.empty())
      throw UsageError("barrier: DISTRUN_PROCESS_ID is not set; run this as a worker of distrun");
    int process_id = ParseCount("DISTRUN_PROCESS_ID", id);
    s = client.Barrier(op[0], process_id, 0, wait);
  } else {
    throw UsageError("'" + inv.verb +
                     "' is not a kv operation; use set, get, try-get, wait, add, cas, del or ls");
  }
  return s.ok() ? 0 : Fail(inv, s, config.address, auth);
}

}  // namespace

bool IsRuntimeVerb(const std::string& word) { return word == "kv" || word == "barrier"; }

int RunRuntimeVerb(const std::vector<std::string>& args, const Env& env) {
  try {
    Invocation inv = Parse(args);
    if (inv.help) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    return Execute(inv, env);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "distrun: error: %s\n", e.what());
    return kUsageExit;
  }
}

}  // namespace distrun
