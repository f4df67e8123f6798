#include "runtime/transport/channel_target.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "detect/errors.h"
#include "runtime/transport/grpc_server.h"

namespace distrun {
namespace {

std::string Numeric(const sockaddr* sa, socklen_t len) {
  char host[NI_MAXHOST];
  if (::getnameinfo(sa, len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0) return {};
  return host;
}

}  // namespace

std::string ChannelTarget(const std::string& address) {
  std::string host, port;
  try {
    auto [h, p] = SplitHostPort(address, "coordinator address");
    host = h;
    port = std::to_string(p);
  } catch (const UsageError&) {
    return address;  // not host:port: gRPC's own target syntax, or an error gRPC reports
  }

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr) {
    return "dns:///" + address;
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> list(found, ::freeaddrinfo);
  // The family getaddrinfo put first (its RFC 6724 order), with every address of that family: gRPC tries
  // them in turn.
  const int family = found->ai_family;
  std::vector<std::string> addresses;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family != family) continue;
    std::string numeric = Numeric(a->ai_addr, a->ai_addrlen);
    if (numeric.empty()) continue;
    std::string entry = family == AF_INET6 ? "[" + numeric + "]:" + port : numeric + ":" + port;
    if (std::find(addresses.begin(), addresses.end(), entry) == addresses.end()) addresses.push_back(entry);
  }
  if (addresses.empty() || (family != AF_INET && family != AF_INET6)) return "dns:///" + address;
  std::string target = family == AF_INET ? "ipv4:" : "ipv6:";
  for (size_t i = 0; i < addresses.size(); ++i) target += (i ? "," : "") + addresses[i];
  return target;
}

}  // namespace distrun
