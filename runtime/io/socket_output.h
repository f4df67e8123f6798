#pragma once
// A non-blocking socket's queued output, as the port's loops write it (agent_channel_server.cc,
// torch_store_loops.cc): written until done or the socket is full, and EPOLLOUT watched only meanwhile.

#include <cstddef>
#include <string>

namespace distrun {

struct SocketOutput {
  std::string out;
  size_t sent = 0;          // of `out`
  bool want_write = false;  // EPOLLOUT is watched
};

// Sends out[*sent..] to the non-blocking `fd` until all of it went (then empties `out` and zeroes *sent) or
// the socket is full. False: the socket is broken, errno says how.
bool SendPending(int fd, std::string* out, size_t* sent);

// Writes what `output` holds to `fd` until it is all sent (then empties it) or the socket is full; watches
// for room on the edge-triggered `epoll_fd` (EPOLLIN | EPOLLRDHUP with it) exactly while something is left.
// False: the socket is broken (its read side sees it too).
bool WriteQueued(int epoll_fd, int fd, SocketOutput* output);

}  // namespace distrun
