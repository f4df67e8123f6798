#include "runtime/auth/client_identity.h"

namespace distrun {

std::string ClientIdentityPayload(int port) { return "distrun-client/1 port=" + std::to_string(port); }

std::string CheckClientCredential(const MungeDecoded& decoded, const AdmissionPolicy& policy) {
  if (decoded.uid != policy.uid) {
    return "the munge credential is uid " + std::to_string(decoded.uid) + "'s, not the job's user (uid " +
           std::to_string(policy.uid) + ")";
  }
  if (decoded.payload != ClientIdentityPayload(policy.port)) {
    return "the munge credential was not made for a command to this runtime (port " +
           std::to_string(policy.port) + ")";
  }
  return {};
}

}  // namespace distrun
