#include "launcher/remote/local_host.h"

#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>
#include <memory>

namespace distrun {
namespace {

bool SameAddress(const sockaddr* a, const sockaddr* b) {
  if (a == nullptr || b == nullptr || a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  }
  if (a->sa_family == AF_INET6) {
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
  }
  return false;
}

}  // namespace

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "localhost.localdomain" || host == "::1" || host.starts_with("127.");
}

bool IsThisMachine(const std::string& host, const std::string& hostname) {
  if (IsLoopback(host)) return true;
  const std::string short_name = hostname.substr(0, hostname.find('.'));
  if (!hostname.empty() && (host == hostname || host == short_name)) return true;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return false;
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> resolved(found, &::freeaddrinfo);
  ifaddrs* interfaces = nullptr;
  if (::getifaddrs(&interfaces) != 0) return false;
  std::unique_ptr<ifaddrs, decltype(&::freeifaddrs)> own(interfaces, &::freeifaddrs);
  for (const addrinfo* r = found; r != nullptr; r = r->ai_next) {
    if (r->ai_addr == nullptr) continue;
    if (r->ai_family == AF_INET &&
        (ntohl(reinterpret_cast<const sockaddr_in*>(r->ai_addr)->sin_addr.s_addr) >> 24) == 127) {
      return true;
    }
    for (const ifaddrs* i = interfaces; i != nullptr; i = i->ifa_next) {
      if (SameAddress(r->ai_addr, i->ifa_addr)) return true;
    }
  }
  return false;
}

}  // namespace distrun
