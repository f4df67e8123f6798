#pragma once
// A loopback TCP proxy for the runtime's unit tests: each connection reaches the server only after a delay
// (a coordinator too busy to answer at once), and the proxy's end closes every connection at once, as the
// death of the host behind it would (no answer to anything in flight).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

namespace distrun::testing {

// Forwards loopback connections to a server, each only after `delay`: a coordinator too busy with other
// agents' handshakes to answer a new connection at once.
class SlowProxy {
 public:
  SlowProxy(int target_port, std::chrono::milliseconds delay) : target_port_(target_port), delay_(delay) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in addr = Loopback(0);
    socklen_t len = sizeof addr;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listen_fd_, 16) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("proxy cannot listen");
    }
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~SlowProxy() {
    stop_ = true;
    acceptor_.join();
    for (auto& t : pumps_) t.join();
    ::close(listen_fd_);
  }
  int port() const { return port_; }
  int connections() const { return connections_.load(); }

 private:
  static sockaddr_in Loopback(int port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return addr;
  }
  void Accept() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      ++connections_;
      pumps_.emplace_back([this, fd] { Pump(fd); });
    }
  }
  void Pump(int client) {
    auto until = std::chrono::steady_clock::now() + delay_;
    while (!stop_ && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr = Loopback(target_port_);
    if (::connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      char buf[16384];
      while (!stop_) {
        pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
        if (::poll(p, 2, 20) <= 0) continue;
        int from = (p[0].revents != 0) ? client : server;
        ssize_t n = ::read(from, buf, sizeof buf);
        if (n <= 0 || ::write(from == client ? server : client, buf, static_cast<size_t>(n)) != n) break;
      }
    }
    ::close(server);
    ::close(client);
  }

  int listen_fd_ = -1;
  int port_ = 0;
  int target_port_;
  std::chrono::milliseconds delay_;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::thread acceptor_;
  std::vector<std::thread> pumps_;  // only the acceptor adds to it, and it is joined first
};

}  // namespace distrun::testing
