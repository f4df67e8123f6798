#include "sim_agents.h"

#include <arpa/inet.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "proc_stats.h"

namespace distrun::bench {

std::string ErrnoText(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

sockaddr_in ParseIpv4(const std::string& address) {
  const size_t colon = address.rfind(':');
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  if (colon == std::string::npos ||
      ::inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr) != 1) {
    throw std::invalid_argument("the simulated agents need an IPv4 address:port, not '" + address + "'");
  }
  sa.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  return sa;
}

bool ConnectSpread(int fd, const sockaddr_in& coordinator, size_t index) {
  constexpr uint32_t kSources = 8;  // 127.0.0.2 to 127.0.0.9
  if ((ntohl(coordinator.sin_addr.s_addr) >> 24) == 127) {
    int one = 1;
    // The port is chosen at connect, for the whole 4-tuple, not at bind for the address alone.
    ::setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    sockaddr_in source{};
    source.sin_family = AF_INET;
    source.sin_addr.s_addr = htonl((127u << 24) + 2 + static_cast<uint32_t>(index % kSources));
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&source), sizeof source) != 0) return false;
  }
  return ::connect(fd, reinterpret_cast<const sockaddr*>(&coordinator), sizeof coordinator) == 0 ||
         errno == EINPROGRESS;
}

void AgentProgress::Count(int AgentProgress::*counter, double AgentProgress::*last_at, int total,
                          double start) {
  std::lock_guard lock(mu);
  if (++(this->*counter) == total) {
    this->*last_at = MonotonicSeconds() - start;
    cv.notify_all();
  }
}

void AgentProgress::Finish(int total) {
  std::lock_guard lock(mu);
  if (++finished == total) cv.notify_all();
}

void AgentProgress::Fail(int rank, const std::string& why) {
  std::lock_guard lock(mu);
  if (failed++ == 0) first_error = "node " + std::to_string(rank) + ": " + why;
  cv.notify_all();
}

bool AgentProgress::WaitPassed(int total, double timeout_s) {
  std::unique_lock lock(mu);
  cv.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return passed == total || failed > 0; });
  return passed == total;
}

bool AgentProgress::WaitFinished(int total, double timeout_s) {
  std::unique_lock lock(mu);
  return cv.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return finished == total; });
}

SimLoopFds::SimLoopFds() {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  timer_fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0 || timer_fd_ < 0 || !Watch(wake_fd_, EPOLLIN, kWakeKey) ||
      !Watch(timer_fd_, EPOLLIN, kTimerKey)) {
    const std::string why = std::strerror(errno);
    Close();
    throw std::runtime_error("cannot set up an epoll loop for simulated agents: " + why);
  }
}

SimLoopFds::~SimLoopFds() { Close(); }

void SimLoopFds::Close() {
  for (int* fd : {&timer_fd_, &wake_fd_, &epoll_fd_}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

bool SimLoopFds::Watch(int fd, uint32_t events, uint64_t key) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = key;
  return ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) == 0;
}

void SimLoopFds::Wake() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void SimLoopFds::DrainWake() {
  uint64_t count = 0;
  [[maybe_unused]] ssize_t n = ::read(wake_fd_, &count, sizeof count);
}

void SimLoopFds::SetHeartbeatInterval(int interval_ms) {
  const int64_t step_ns = int64_t{interval_ms} * 1'000'000 / kHeartbeatSlots;
  itimerspec spec{};
  spec.it_interval = {static_cast<time_t>(step_ns / 1'000'000'000),
                      static_cast<long>(step_ns % 1'000'000'000)};
  spec.it_value = spec.it_interval;  // zero disarms
  ::timerfd_settime(timer_fd_, 0, &spec, nullptr);
}

uint64_t SimLoopFds::TakeSlots() {
  uint64_t expirations = 0;
  if (::read(timer_fd_, &expirations, sizeof expirations) != sizeof expirations) return 0;
  return std::min<uint64_t>(expirations, kHeartbeatSlots);
}

void SimAgents::Start() {
  control_.start = MonotonicSeconds();
  control_.started = true;
  if (options_.heartbeat_ms > 0) {
    control_.heartbeats = true;
    for (auto& loop : loops_) loop->SetHeartbeatInterval(options_.heartbeat_ms);
  }
  for (auto& loop : loops_) loop->Wake();
}

void SimAgents::Drop(int rank) {
  control_.dropped_at = 0;
  control_.drop_rank = rank;
  for (auto& loop : loops_) loop->Wake();
}

void AgentProgress::ExpectRejoin(int round, int total) {
  std::lock_guard lock(mu);
  rejoin_round = round;
  rejoin_total = total;
  rejoined = 0;
  rejoined_at = 0;
}

void AgentProgress::CountRejoin(int round) {
  std::lock_guard lock(mu);
  if (round != rejoin_round) return;
  if (++rejoined == rejoin_total) {
    rejoined_at = MonotonicSeconds();
    cv.notify_all();
  }
}

bool AgentProgress::WaitRejoined(double timeout_s) {
  std::unique_lock lock(mu);
  return cv.wait_for(lock, std::chrono::duration<double>(timeout_s), [this] {
    return rejoined == rejoin_total || failed > 0;
  }) && failed == 0;
}

void SimAgents::StopHeartbeats() {
  control_.heartbeats = false;
  for (auto& loop : loops_) loop->SetHeartbeatInterval(0);
}

void SimAgents::StopLoops() {
  control_.stopping = true;
  loops_.clear();
}

}  // namespace distrun::bench
