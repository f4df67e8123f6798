#pragma once
// A tiny HTTP/1.1 server for tests: listens on 127.0.0.1 or ::1 on an ephemeral port, answers each
// request from a handler in one background thread, and stops when destroyed. Used to test the real
// HTTP client and the GCE metadata path without leaving the machine.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace distrun::testing {

struct TestHttpRequest {
  std::string method;
  std::string path;
  std::vector<std::pair<std::string, std::string>> headers;

  // Value of a header (case-insensitive name), or nullptr.
  const std::string* Header(std::string_view name) const {
    for (const auto& [n, v] : headers) {
      if (n.size() == name.size() && std::equal(n.begin(), n.end(), name.begin(), [](char a, char b) {
            return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
          })) {
        return &v;
      }
    }
    return nullptr;
  }
};

struct TestHttpReply {
  int status = 200;
  std::string body;
  bool chunked = false;       // send the body with Transfer-Encoding: chunked, in small chunks
  std::string raw;            // when non-empty: sent verbatim, then the connection is closed
  bool never_answer = false;  // accept, read the request, then say nothing until the server stops
};

inline TestHttpReply Reply(int status, std::string body) {
  TestHttpReply r;
  r.status = status;
  r.body = std::move(body);
  return r;
}
inline TestHttpReply ChunkedReply(int status, std::string body) {
  TestHttpReply r = Reply(status, std::move(body));
  r.chunked = true;
  return r;
}
inline TestHttpReply RawReply(std::string raw) {
  TestHttpReply r;
  r.raw = std::move(raw);
  return r;
}
inline TestHttpReply SilentReply() {
  TestHttpReply r;
  r.never_answer = true;
  return r;
}

using TestHttpHandler = std::function<TestHttpReply(const TestHttpRequest&)>;

class TestHttpServer {
 public:
  explicit TestHttpServer(TestHttpHandler handler, std::string address = "127.0.0.1")
      : handler_(std::move(handler)), address_(std::move(address)) {
    if (!Listen() || ::pipe2(wake_, O_CLOEXEC) != 0) {
      Close(listen_fd_);
      return;
    }
    thread_ = std::thread([this] { Run(); });
  }

  TestHttpServer(const TestHttpServer&) = delete;
  TestHttpServer& operator=(const TestHttpServer&) = delete;

  ~TestHttpServer() {
    if (thread_.joinable()) {
      char c = 0;
      ssize_t ignored = ::write(wake_[1], &c, 1);
      (void)ignored;
      thread_.join();
    }
    Close(listen_fd_);
    Close(wake_[0]);
    Close(wake_[1]);
  }

  bool ok() const { return thread_.joinable(); }
  int port() const { return port_; }
  // "127.0.0.1:1234" or "[::1]:1234", as GCE_METADATA_IP accepts it.
  std::string HostPort() const {
    bool v6 = address_.find(':') != std::string::npos;
    return (v6 ? "[" + address_ + "]" : address_) + ":" + std::to_string(port_);
  }
  int requests() const { return requests_.load(); }

 private:
  static void Close(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }

  bool Listen() {
    bool v6 = address_.find(':') != std::string::npos;
    listen_fd_ = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) return false;
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_storage storage{};
    socklen_t len = 0;
    if (v6) {
      auto* a = reinterpret_cast<sockaddr_in6*>(&storage);
      a->sin6_family = AF_INET6;
      if (inet_pton(AF_INET6, address_.c_str(), &a->sin6_addr) != 1) return false;
      len = sizeof(*a);
    } else {
      auto* a = reinterpret_cast<sockaddr_in*>(&storage);
      a->sin_family = AF_INET;
      if (inet_pton(AF_INET, address_.c_str(), &a->sin_addr) != 1) return false;
      len = sizeof(*a);
    }
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&storage), len) != 0) return false;
    if (::listen(listen_fd_, 16) != 0) return false;
    if (::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&storage), &len) != 0) return false;
    port_ = ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port
                     : reinterpret_cast<sockaddr_in*>(&storage)->sin_port);
    return true;
  }

  void Run() {
    std::vector<int> silent;  // connections held open without an answer
    while (true) {
      pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) continue;
      if (fds[1].revents != 0) break;
      if (fds[0].revents == 0) continue;
      int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      TestHttpRequest request;
      if (!ReadRequest(client, request)) {
        ::close(client);
        continue;
      }
      ++requests_;
      TestHttpReply reply = handler_(request);
      if (reply.never_answer) {
        silent.push_back(client);
        continue;
      }
      std::string wire = reply.raw.empty() ? Format(reply) : reply.raw;
      WriteAll(client, wire);
      ::close(client);
    }
    for (int fd : silent) ::close(fd);
  }

  // Reads up to the blank line that ends the request head; a GET has no body.
  static bool ReadRequest(int fd, TestHttpRequest& request) {
    std::string data;
    char buffer[4096];
    while (data.find("\r\n\r\n") == std::string::npos) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 2000) <= 0) return false;
      ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
      if (n <= 0) return false;
      data.append(buffer, static_cast<size_t>(n));
      if (data.size() > 65536) return false;
    }
    std::string_view head(data.data(), data.find("\r\n\r\n"));
    size_t eol = head.find("\r\n");
    std::string_view line = head.substr(0, eol);
    size_t sp1 = line.find(' ');
    size_t sp2 = line.find(' ', sp1 + 1);
    if (sp1 == std::string_view::npos || sp2 == std::string_view::npos) return false;
    request.method = std::string(line.substr(0, sp1));
    request.path = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
    std::string_view rest = eol == std::string_view::npos ? std::string_view() : head.substr(eol + 2);
    while (!rest.empty()) {
      size_t next = rest.find("\r\n");
      std::string_view h = rest.substr(0, next);
      rest = next == std::string_view::npos ? std::string_view() : rest.substr(next + 2);
      size_t colon = h.find(':');
      if (colon == std::string_view::npos) return false;
      std::string_view value = h.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      request.headers.emplace_back(std::string(h.substr(0, colon)), std::string(value));
    }
    return true;
  }

  static std::string Format(const TestHttpReply& reply) {
    std::string out = "HTTP/1.1 " + std::to_string(reply.status) + " " + Reason(reply.status) +
                      "\r\nContent-Type: application/text\r\nConnection: close\r\n";
    if (!reply.chunked) {
      return out + "Content-Length: " + std::to_string(reply.body.size()) + "\r\n\r\n" + reply.body;
    }
    out += "Transfer-Encoding: chunked\r\n\r\n";
    // Small chunks, an extension and a trailer: the parts of the grammar a client may trip over.
    constexpr size_t kChunk = 5;
    for (size_t i = 0; i < reply.body.size(); i += kChunk) {
      std::string part = reply.body.substr(i, kChunk);
      char size[16];
      std::snprintf(size, sizeof(size), "%zx", part.size());
      out += std::string(size) + (i == 0 ? ";note=first" : "") + "\r\n" + part + "\r\n";
    }
    return out + "0\r\nX-Trailer: done\r\n\r\n";
  }

  static std::string Reason(int status) {
    switch (status) {
      case 200:
        return "OK";
      case 403:
        return "Forbidden";
      case 404:
        return "Not Found";
      default:
        return "Status";
    }
  }

  static void WriteAll(int fd, std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return;
      data.remove_prefix(static_cast<size_t>(n));
    }
  }

  TestHttpHandler handler_;
  std::string address_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  int port_ = 0;
  std::atomic<int> requests_{0};
  std::thread thread_;  // last: starts after everything it uses exists
};

}  // namespace distrun::testing
