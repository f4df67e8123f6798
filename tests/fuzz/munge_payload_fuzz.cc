// libFuzzer target for the payload of a decoded munge credential (runtime/auth/agent_identity.h,
// client_identity.h): what an agent's hello or a user's command carries, made by whoever could reach munged.
// ParseAgentIdentity's nullopt and the checks' refusals are the only failures. An identity that parses must
// make the same payload again, and a check must admit only a payload made for its policy; any exception, a
// crash, a leak or a sanitizer report is a finding.
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/auth/agent_identity.h"
#include "runtime/auth/client_identity.h"
#include "runtime/auth/munge_credentials.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace distrun;
  MungeDecoded decoded;
  decoded.payload.assign(reinterpret_cast<const char*>(data), size);
  decoded.uid = 1000;
  decoded.gid = 1000;

  const std::optional<AgentIdentity> identity = ParseAgentIdentity(decoded.payload);
  if (identity) {
    const std::optional<AgentIdentity> again = ParseAgentIdentity(AgentIdentityPayload(*identity));
    if (!again || again->port != identity->port || again->node_rank != identity->node_rank ||
        again->run_id != identity->run_id) {
      __builtin_trap();
    }
  }

  // Node 0's policies: the payload's own port (an agent's, or a command's) with and without a run, another
  // port, and another user.
  int port = identity ? identity->port : 29400;
  constexpr std::string_view kClient = "distrun-client/1 port=";
  if (!identity && decoded.payload.starts_with(kClient)) {
    const char* end = decoded.payload.data() + decoded.payload.size();
    (void)std::from_chars(decoded.payload.data() + kClient.size(), end, port);
  }
  const int other = port == 29400 ? 29401 : 29400;
  for (const AdmissionPolicy& policy : {AdmissionPolicy{1000, port, "run-a"}, AdmissionPolicy{1000, port, ""},
                                        AdmissionPolicy{1000, other, ""}, AdmissionPolicy{0, port, ""}}) {
    const AdmissionVerdict verdict = CheckAgentCredential(decoded, policy);
    if (verdict.refusal.empty()) {
      if (!identity || decoded.uid != policy.uid || identity->port != policy.port ||
          verdict.node_rank != identity->node_rank) {
        __builtin_trap();
      }
      if (!identity->run_id.empty() && !policy.run_id.empty() && identity->run_id != policy.run_id) {
        __builtin_trap();
      }
    }
    const std::string refusal = CheckClientCredential(decoded, policy);
    if (refusal.empty() &&
        (decoded.uid != policy.uid || decoded.payload != ClientIdentityPayload(policy.port))) {
      __builtin_trap();
    }
  }
  return 0;
}
