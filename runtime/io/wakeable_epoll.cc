#include "runtime/io/wakeable_epoll.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace distrun {

WakeableEpoll::WakeableEpoll(const std::string& what) {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0) {
    const std::string why = std::strerror(errno);
    if (epoll_fd_ >= 0) ::close(epoll_fd_);
    if (wake_fd_ >= 0) ::close(wake_fd_);
    throw std::runtime_error(what + ": " + why);
  }
  Watch(wake_fd_, EPOLLIN);
}

WakeableEpoll::~WakeableEpoll() {
  ::close(epoll_fd_);
  ::close(wake_fd_);
}

void WakeableEpoll::Watch(int fd, uint32_t events) const {
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
}

void WakeableEpoll::Wake() const {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void WakeableEpoll::DrainWake() const {
  uint64_t count = 0;
  [[maybe_unused]] ssize_t n = ::read(wake_fd_, &count, sizeof count);
}

}  // namespace distrun
