#include "runtime/token_check.h"

namespace distrun {

bool SameToken(const std::string& expected, std::string_view given) {
  unsigned char diff = expected.size() == given.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i) {
    diff |= static_cast<unsigned char>(given[i] ^ expected[i % (expected.empty() ? 1 : expected.size())]);
  }
  return diff == 0 && !expected.empty();
}

}  // namespace distrun
