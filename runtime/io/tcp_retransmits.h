#pragma once
// How often the kernel has had to send a TCP connection's segments again: node 0's evidence that the link
// to an agent drops packets (DESIGN §4.5, gray failures). A connection whose heartbeats still arrive, but
// only through retransmissions, is a bad link rather than a dead node; when most of the job's connections
// are like that, the bad link is node 0's own.

#include <cstdint>
#include <optional>

namespace distrun {

// The segments retransmitted over the connection's life (tcp_info's tcpi_total_retrans), or nullopt when
// `fd` is not a TCP socket.
std::optional<uint32_t> TcpRetransmits(int fd);

// Counts the retransmissions of one connection between looks.
class RetransmitCounter {
 public:
  // The segments retransmitted since the previous look (the connection's start at the first; 0 when `fd` is
  // not TCP).
  uint32_t Since(int fd);

 private:
  std::optional<uint32_t> last_;
};

}  // namespace distrun
