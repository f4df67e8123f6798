#include "runtime/auth/token_check.h"

namespace distrun {

std::string TokenProblem(std::string_view token) {
  if (token.empty()) return "is empty";
  if (token.size() > kMaxTokenBytes) {
    return "has " + std::to_string(token.size()) + " characters, more than " + std::to_string(kMaxTokenBytes);
  }
  for (char c : token) {
    if (c <= ' ' || c > '~') return "may hold only printable ASCII characters without spaces";
  }
  return "";
}

bool SameToken(const std::string& expected, std::string_view given) {
  unsigned char diff = expected.size() == given.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i) {
    diff |= static_cast<unsigned char>(given[i] ^ expected[i % (expected.empty() ? 1 : expected.size())]);
  }
  return diff == 0 && !expected.empty();
}

}  // namespace distrun
