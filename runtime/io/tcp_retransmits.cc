#include "runtime/io/tcp_retransmits.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace distrun {

std::optional<uint32_t> TcpRetransmits(int fd) {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0 ||
      len < offsetof(tcp_info, tcpi_total_retrans) + sizeof info.tcpi_total_retrans) {
    return std::nullopt;
  }
  return info.tcpi_total_retrans;
}

uint32_t RetransmitCounter::Since(int fd) {
  std::optional<uint32_t> now = TcpRetransmits(fd);
  if (!now) return 0;
  const uint32_t since = *now - last_.value_or(0);  // the kernel's counter only grows
  last_ = now;
  return since;
}

}  // namespace distrun
