#include "detect/parse.h"

#include <charconv>
#include <cstdlib>
#include <limits>

#include "detect/errors.h"

namespace distrun {
namespace {

std::string Quote(std::string_view value) { return "'" + std::string(value) + "'"; }

}  // namespace

int ParseCount(std::string_view what, std::string_view value) {
  long long parsed = 0;
  const char* first = value.data();
  const char* last = value.data() + value.size();
  bool digits_only = !value.empty() && value.find_first_not_of("0123456789") == std::string_view::npos;
  auto [ptr, ec] = std::from_chars(first, last, parsed);
  if (!digits_only || ec != std::errc() || ptr != last || parsed > std::numeric_limits<int>::max()) {
    throw UsageError(std::string(what) + "=" + Quote(value) +
                     " is not a non-negative integer; set it to a decimal number such as 0 or 4");
  }
  return static_cast<int>(parsed);
}

int ParsePort(std::string_view what, std::string_view value, PortZero zero) {
  bool digits_only =
      !value.empty() && value.size() <= 5 && value.find_first_not_of("0123456789") == std::string_view::npos;
  const int least = zero == PortZero::kAllowed ? 0 : 1;
  int port = digits_only ? ParseCount(what, value) : -1;
  if (port < least || port > 65535) {
    throw UsageError(std::string(what) + "=" + Quote(value) + " is not a valid port; use a number from " +
                     std::to_string(least) + " to 65535");
  }
  return port;
}

int RequireInt(const Environment& env, std::string_view name) {
  const std::string* value = env.Get(name);
  if (value == nullptr) throw UsageError(std::string(name) + " is not set; the launcher should set it");
  return ParseCount(name, *value);
}

std::optional<int> OptionalInt(const Environment& env, std::string_view name) {
  const std::string* value = env.Get(name);
  if (value == nullptr) return std::nullopt;
  return ParseCount(name, *value);
}

std::vector<std::string> Split(std::string_view s, char sep) {
  std::vector<std::string> fields;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    fields.emplace_back(s.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return fields;
}

std::string_view Trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

HostPort ParseHostPort(std::string_view what, std::string_view value, PortZero zero) {
  auto bad = [&](std::string_view why) {
    return UsageError(std::string(what) + "=" + Quote(value) + " " + std::string(why) +
                      "; use host, host:port or [ipv6]:port");
  };
  if (value.empty()) throw bad("is empty");
  HostPort out;
  std::string_view rest;
  if (value.front() == '[') {
    size_t close = value.find(']');
    if (close == std::string_view::npos || close == 1) throw bad("has an unclosed or empty IPv6 bracket");
    out.host = std::string(value.substr(1, close - 1));
    rest = value.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') throw bad("has text after the IPv6 bracket");
  } else {
    size_t colon = value.find(':');
    if (colon != std::string_view::npos && value.find(':', colon + 1) != std::string_view::npos) {
      throw bad("looks like an IPv6 address without brackets");
    }
    out.host = std::string(value.substr(0, colon));
    if (colon != std::string_view::npos) rest = value.substr(colon);
  }
  if (out.host.empty()) throw bad("has no host");
  if (out.host.find_first_of(" \t\r\n/") != std::string::npos) throw bad("has a space or '/' in the host");
  if (!rest.empty()) out.port = ParsePort(what, rest.substr(1), zero);
  return out;
}

std::string FormatHostPort(std::string_view host, int port) {
  bool v6 = host.find(':') != std::string_view::npos;
  return (v6 ? "[" + std::string(host) + "]" : std::string(host)) + ":" + std::to_string(port);
}

void RequireBelow(std::string_view id_name, int id, std::string_view count_name, int count) {
  if (id >= count) {
    throw UsageError(std::string(id_name) + "=" + std::to_string(id) + " is not below " +
                     std::string(count_name) + "=" + std::to_string(count) +
                     "; ids run from 0 to count-1, so the launcher's variables are inconsistent");
  }
}

double ParseSeconds(std::string_view what, std::string_view value) {
  const char* expected = "use seconds (0.5, 30) or a number with s, m or h (90s, 10m, 2h)";
  auto bad = [&](const char* why) {
    throw UsageError(std::string(what) + "=" + Quote(value) + " is not valid; " + why);
  };
  std::string_view t = Trim(value);
  double unit = 1;
  if (!t.empty() && (t.back() == 's' || t.back() == 'm' || t.back() == 'h')) {
    unit = t.back() == 'h' ? 3600 : t.back() == 'm' ? 60 : 1;
    t.remove_suffix(1);
  }
  if (t.empty() || t.find_first_not_of("0123456789.") != std::string_view::npos) bad(expected);
  // strtod, not std::from_chars: libstdc++'s floating-point from_chars alone would map libm into every
  // distrun (its rounding-mode calls). distrun never sets a locale, so the decimal point is '.'.
  const std::string digits(t);
  char* end = nullptr;
  double n = std::strtod(digits.c_str(), &end);
  if (end != digits.c_str() + digits.size()) bad(expected);
  n *= unit;
  if (!(n <= 1e9)) bad("use at most 1e9 seconds");
  return n;
}

}  // namespace distrun
