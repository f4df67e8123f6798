#include "runtime/auth/agent_identity.h"

#include <charconv>
#include <vector>

namespace distrun {
namespace {

constexpr std::string_view kPrefix = "distrun-agent/1";

bool ParseInt(std::string_view text, int* value) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::string AgentIdentityPayload(const AgentIdentity& identity) {
  return std::string(kPrefix) + " port=" + std::to_string(identity.port) +
         " node=" + std::to_string(identity.node_rank) + " run=" + identity.run_id;
}

std::optional<AgentIdentity> ParseAgentIdentity(std::string_view payload) {
  std::vector<std::string_view> words;
  for (size_t at = 0; at <= payload.size();) {
    size_t space = payload.find(' ', at);
    if (space == std::string_view::npos) space = payload.size();
    words.push_back(payload.substr(at, space - at));
    at = space + 1;
  }
  if (words.size() != 4 || words[0] != kPrefix || !words[1].starts_with("port=") ||
      !words[2].starts_with("node=") || !words[3].starts_with("run=")) {
    return std::nullopt;
  }
  AgentIdentity identity;
  if (!ParseInt(words[1].substr(5), &identity.port) || !ParseInt(words[2].substr(5), &identity.node_rank)) {
    return std::nullopt;
  }
  identity.run_id = std::string(words[3].substr(4));
  return identity;
}

AdmissionVerdict CheckAgentCredential(const MungeDecoded& decoded, const AdmissionPolicy& policy) {
  AdmissionVerdict verdict;
  if (decoded.uid != policy.uid) {
    verdict.refusal = "its munge credential is uid " + std::to_string(decoded.uid) +
                      "'s, not the job's user (uid " + std::to_string(policy.uid) + ")";
    return verdict;
  }
  std::optional<AgentIdentity> identity = ParseAgentIdentity(decoded.payload);
  if (!identity) {
    verdict.refusal = "its munge credential was not made for a distrun agent";
    return verdict;
  }
  if (identity->port != policy.port) {
    verdict.refusal = "its munge credential was made for a coordinator on port " +
                      std::to_string(identity->port) + ", not this one (" + std::to_string(policy.port) + ")";
    return verdict;
  }
  if (!identity->run_id.empty() && !policy.run_id.empty() && identity->run_id != policy.run_id) {
    verdict.refusal = "its munge credential was made for run " + identity->run_id + ", not this job's (" +
                      policy.run_id + ")";
    return verdict;
  }
  verdict.node_rank = identity->node_rank;
  return verdict;
}

}  // namespace distrun
