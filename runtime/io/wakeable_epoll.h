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

  // Wait, for a loop whose connections are `conns` (descriptor → shared connection): for each ready one
  // still there, on_writable(conn) when it may be written, then on_readable(conn, events) when it has
  // input, was hung up or failed. The connection is held while both run, which may drop it.
  template <typename Conns, typename OnWritable, typename OnReadable>
  void WaitForConnections(std::vector<epoll_event>* events, int timeout_ms, const Conns& conns,
                          const OnWritable& on_writable, const OnReadable& on_readable) const {
    Wait(events, timeout_ms, [&](int fd, uint32_t ev) {
      auto it = conns.find(fd);
      if (it == conns.end()) return;
      auto conn = it->second;
      if (ev & EPOLLOUT) on_writable(conn);
      if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) on_readable(conn, ev);
    });
  }

 private:
  void DrainWake() const;

  int epoll_fd_ = -1;
  int wake_fd_ = -1;
};

}  // namespace distrun
