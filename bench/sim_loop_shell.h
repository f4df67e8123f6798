#pragma once
// The shell every simulation loop shares (framed_agents.cc, h2_agents.cc, torch_clients.cc): one thread
// over a SimLoopFds and the connections placed on it. The first wake-up after the run started opens them
// all; a connection's events go to the simulation (EPOLLOUT flushes, input or a hang-up is received); the
// heartbeat timer's slots go to it while heartbeats are on; after each round of events every connection
// written to is flushed once.
//
// Derived (CRTP) places connections_ and calls StartThread() at the end of its constructor, and
// StopThread() first in its destructor; it provides Open(Connection&), Receive(Connection&, bool hung_up)
// and End(Connection&, const std::string& why), and may provide HeartbeatSlot() and Woken() (after each
// wake-up). Connection has fd, dirty, out and out_sent.

#include <sys/epoll.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "runtime/io/socket_output.h"
#include "sim_agents.h"

namespace distrun::bench {

template <typename Derived, typename Connection>
class SimLoopShell : public SimLoop {
 public:
  void Wake() override { fds_.Wake(); }
  void SetHeartbeatInterval(int interval_ms) override { fds_.SetHeartbeatInterval(interval_ms); }

 protected:
  explicit SimLoopShell(SimControl& control) : control_(control) {}

  void StartThread() {
    thread_ = std::thread([this] { Run(); });
  }
  // Wakes the thread, joins it and closes the sockets: before Derived's members go.
  void StopThread() {
    fds_.Wake();
    thread_.join();
    for (Connection& c : connections_) {
      if (c.fd >= 0) ::close(c.fd);
    }
  }

  void MarkDirty(Connection& c) {
    if (c.dirty) return;
    c.dirty = true;
    dirty_.push_back(&c);
  }

  // What stays unsent waits for EPOLLOUT (also when a connect is still on its way).
  void Flush(Connection& c) {
    if (c.fd < 0) {
      c.out.clear();
      c.out_sent = 0;
    } else if (!SendPending(c.fd, &c.out, &c.out_sent)) {
      self().End(c, ErrnoText("write"));
    }
  }

  // Defaults of the hooks Derived may hide.
  void HeartbeatSlot() {}
  void Woken() {}

  SimLoopFds fds_;
  std::vector<Connection> connections_;

 private:
  Derived& self() { return static_cast<Derived&>(*this); }

  void Run() {
    std::array<epoll_event, 256> events;
    while (!control_.stopping.load()) {
      const int n = ::epoll_wait(fds_.epoll_fd(), events.data(), static_cast<int>(events.size()), -1);
      if (n < 0 && errno != EINTR) break;
      for (int i = 0; i < n; ++i) Dispatch(events[static_cast<size_t>(i)]);
      // One write per connection per round of events, however many messages were queued on it.
      for (Connection* c : dirty_) {
        c->dirty = false;
        Flush(*c);
      }
      dirty_.clear();
    }
  }

  void Dispatch(const epoll_event& ev) {
    if (ev.data.u64 == SimLoopFds::kWakeKey) {
      fds_.DrainWake();
      if (control_.started.load() && !opened_) {
        opened_ = true;
        for (Connection& c : connections_) self().Open(c);
      }
      self().Woken();
      return;
    }
    if (ev.data.u64 == SimLoopFds::kTimerKey) {
      const uint64_t slots = fds_.TakeSlots();
      if (!control_.heartbeats.load()) return;
      for (uint64_t i = 0; i < slots; ++i) self().HeartbeatSlot();
      return;
    }
    Connection& c = connections_[ev.data.u64 - SimLoopFds::kFirstKey];
    if (ev.events & EPOLLOUT) Flush(c);  // a connect completed, or the socket took up what it had refused
    if (ev.events & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP)) {
      self().Receive(c, (ev.events & (EPOLLERR | EPOLLHUP | EPOLLRDHUP)) != 0);
    }
  }

  SimControl& control_;
  std::vector<Connection*> dirty_;
  bool opened_ = false;
  std::thread thread_;
};

}  // namespace distrun::bench
