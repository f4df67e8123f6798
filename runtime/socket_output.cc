#include "runtime/socket_output.h"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>

namespace distrun {

bool WriteQueued(int epoll_fd, int fd, SocketOutput* output) {
  std::string& out = output->out;
  while (output->sent < out.size()) {
    const ssize_t n = ::send(fd, out.data() + output->sent, out.size() - output->sent, MSG_NOSIGNAL);
    if (n > 0) {
      output->sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return false;
  }
  const bool pending = output->sent < out.size();
  if (!pending) {
    out.clear();
    output->sent = 0;
  }
  if (pending != output->want_write) {
    output->want_write = pending;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET | (pending ? EPOLLOUT : 0u);
    ev.data.fd = fd;
    ::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, fd, &ev);
  }
  return true;
}

}  // namespace distrun
