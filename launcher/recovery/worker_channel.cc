#include "launcher/recovery/worker_channel.h"

#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "launcher/process/spawn.h"

namespace distrun {
namespace {

constexpr size_t kReadChunk = 64 * 1024;
// How far up a connecting process's ancestry a worker may be (a shell, a wrapper, python's -m launcher).
constexpr int kMaxAncestry = 32;
// Connections that have not said who they are yet, beyond the workers' own: a bound on what a stray
// process of this user can hold open.
constexpr size_t kMaxConnections = 4096;

[[noreturn]] void Fail(const std::string& what) {
  throw std::runtime_error("the workers' recovery channel: " + what + ": " + std::strerror(errno));
}

std::string RandomName() {
  unsigned char bytes[8] = {};
  if (::getrandom(bytes, sizeof(bytes), 0) != static_cast<ssize_t>(sizeof(bytes))) Fail("getrandom");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "distrun-" + std::to_string(::getpid()) + "-";
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

// The parent of `pid` from /proc/PID/stat (after the command's closing parenthesis), or 0.
pid_t ParentOf(pid_t pid) {
  const std::string stat = ReadProcFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 4 >= stat.size()) return 0;
  // ") S PPID ..."
  const size_t begin = stat.find(' ', close + 2);
  if (begin == std::string::npos) return 0;
  return static_cast<pid_t>(std::strtol(stat.c_str() + begin + 1, nullptr, 10));
}

}  // namespace

WorkerChannel::WorkerChannel(SlotOf slot_of) : slot_of_(std::move(slot_of)) {
  listener_.Reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!listener_) Fail("socket");
  const std::string name = RandomName();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name.data(), name.size());  // sun_path[0] = 0: the abstract namespace
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (::bind(listener_.get(), reinterpret_cast<const sockaddr*>(&addr), len) != 0) Fail("bind @" + name);
  if (::listen(listener_.get(), 1024) != 0) Fail("listen");
  address_ = "@" + name;
  epoll_.Reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_) Fail("epoll_create1");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listener_.get();
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listener_.get(), &ev) != 0) Fail("epoll_ctl");
}

std::optional<size_t> WorkerChannel::Identify(pid_t pid) const {
  for (int depth = 0; pid > 1 && depth < kMaxAncestry; ++depth) {
    if (std::optional<size_t> slot = slot_of_(pid)) return slot;
    pid = ParentOf(pid);
  }
  return std::nullopt;
}

void WorkerChannel::Accept() {
  while (true) {
    int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or a connection that went before it was taken
    Connection c;
    c.fd.Reset(fd);
    ucred cred{};
    socklen_t len = sizeof(cred);
    const bool known = ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) continue;  // c closes it
    Connection& at = connections_.emplace(fd, std::move(c)).first->second;
    if (known && cred.uid == ::geteuid() && connections_.size() > kMaxConnections) {
      Refuse(at, "too many connections to distrun's worker channel");
    } else if (!known || cred.uid != ::geteuid()) {
      Refuse(at, "only the job's own user may use distrun's worker channel");
    } else if (std::optional<size_t> slot = Identify(cred.pid); !slot) {
      Refuse(at, "process " + std::to_string(cred.pid) +
                     " is not one of this distrun's workers, nor started by one; only workers may use "
                     "distrun's worker channel");
    } else if (by_slot_.contains(*slot)) {
      Refuse(at, "process " + std::to_string(cred.pid) +
                     " belongs to a worker that already has a connection to distrun (one per worker: "
                     "call distrun.torch.init_process_group() in one process of the worker)");
    } else {
      at.slot = *slot;
      by_slot_[*slot] = fd;
    }
    if (at.closing && at.out.empty()) Close(fd, nullptr);  // refused, and told so
  }
}

void WorkerChannel::Refuse(Connection& c, const std::string& why) {
  problems_.push_back("refused a connection to the worker channel: " + why);
  c.out += EncodeFrame(ErrorMessage(why));
  c.closing = true;
  Flush(c);
}

bool WorkerChannel::Read(Connection& c, std::vector<ChannelEvent>& events) {
  char buffer[kReadChunk];
  while (true) {
    ssize_t n = ::read(c.fd.get(), buffer, sizeof(buffer));
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    if (c.closing || !c.slot) continue;  // a refused peer's bytes are not read as messages
    c.reader.Append(std::string_view(buffer, static_cast<size_t>(n)));
    try {
      while (std::optional<std::string> payload = c.reader.Next()) {
        events.push_back({*c.slot, DecodePayload(*payload)});
      }
    } catch (const WorkerMessageError& e) {
      problems_.push_back("the worker in slot " + std::to_string(*c.slot) +
                          " sent what distrun cannot read (" + e.what() + "); its connection is closed");
      return false;
    }
    if (static_cast<size_t>(n) < sizeof(buffer)) return true;
  }
}

bool WorkerChannel::Flush(Connection& c) {
  while (!c.out.empty()) {
    ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) return false;
      WantWrite(c, true);
      return true;
    }
    c.out.erase(0, static_cast<size_t>(n));
  }
  WantWrite(c, false);
  return !c.closing;
}

void WorkerChannel::WantWrite(const Connection& c, bool on) {
  epoll_event ev{};
  ev.events = EPOLLIN | (on ? EPOLLOUT : 0u);
  ev.data.fd = c.fd.get();
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, c.fd.get(), &ev);
}

void WorkerChannel::Close(int fd, std::vector<ChannelEvent>* events) {
  auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  if (it->second.slot) {
    by_slot_.erase(*it->second.slot);
    if (events != nullptr) events->push_back({*it->second.slot, std::nullopt});
  }
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  connections_.erase(it);
}

std::vector<ChannelEvent> WorkerChannel::Process() {
  std::vector<ChannelEvent> events = std::exchange(pending_, {});
  epoll_event ready[64];
  int n = ::epoll_wait(epoll_.get(), ready, 64, 0);
  for (int i = 0; i < n; ++i) {
    const int fd = ready[i].data.fd;
    if (fd == listener_.get()) {
      Accept();
      continue;
    }
    auto it = connections_.find(fd);
    if (it == connections_.end()) continue;
    Connection& c = it->second;
    bool alive = true;
    if (ready[i].events & EPOLLOUT) alive = Flush(c);
    if (alive && (ready[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) alive = Read(c, events) && !c.closing;
    if (!alive) Close(fd, &events);
  }
  return events;
}

bool WorkerChannel::Send(size_t slot, const WorkerMessage& message) {
  auto at = by_slot_.find(slot);
  if (at == by_slot_.end()) return false;
  Connection& c = connections_.at(at->second);
  try {
    c.out += EncodeFrame(message);
  } catch (const WorkerMessageError& e) {
    problems_.push_back(std::string("cannot send a worker its message: ") + e.what());
    return false;
  }
  if (!Flush(c)) Close(at->second, &pending_);  // Process reports the closed connection
  return true;
}

void WorkerChannel::Drop(size_t slot) {
  auto at = by_slot_.find(slot);
  if (at != by_slot_.end()) Close(at->second, nullptr);
}

std::vector<std::string> WorkerChannel::TakeProblems() { return std::exchange(problems_, {}); }

}  // namespace distrun
