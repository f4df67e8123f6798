#pragma once
// Small pieces several cluster detectors share: which variables are absent, one-line errors that name a
// variable, its value and the fix, and strict parsing of job ids and device lists.

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "detect/environment.h"

namespace distrun {

// The names in `names` that `env` does not set, in the given order.
std::vector<std::string> AbsentVariables(const Environment& env,
                                         std::initializer_list<std::string_view> names);

// `value` for a one-line message: control characters escaped, long values cut.
std::string ShownValue(std::string_view value);

// Throws UsageError "NAME='value' <problem>; <fix>".
[[noreturn]] void ThrowBadVariable(std::string_view name, std::string_view value, std::string_view problem,
                                   std::string_view fix);

// A non-negative decimal job or step number up to 2^32-1 (Slurm's federated job ids exceed an int).
long long ParseJobNumber(std::string_view name, std::string_view value);

// Checks that `count` is at least 1, naming the variable.
void RequirePositive(std::string_view name, int count);

}  // namespace distrun
