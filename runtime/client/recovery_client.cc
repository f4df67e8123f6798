#include "runtime/client/recovery_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace distrun {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

RecoveryClient::RecoveryClient(const std::string& address) {
  const bool abstract = address.starts_with("@");
  const std::string name = abstract ? address.substr(1) : address;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (name.empty() || name.size() + 1 > sizeof(addr.sun_path)) {
    throw std::runtime_error("'" + address + "' is not a worker channel's address (DISTRUN_RECOVERY_SOCKET)");
  }
  std::memcpy(addr.sun_path + (abstract ? 1 : 0), name.data(), name.size());
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + (abstract ? 1 : 0) + name.size() +
                                          (abstract ? 0 : 1));
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0 || ::connect(fd_, reinterpret_cast<const sockaddr*>(&addr), len) != 0) {
    const std::string why = std::strerror(errno);
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    throw std::runtime_error("cannot reach this node's distrun at " + address +
                             " (DISTRUN_RECOVERY_SOCKET): " + why);
  }
  HelloMessage hello;
  hello.pid = ::getpid();
  Status s = Say(ToMessage(hello));
  if (!s.ok()) {
    ::close(fd_);
    fd_ = -1;
    throw std::runtime_error(s.message);
  }
}

RecoveryClient::~RecoveryClient() {
  if (fd_ >= 0) ::close(fd_);
}

Status RecoveryClient::Say(const WorkerMessage& message) {
  std::string frame = EncodeFrame(message);
  size_t sent = 0;
  while (sent < frame.size()) {
    ssize_t n = ::send(fd_, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return {StatusCode::kUnavailable, std::string("the worker channel: ") + std::strerror(errno)};
    sent += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status RecoveryClient::Take(const WorkerMessage& m) {
  try {
    if (m.name == "world") {
      WorldMessage w = WorldFrom(m);
      if (!world_ || w.generation >= world_->generation) world_ = std::move(w);
    } else if (m.name == "changed") {
      changed_ = std::max(changed_, GenerationOf(m));
    } else if (m.name == "error") {
      const std::string* why = m.Find("message");
      ended_ = "distrun refused this worker: " + (why ? *why : std::string("(no reason)"));
    }
  } catch (const WorkerMessageError& e) {
    ended_ = e.what();
  }
  return ended_.empty() ? Status::Ok() : Status{StatusCode::kUnavailable, ended_};
}

template <typename Done>
Status RecoveryClient::ReadUntil(Done done, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  char buffer[16384];
  while (true) {
    try {
      while (std::optional<std::string> payload = reader_.Next()) {
        Status s = Take(DecodePayload(*payload));
        if (!s.ok()) return s;
      }
    } catch (const WorkerMessageError& e) {
      ended_ = e.what();
    }
    if (!ended_.empty()) return {StatusCode::kUnavailable, ended_};
    if (done()) return Status::Ok();
    int wait_ms = -1;
    if (timeout.count() >= 0) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return {StatusCode::kDeadlineExceeded, "no news from distrun in time"};
      wait_ms = static_cast<int>(std::min<int64_t>(left, 1 << 30));
    }
    pollfd p{fd_, POLLIN, 0};
    int ready = ::poll(&p, 1, wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // the deadline is checked above
    ssize_t n = ::read(fd_, buffer, sizeof(buffer));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      ended_ = "distrun closed the worker channel";
      return {StatusCode::kUnavailable, ended_};
    }
    reader_.Append(std::string_view(buffer, static_cast<size_t>(n)));
  }
}

Status RecoveryClient::Poll() {
  char buffer[16384];
  while (ended_.empty()) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) break;
    ssize_t n = ::read(fd_, buffer, sizeof(buffer));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      ended_ = "distrun closed the worker channel";
      break;
    }
    reader_.Append(std::string_view(buffer, static_cast<size_t>(n)));
  }
  return ReadUntil([] { return true; }, std::chrono::milliseconds(0));  // takes what was read
}

Status RecoveryClient::WaitWorld(int min_generation, std::chrono::milliseconds timeout, WorldMessage* world) {
  Status s = ReadUntil([&] { return world_ && world_->generation >= min_generation; }, timeout);
  if (s.ok()) *world = *world_;
  return s;
}

Status RecoveryClient::WaitChange(int held, std::chrono::milliseconds timeout, int* generation) {
  Status s = ReadUntil([&] { return changed_ > held; }, timeout);
  *generation = changed_;
  return s;
}

}  // namespace distrun
