// A blocking HTTP/1.1 GET for metadata servers. Deliberately minimal: plain TCP, no TLS, no redirects,
// and no proxy support. Metadata servers live on a link-local address that a proxy cannot reach, so this
// client never reads http_proxy / HTTP_PROXY / no_proxy: routing metadata requests through a proxy would
// at best fail and at worst leak instance identity to the proxy.
#include "detect/http_get.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <string>
#include <string_view>

namespace distrun {
namespace {

using Clock = std::chrono::steady_clock;

// Bodies of metadata attributes are small; anything larger is not a metadata server.
constexpr size_t kMaxBodyBytes = 1 << 20;
constexpr size_t kMaxHeaderBytes = 64 << 10;

class SocketFd {
 public:
  explicit SocketFd(int fd = -1) : fd_(fd) {}
  SocketFd(const SocketFd&) = delete;
  SocketFd& operator=(const SocketFd&) = delete;
  SocketFd(SocketFd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  SocketFd& operator=(SocketFd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = other.fd_;
      other.fd_ = -1;
    }
    return *this;
  }
  ~SocketFd() { Reset(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

class AddrInfoList {
 public:
  explicit AddrInfoList(addrinfo* list) : list_(list) {}
  AddrInfoList(const AddrInfoList&) = delete;
  AddrInfoList& operator=(const AddrInfoList&) = delete;
  ~AddrInfoList() {
    if (list_ != nullptr) freeaddrinfo(list_);
  }
  const addrinfo* get() const { return list_; }

 private:
  addrinfo* list_;
};

// Milliseconds left until `deadline` for poll(), 0 when it has passed.
int RemainingMs(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return static_cast<int>(std::min<long long>(left, 1 << 30));
}

// Waits for `events` on fd until the deadline. False on timeout or error.
bool WaitFor(int fd, short events, Clock::time_point deadline) {
  while (true) {
    int ms = RemainingMs(deadline);
    if (ms == 0) return false;
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, ms);
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return false;
  }
}

bool IsIpLiteral(const std::string& host) {
  in_addr v4{};
  in6_addr v6{};
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 || inet_pton(AF_INET6, host.c_str(), &v6) == 1;
}

SocketFd Connect(const HttpRequest& request, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  // A literal must never trigger a DNS lookup (which the deadline cannot bound).
  hints.ai_flags = AI_NUMERICSERV | (IsIpLiteral(request.host) ? AI_NUMERICHOST : 0);
  addrinfo* raw = nullptr;
  std::string port = std::to_string(request.port);
  if (getaddrinfo(request.host.c_str(), port.c_str(), &hints, &raw) != 0) return SocketFd();
  AddrInfoList list(raw);

  for (const addrinfo* ai = list.get(); ai != nullptr; ai = ai->ai_next) {
    SocketFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) continue;
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0) return fd;
    if (errno != EINPROGRESS) continue;
    if (!WaitFor(fd.get(), POLLOUT, deadline)) return SocketFd();  // the deadline covers every address
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) return fd;
  }
  return SocketFd();
}

bool HasLineBreak(std::string_view s) { return s.find_first_of("\r\n") != std::string_view::npos; }

std::optional<std::string> FormatRequest(const HttpRequest& request) {
  if (request.path.empty() || request.path.front() != '/' ||
      request.path.find_first_of(" \r\n") != std::string::npos || HasLineBreak(request.host)) {
    return std::nullopt;
  }
  std::string host = request.host.find(':') != std::string::npos ? "[" + request.host + "]" : request.host;
  if (request.port != 80) host += ":" + std::to_string(request.port);
  std::string out = "GET " + request.path + " HTTP/1.1\r\nHost: " + host + "\r\n";
  for (const auto& [name, value] : request.headers) {
    if (name.empty() || HasLineBreak(name) || HasLineBreak(value) || name.find(':') != std::string::npos) {
      return std::nullopt;
    }
    out += name + ": " + value + "\r\n";
  }
  // One request per connection, and no compression we would have to undo.
  out += "Accept-Encoding: identity\r\nConnection: close\r\n\r\n";
  return out;
}

bool SendAll(int fd, std::string_view data, Clock::time_point deadline) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!WaitFor(fd, POLLOUT, deadline)) return false;
    } else {
      return false;
    }
  }
  return true;
}

char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (Lower(a[i]) != Lower(b[i])) return false;
  }
  return true;
}

std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

template <typename T>
bool ParseNumber(std::string_view s, T& out, int base = 10) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return ec == std::errc() && ptr == s.data() + s.size();
}

struct Head {
  int status = 0;
  bool chunked = false;
  std::optional<size_t> content_length;
  size_t body_offset = 0;  // where the body starts in the received bytes
};

enum class Parse { kIncomplete, kDone, kBad };

// Parses the status line and headers once "\r\n\r\n" has arrived.
Parse ParseHead(std::string_view data, Head& head) {
  size_t end = data.find("\r\n\r\n");
  if (end == std::string_view::npos) return data.size() > kMaxHeaderBytes ? Parse::kBad : Parse::kIncomplete;
  head.body_offset = end + 4;
  std::string_view lines = data.substr(0, end);
  size_t eol = lines.find("\r\n");
  std::string_view status_line = lines.substr(0, eol);
  // "HTTP/1.1 200 OK": the reason phrase is optional.
  if (!status_line.starts_with("HTTP/1.") || status_line.size() < 12 || status_line[8] != ' ')
    return Parse::kBad;
  if (!ParseNumber(status_line.substr(9, 3), head.status) || head.status < 100 || head.status > 599) {
    return Parse::kBad;
  }
  if (status_line.size() > 12 && status_line[12] != ' ') return Parse::kBad;
  std::string_view rest = eol == std::string_view::npos ? std::string_view() : lines.substr(eol + 2);
  while (!rest.empty()) {
    size_t next = rest.find("\r\n");
    std::string_view line = rest.substr(0, next);
    rest = next == std::string_view::npos ? std::string_view() : rest.substr(next + 2);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) return Parse::kBad;
    std::string_view name = line.substr(0, colon);
    std::string_view value = TrimSpace(line.substr(colon + 1));
    if (EqualsIgnoreCase(name, "Transfer-Encoding")) {
      // Only "chunked" (possibly after other codings we did not ask for) is understood.
      if (value.size() >= 7 && EqualsIgnoreCase(value.substr(value.size() - 7), "chunked")) {
        head.chunked = true;
      } else {
        return Parse::kBad;
      }
    } else if (EqualsIgnoreCase(name, "Content-Length")) {
      size_t length = 0;
      if (!ParseNumber(value, length)) return Parse::kBad;
      if (head.content_length && *head.content_length != length) return Parse::kBad;
      head.content_length = length;
    }
  }
  return Parse::kDone;
}

// Decodes a chunked body (RFC 9112 §7.1). kIncomplete until the last chunk and the trailers arrived.
Parse DecodeChunked(std::string_view data, std::string& body) {
  body.clear();
  size_t pos = 0;
  while (true) {
    size_t eol = data.find("\r\n", pos);
    // A size line (with its extensions) of at most 1 KiB: the same limit whether its end has come or not,
    // so that an answer refused as it arrives is refused whole as well.
    if (eol == std::string_view::npos) return data.size() - pos > 1024 ? Parse::kBad : Parse::kIncomplete;
    if (eol - pos > 1024) return Parse::kBad;
    std::string_view size_line = data.substr(pos, eol - pos);
    size_t semicolon = size_line.find(';');  // chunk extensions are ignored
    std::string_view size_text = TrimSpace(size_line.substr(0, semicolon));
    size_t size = 0;
    if (size_text.size() > 8 || !ParseNumber(size_text, size, 16)) return Parse::kBad;
    pos = eol + 2;
    if (size == 0) {
      // Trailer fields, then an empty line.
      while (true) {
        size_t trailer_end = data.find("\r\n", pos);
        if (trailer_end == std::string_view::npos) return Parse::kIncomplete;
        if (trailer_end == pos) return Parse::kDone;
        pos = trailer_end + 2;
      }
    }
    if (body.size() + size > kMaxBodyBytes) return Parse::kBad;
    if (data.size() < pos + size + 2) return Parse::kIncomplete;
    body.append(data.substr(pos, size));
    if (data.substr(pos + size, 2) != "\r\n") return Parse::kBad;
    pos += size + 2;
  }
}

}  // namespace

HttpAnswer ParseHttpAnswer(std::string_view received, bool closed, HttpResponse* response) {
  // Not yet complete: refused once the server closed the connection.
  const HttpAnswer incomplete = closed ? HttpAnswer::kBad : HttpAnswer::kIncomplete;
  Head head;
  const Parse p = ParseHead(received, head);
  if (p == Parse::kBad) return HttpAnswer::kBad;
  if (p == Parse::kIncomplete) return incomplete;
  std::string_view body_bytes = received.substr(head.body_offset);
  if (body_bytes.size() > kMaxBodyBytes + (head.chunked ? 64 * 1024 : 0)) return HttpAnswer::kBad;
  if (head.status < 200) return HttpAnswer::kBad;  // we never ask for interim responses
  response->status = head.status;
  response->body.clear();
  if (head.status == 204 || head.status == 304) return HttpAnswer::kComplete;  // no body by definition
  if (head.chunked) {
    switch (DecodeChunked(body_bytes, response->body)) {
      case Parse::kBad:
        return HttpAnswer::kBad;
      case Parse::kDone:
        return HttpAnswer::kComplete;
      case Parse::kIncomplete:
        return incomplete;
    }
  }
  if (head.content_length) {
    if (*head.content_length > kMaxBodyBytes) return HttpAnswer::kBad;
    if (body_bytes.size() < *head.content_length) return incomplete;  // closed: truncated
    response->body = std::string(body_bytes.substr(0, *head.content_length));
    return HttpAnswer::kComplete;
  }
  if (!closed) return HttpAnswer::kIncomplete;
  response->body = std::string(body_bytes);  // the body ends where the connection does
  return HttpAnswer::kComplete;
}

std::optional<HttpResponse> HttpGetBlocking(const HttpRequest& request) {
  const Clock::time_point deadline = Clock::now() + request.timeout;
  std::optional<std::string> wire = FormatRequest(request);
  if (!wire || request.port < 1 || request.port > 65535) return std::nullopt;

  SocketFd fd = Connect(request, deadline);
  if (!fd.valid() || !SendAll(fd.get(), *wire, deadline)) return std::nullopt;

  std::string data;
  char buffer[16384];
  while (true) {
    if (!WaitFor(fd.get(), POLLIN, deadline)) return std::nullopt;
    ssize_t n = ::recv(fd.get(), buffer, sizeof(buffer), 0);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return std::nullopt;
    }
    data.append(buffer, static_cast<size_t>(n));
    HttpResponse response;
    switch (ParseHttpAnswer(data, /*closed=*/n == 0, &response)) {
      case HttpAnswer::kComplete:
        return response;
      case HttpAnswer::kBad:
        return std::nullopt;
      case HttpAnswer::kIncomplete:
        break;
    }
  }
}

}  // namespace distrun
