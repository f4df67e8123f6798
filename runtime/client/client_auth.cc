#include "runtime/client/client_auth.h"

#include <memory>
#include <optional>
#include <utility>

#include "runtime/auth/client_identity.h"
#include "runtime/auth/munge_credentials.h"

namespace distrun {
namespace {

// The port of "host:port" or "[v6]:port"; 0 when it has none.
int AddressPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || address.find(']', colon) != std::string::npos) return 0;
  int port = 0;
  for (char c : address.substr(colon + 1)) {
    if (c < '0' || c > '9' || port > 65535) return 0;
    port = port * 10 + (c - '0');
  }
  return port;
}

}  // namespace

ClientAuth SetClientAuth(const std::string& token, const MungeSocket& socket, GrpcClientConfig* config) {
  ClientAuth auth;
  auth.socket = socket;
  config->token = token;
  if (!config->token.empty()) return auth;
  std::string why;
  std::shared_ptr<const MungeCredentials> munge = MungeCredentials::Load(socket.path, &why);
  const std::string payload = ClientIdentityPayload(AddressPort(config->address));
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

std::string RefusalMessage(const ClientAuth& auth, const std::string& address, const std::string& why) {
  if (auth.munge) {
    return "the runtime at " + address + " refused this user's munge credential (" + why +
           "); a job protected by a token needs DISTRUN_TOKEN set to it";
  }
  std::string line = "the runtime at " + address + " refused the job token; DISTRUN_TOKEN must be the job's";
  if (!auth.munge_problem.empty()) line += " (no munge credential either: " + auth.munge_problem + ")";
  return line;
}

}  // namespace distrun
