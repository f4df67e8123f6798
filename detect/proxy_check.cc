#include "detect/proxy_check.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "detect/parse.h"

namespace distrun {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

}  // namespace

bool NoProxyCovers(std::string_view no_proxy, std::string_view host) {
  std::string h = Lower(host);
  for (const std::string& raw : Split(no_proxy, ',')) {
    std::string entry = Lower(Trim(raw));
    if (entry.empty()) continue;
    if (entry == "*") return true;
    if (entry.front() == '.') entry.erase(0, 1);
    if (h == entry) return true;
    if (h.size() > entry.size() && h.ends_with(entry) && h[h.size() - entry.size() - 1] == '.') return true;
  }
  return false;
}

std::string RedactProxyCredentials(std::string_view url) {
  size_t scheme = url.find("://");
  size_t start = scheme == std::string_view::npos ? 0 : scheme + 3;
  // The last '@': passwords are often written with a raw '@' or '/', and no part of them may show.
  size_t at = url.rfind('@');
  if (at == std::string_view::npos || at < start) return std::string(url);
  return std::string(url.substr(0, start)) + "***" + std::string(url.substr(at));
}

std::vector<std::string> ProxyWarnings(const Environment& env, const std::string& coordinator_host) {
  // gRPC reads grpc_proxy, https_proxy and http_proxy (either case), and no_proxy / no_grpc_proxy.
  static constexpr std::array<std::string_view, 6> kProxyVars = {"grpc_proxy",  "https_proxy", "http_proxy",
                                                                 "HTTPS_PROXY", "HTTP_PROXY",  "all_proxy"};
  std::string no_proxy =
      env.GetOr("no_grpc_proxy", "") + "," + env.GetOr("no_proxy", "") + "," + env.GetOr("NO_PROXY", "");
  if (NoProxyCovers(no_proxy, coordinator_host)) return {};
  for (std::string_view name : kProxyVars) {
    const std::string* value = env.Get(name);
    if (value == nullptr || value->empty()) continue;
    return {std::string(name) + "='" + RedactProxyCredentials(*value) +
            "' is set and no_proxy does not list the coordinator host '" + coordinator_host +
            "': gRPC would send the coordinator's traffic through that proxy; add the host to no_proxy "
            "(export no_proxy=" +
            coordinator_host + ",$no_proxy) or unset " + std::string(name)};
  }
  return {};
}

}  // namespace distrun
