#include "detect/detector_util.h"

#include <cstdio>

#include "detect/errors.h"
#include "detect/parse.h"

namespace distrun {

std::vector<std::string> AbsentVariables(const Environment& env,
                                         std::initializer_list<std::string_view> names) {
  std::vector<std::string> absent;
  for (std::string_view name : names) {
    if (!env.Has(name)) absent.emplace_back(name);
  }
  return absent;
}

std::string ShownValue(std::string_view value) {
  constexpr size_t kShownChars = 200;  // node lists can be long; an error stays one readable line
  std::string out;
  for (size_t i = 0; i < value.size() && i < kShownChars; ++i) {
    unsigned char c = static_cast<unsigned char>(value[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (value.size() > kShownChars) out += "...";
  return out;
}

void ThrowBadVariable(std::string_view name, std::string_view value, std::string_view problem,
                      std::string_view fix) {
  throw UsageError(std::string(name) + "='" + ShownValue(value) + "' " + std::string(problem) + "; " +
                   std::string(fix));
}

long long ParseJobNumber(std::string_view name, std::string_view value) {
  bool digits = !value.empty() && value.size() <= 10 && value.find_first_not_of("0123456789") == value.npos;
  long long number = 0;
  // Only digits, at most 10 of them, are accumulated: anything else could overflow before the check.
  if (digits) {
    for (char c : value) number = number * 10 + (c - '0');
  }
  if (!digits || number > 4294967295LL) {
    ThrowBadVariable(name, value, "is not a job or step number",
                     "it must be a decimal number below 2^32 as the launcher sets it; unset it if it was "
                     "copied from another job");
  }
  return number;
}

void RequirePositive(std::string_view name, int count) {
  if (count < 1) {
    throw UsageError(
        std::string(name) + "=" + std::to_string(count) +
        " is not a valid count; a job has at least 1, so the launcher's variables are inconsistent");
  }
}

}  // namespace distrun
