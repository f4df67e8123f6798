#include "runtime/io/socket_output.h"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>

namespace distrun {

bool SendPending(int fd, std::string* out, size_t* sent) {
  while (*sent < out->size()) {
    const ssize_t n = ::send(fd, out->data() + *sent, out->size() - *sent, MSG_NOSIGNAL);
    if (n > 0) {
      *sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;
  }
  out->clear();
  *sent = 0;
  return true;
}

bool WriteQueued(int epoll_fd, int fd, SocketOutput* output) {
  if (!SendPending(fd, &output->out, &output->sent)) return false;
  const bool pending = !output->out.empty();
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
