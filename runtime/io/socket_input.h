#pragma once
// A non-blocking socket's input and its orderly end, as the port's loops handle them
// (agent_channel_server.cc, torch_store_loops.cc).

#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>
#include <vector>

namespace distrun {

// Reads `fd` into `buffer` until it would block, handing each chunk read to on_bytes(std::string_view).
// False: the peer closed the connection, or it broke.
template <typename OnBytes>
bool ReadAvailable(int fd, std::vector<char>* buffer, const OnBytes& on_bytes) {
  while (true) {
    const ssize_t n = ::read(fd, buffer->data(), buffer->size());
    if (n > 0) {
      on_bytes(std::string_view(buffer->data(), static_cast<size_t>(n)));
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
