#pragma once
// Strict parsing of values read from variables. Every failure is a UsageError that names the variable,
// the value and what was expected.

#include <chrono>
#include <cstdio>
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

// Seconds, fractions allowed ("0.5"), with an optional unit: s, m, h ("90s", "2h"), at most 1e9 s. Errors
// name `what`. Every option and variable that holds a duration is read by this one function.
double ParseSeconds(std::string_view what, std::string_view value);
// The inverse, for messages and variables: 30 -> "30s", 0.25 -> "0.25s", 1e9 -> "1000000000s" (never an
// exponent: ParseSeconds reads every result back). Whole microseconds; less is rounded. Inline: the
// coordination service's messages use it, and the workers' static client archive carries no detect objects.
inline std::string FormatSeconds(double seconds) {
  char text[48];
  std::snprintf(text, sizeof text, "%.6f", seconds);
  std::string s(text);
  s.erase(s.find_last_not_of('0') + 1);
  if (s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s + "s";
}
inline std::string FormatSeconds(std::chrono::milliseconds d) {
  return FormatSeconds(static_cast<double>(d.count()) / 1000);
}

// Checks: `id` < `count`, naming both variables.
void RequireBelow(std::string_view id_name, int id, std::string_view count_name, int count);

}  // namespace distrun
