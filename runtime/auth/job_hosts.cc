#include "runtime/auth/job_hosts.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace distrun {
namespace {

std::string AddressText(const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
    return text;
  }
  if (addr.ss_family != AF_INET6) return {};
  const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
  if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) {
    ::inet_ntop(AF_INET, &a->sin6_addr.s6_addr[12], text, sizeof text);
    return text;
  }
  ::inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
  return text;
}

std::string SocketAddress(int fd, bool peer) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  int rc = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                : ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return rc == 0 ? AddressText(addr) : std::string();
}

}  // namespace

std::string PeerAddress(int fd) { return SocketAddress(fd, true); }

bool PeerIsThisHost(int fd) {
  const std::string peer = PeerAddress(fd);
  if (peer.empty()) return false;
  if (peer == "::1" || peer.starts_with("127.")) return true;
  return peer == SocketAddress(fd, false);
}

void JobHosts::Add(const std::string& address) {
  if (!address.empty()) ++counts_[address];
}

void JobHosts::Remove(const std::string& address) {
  auto it = counts_.find(address);
  if (it != counts_.end() && --it->second == 0) counts_.erase(it);
}

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  // 127.0.0.0/8, written as a dotted quad.
  if (!host.starts_with("127.")) return false;
  int dots = 0;
  for (char c : host) {
    if (c == '.') {
      ++dots;
    } else if (c < '0' || c > '9') {
      return false;
    }
  }
  return dots == 3;
}

}  // namespace distrun
