#pragma once
// Strict parsing of values read from variables. Every failure is a UsageError that names the variable,
// the value and what was expected.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "detect/environment.h"

namespace distrun {

// A non-negative decimal integer that fits an int ("007" is 7; "", "-1", "1e3", " 3", "3x" are errors).
int ParseCount(std::string_view what, std::string_view value);
// Whether port 0 is a port: it is where a socket is to be bound (the OS picks one), not where one is reached.
enum class PortZero { kRefused, kAllowed };
// The same for a port: 1..65535 (0..65535 with PortZero::kAllowed).
int ParsePort(std::string_view what, std::string_view value, PortZero zero = PortZero::kRefused);

// Reads an integer variable that must be present.
int RequireInt(const Environment& env, std::string_view name);
// Reads an integer variable if it is set.
std::optional<int> OptionalInt(const Environment& env, std::string_view name);

// Splits on `sep`, keeping empty fields.
std::vector<std::string> Split(std::string_view s, char sep);
std::string_view Trim(std::string_view s);

// Host and port of "host:port", "[v6]:port", "host" (port empty). Errors name `what`.
struct HostPort {
  std::string host;
  std::optional<int> port;
};
HostPort ParseHostPort(std::string_view what, std::string_view value, PortZero zero = PortZero::kRefused);
// "host:port", with IPv6 literals in brackets.
std::string FormatHostPort(std::string_view host, int port);

// Checks: `id` < `count`, naming both variables.
void RequireBelow(std::string_view id_name, int id, std::string_view count_name, int count);

}  // namespace distrun
