#include "runtime/io/listening_socket.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace distrun {
namespace {

// Connections waiting to be accepted. The kernel cuts this to net.core.somaxconn (4096 by default), and
// thousands of agents connecting at once overflow it, each dropped connection waiting a second to try
// again: where a large cluster raises that setting, node 0 gets the larger queue (SOMAXCONN would not).
constexpr int kListenBacklog = 65535;

int BoundPort(int fd) {
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) return 0;
  return bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                     : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

}  // namespace

ListeningSocket ListeningSocket::Open(const std::string& host, int port) { return Bind(host, port, true); }

ListeningSocket ListeningSocket::Reserve(const std::string& host, int port) {
  return Bind(host, port, false);
}

ListeningSocket ListeningSocket::Duplicate(int fd) {
  ListeningSocket s;
  s.fd_ = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (s.fd_ < 0) {
    throw std::runtime_error(std::string("the runtime cannot take over its held port: ") +
                             std::strerror(errno));
  }
  s.port_ = BoundPort(s.fd_);
  return s;
}

void ListeningSocket::Listen() {
  if (::listen(fd_, kListenBacklog) != 0) {
    throw std::runtime_error("the runtime cannot listen on port " + std::to_string(port_) + ": " +
                             std::strerror(errno));
  }
}

ListeningSocket ListeningSocket::Bind(const std::string& host, int port, bool listen) {
  const std::string address =
      (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    throw ListenError("the runtime cannot listen on " + address + ": " + ::gai_strerror(rc), 0);
  }
  std::string why = "no address";
  int code = EADDRNOTAVAIL;
  ListeningSocket s;
  for (addrinfo* a = found; a && s.fd_ < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      code = errno;
      why = std::strerror(code);
      continue;
    }
    // SO_REUSEADDR rebinds a port whose last connections linger (TIME_WAIT), but lets another socket bind
    // one that is not listening yet: a reserved port goes without, so that it stays this one's.
    if (listen) {
      int one = 1;
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    }
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || (listen && ::listen(fd, kListenBacklog) != 0)) {
      code = errno;
      why = std::strerror(code);
      ::close(fd);
      continue;
    }
    s.fd_ = fd;
    s.port_ = BoundPort(fd);
  }
  ::freeaddrinfo(found);
  if (s.fd_ < 0) {
    throw ListenError("the runtime cannot listen on " + address + ": " + why +
                          " (address in use or not an address of this host?)",
                      code);
  }
  return s;
}

ListeningSocket::~ListeningSocket() {
  if (fd_ >= 0) ::close(fd_);
}

ListeningSocket::ListeningSocket(ListeningSocket&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), port_(other.port_) {}

ListeningSocket& ListeningSocket::operator=(ListeningSocket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    port_ = other.port_;
  }
  return *this;
}

int ListeningSocket::Release() { return std::exchange(fd_, -1); }

}  // namespace distrun
