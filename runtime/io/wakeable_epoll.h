#pragma once
// An epoll set with an eventfd that wakes its waiter, as the port's event loops use it
// (agent_channel_server.cc, torch_store_loops.cc). Owns both descriptors.

#include <sys/epoll.h>

#include <cstdint>
#include <string>
#include <vector>

namespace distrun {

class WakeableEpoll {
 public:
  // `what` names the owner in the error thrown when the descriptors cannot be made.
  explicit WakeableEpoll(const std::string& what);
  ~WakeableEpoll();
  WakeableEpoll(const WakeableEpoll&) = delete;
  WakeableEpoll& operator=(const WakeableEpoll&) = delete;

  int fd() const { return epoll_fd_; }
  void Watch(int fd, uint32_t events) const;
  void Forget(int fd) const { ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr); }
  // Any thread: the next (or current) Wait returns.
  void Wake() const;

  // Waits up to `timeout_ms` and calls on_ready(fd, events) for each ready descriptor; a wake-up is consumed
  // here. `events` is the buffer (its size: the most reported at once).
  template <typename OnReady>
  void Wait(std::vector<epoll_event>* events, int timeout_ms, const OnReady& on_ready) const {
    const int n = ::epoll_wait(epoll_fd_, events->data(), static_cast<int>(events->size()), timeout_ms);
    for (int i = 0; i < n; ++i) {
      const epoll_event& e = (*events)[static_cast<size_t>(i)];
      if (e.data.fd == wake_fd_) {
        DrainWake();
      } else {
        on_ready(e.data.fd, e.events);
      }
    }
  }

 private:
  void DrainWake() const;

  int epoll_fd_ = -1;
  int wake_fd_ = -1;
};

}  // namespace distrun
