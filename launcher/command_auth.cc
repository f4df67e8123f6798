#include "launcher/command_auth.h"

#include <memory>
#include <optional>
#include <utility>

#include "detect/parse.h"
#include "runtime/client_identity.h"
#include "runtime/munge_credentials.h"

namespace distrun {

CommandAuth SetCommandAuth(const std::map<std::string, std::string, std::less<>>& env,
                           GrpcClientConfig* config) {
  CommandAuth auth;
  auto get = [&env](const char* name) {
    auto it = env.find(name);
    return it == env.end() ? std::string() : it->second;
  };
  config->token = get("DISTRUN_TOKEN");
  if (!config->token.empty()) return auth;
  std::string why;
  std::shared_ptr<const MungeCredentials> munge = MungeCredentials::Load(get("DISTRUN_MUNGE_SOCKET"), &why);
  const std::string payload =
      ClientIdentityPayload(ParseHostPort("DISTRUN_COORDINATOR_ADDRESS", config->address).port.value_or(0));
  // The first call's credential, made now, says whether munged answers; later calls make their own (each
  // is good once). Shared, so that copies of the config never send it twice.
  std::optional<std::string> first;
  if (munge) first = munge->Encode(payload, &why);
  if (!first) {
    auth.munge_problem = why;
    return auth;
  }
  config->credential = [munge, payload,
                        unused = std::make_shared<std::optional<std::string>>(std::move(first))] {
    if (*unused) return *std::exchange(*unused, std::nullopt);
    std::string ignored;  // a failure sends no credential; the runtime's refusal says so
    return munge->Encode(payload, &ignored).value_or("");
  };
  auth.munge = true;
  return auth;
}

std::string RefusalMessage(const CommandAuth& auth, const std::string& address, const std::string& why) {
  if (auth.munge) {
    return "the runtime at " + address + " refused this user's munge credential (" + why +
           "); a job protected by a token needs DISTRUN_TOKEN set to it";
  }
  std::string line = "the runtime at " + address + " refused the job token; DISTRUN_TOKEN must be the job's";
  if (!auth.munge_problem.empty()) line += " (no munge credential either: " + auth.munge_problem + ")";
  return line;
}

}  // namespace distrun
