#pragma once
// A non-blocking socket's input and its orderly end, as the port's loops handle them
// (agent_channel_server.cc, torch_store_loops.cc).

#include <sys/epoll.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string_view>
#include <vector>

namespace distrun {

// Reads what `fd` holds into `buffer`, handing each chunk read to on_bytes(std::string_view). False: the
// peer closed the connection, or it broke.
//
// For an edge-triggered descriptor whose reported `events` say no hang-up, a read that does not fill the
// buffer ends it: the socket was empty then, and bytes that come later raise a new edge, so the read that
// would only say EAGAIN (half of a request-reply connection's reads) is not made. With a hang-up reported
// it reads on to the end, as no further edge will come.
template <typename OnBytes>
bool ReadAvailable(int fd, std::vector<char>* buffer, uint32_t events, const OnBytes& on_bytes) {
  const bool hung_up = (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0;
  while (true) {
    const ssize_t n = ::read(fd, buffer->data(), buffer->size());
    if (n > 0) {
      on_bytes(std::string_view(buffer->data(), static_cast<size_t>(n)));
      if (!hung_up && static_cast<size_t>(n) < buffer->size()) return true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

// Ends this side of `fd` in order and closes it. What the peer sent and nobody read would make close()
// reset the connection, and a reset can discard the last reply before the peer reads it: with `drain`,
// that input is read away (into `buffer`) first.
void CloseInOrder(int fd, std::vector<char>* buffer, bool drain = true);

}  // namespace distrun
