#include "runtime/metrics/http_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace distrun {
namespace {

void SetTimeout(int fd, int option, std::chrono::seconds timeout) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count());
  ::setsockopt(fd, SOL_SOCKET, option, &tv, sizeof tv);
}

bool SendAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string Trimmed(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

void Reply(int fd, const ServerResponse& r, bool head_only) {
  std::string out = "HTTP/1.1 " + HttpStatusLine(r.status) + "\r\nContent-Type: " + r.content_type +
                    "\r\nContent-Length: " + std::to_string(r.body.size()) +
                    "\r\nConnection: close\r\nX-Content-Type-Options: nosniff\r\n";
  for (const auto& [name, value] : r.headers) out += name + ": " + value + "\r\n";
  out += "\r\n";
  if (!head_only) out += r.body;
  SendAll(fd, out.data(), out.size());
}

}  // namespace

std::string HttpStatusLine(int status) {
  switch (status) {
    case 200:
      return "200 OK";
    case 400:
      return "400 Bad Request";
    case 401:
      return "401 Unauthorized";
    case 403:
      return "403 Forbidden";
    case 404:
      return "404 Not Found";
    case 405:
      return "405 Method Not Allowed";
    case 431:
      return "431 Request Header Fields Too Large";
    case 503:
      return "503 Service Unavailable";
    case 504:
      return "504 Gateway Timeout";
    default:
      return std::to_string(status) + " Error";
  }
}

bool ParseServerRequest(const std::string& head, ServerRequest* request) {
  size_t line_end = head.find("\r\n");
  if (line_end == std::string::npos) return false;
  const std::string line = head.substr(0, line_end);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = line.rfind(' ');
  if (sp1 == std::string::npos || sp2 == sp1 || line.compare(sp2 + 1, 5, "HTTP/") != 0) return false;
  request->method = line.substr(0, sp1);
  std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (target.empty() || target[0] != '/') return false;
  const size_t q = target.find('?');
  request->path = target.substr(0, q);
  request->query = q == std::string::npos ? "" : target.substr(q + 1);
  request->headers.clear();
  size_t at = line_end + 2;
  while (at < head.size()) {
    const size_t end = head.find("\r\n", at);
    if (end == std::string::npos || end == at) break;
    const std::string header = head.substr(at, end - at);
    const size_t colon = header.find(':');
    if (colon == std::string::npos || colon == 0) return false;
    request->headers[Lower(header.substr(0, colon))] = Trimmed(header.substr(colon + 1));
    at = end + 2;
  }
  return true;
}

HttpServer::HttpServer(ListeningSocket socket, Handler handler)
    : socket_(std::move(socket)), handler_(std::move(handler)) {
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw std::runtime_error(std::string("cannot make the HTTP server's wake-up pipe: ") +
                             std::strerror(errno));
  }
  accept_thread_ = std::thread([this] { AcceptLoop(); });
}

HttpServer::~HttpServer() {
  stopping_ = true;
  const char byte = 0;
  [[maybe_unused]] ssize_t n = ::write(wake_[1], &byte, 1);
  if (accept_thread_.joinable()) accept_thread_.join();
  {
    std::lock_guard lock(mu_);
    for (const auto& c : connections_) {
      if (!c->done) ::shutdown(c->fd, SHUT_RDWR);
    }
  }
  Reap(/*all=*/true);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void HttpServer::AcceptLoop() {
  pollfd fds[2] = {{socket_.fd(), POLLIN, 0}, {wake_[0], POLLIN, 0}};
  while (!stopping_) {
    if (::poll(fds, 2, 1000) < 0 && errno != EINTR) break;
    Reap(/*all=*/false);
    if (fds[1].revents != 0) break;
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int fd = ::accept4(socket_.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard lock(mu_);
    if (connections_.size() >= kMaxConnections) {
      ServerResponse busy;
      busy.status = 503;
      busy.body = "too many connections at once; try again\n";
      SetTimeout(fd, SO_SNDTIMEO, std::chrono::seconds(1));
      Reply(fd, busy, false);
      ::close(fd);
      continue;
    }
    auto connection = std::make_unique<Connection>();
    Connection* c = connection.get();
    c->fd = fd;
    try {
      c->thread = std::thread([this, fd, c] {
        Serve(fd);
        c->done = true;
      });
    } catch (const std::system_error&) {
      ::close(fd);
      continue;
    }
    connections_.push_back(std::move(connection));
  }
}

void HttpServer::Reap(bool all) {
  std::list<std::unique_ptr<Connection>> finished;
  {
    std::lock_guard lock(mu_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (all || (*it)->done) {
        finished.push_back(std::move(*it));
        it = connections_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& c : finished) {
    c->thread.join();
    ::close(c->fd);
  }
}

void HttpServer::Serve(int fd) {
  SetTimeout(fd, SO_RCVTIMEO, kReadTimeout);
  SetTimeout(fd, SO_SNDTIMEO, kWriteTimeout);
  std::string head;
  char buf[4096];
  bool complete = false;
  while (head.size() <= kMaxHeadBytes) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    head.append(buf, static_cast<size_t>(n));
    if (head.find("\r\n\r\n") != std::string::npos) {
      complete = true;
      break;
    }
  }
  ServerRequest request;
  ServerResponse response;
  if (!complete && head.size() > kMaxHeadBytes) {
    response.status = 431;
    response.body = "the request's head is over 16 KiB\n";
  } else if (!complete || !ParseServerRequest(head, &request)) {
    response.status = 400;
    response.body = "not an HTTP request\n";
  } else if (request.method != "GET" && request.method != "HEAD") {
    response.status = 405;
    response.body = "read-only: GET or HEAD\n";
    response.headers.emplace_back("Allow", "GET, HEAD");
  } else {
    try {
      response = handler_(request);
    } catch (const std::exception& e) {
      response = ServerResponse{};
      response.status = 503;
      response.body = std::string(e.what()) + "\n";
    }
  }
  Reply(fd, response, request.method == "HEAD");
  ::shutdown(fd, SHUT_WR);  // the descriptor is closed by Reap
}

}  // namespace distrun
