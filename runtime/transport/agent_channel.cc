#include "runtime/transport/agent_channel.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "detect/errors.h"
#include "runtime/distrun.pb.h"
#include "runtime/transport/agent_frames.h"
#include "runtime/transport/grpc_server.h"
#include "runtime/transport/proto_convert.h"

namespace distrun {
namespace {

using namespace std::chrono_literals;

// A connect that neither succeeds nor fails (a dropped SYN) is given up after this and tried again.
constexpr auto kConnectTimeout = 20s;
// A name that does not resolve yet (a Kubernetes pod not ready) is asked again this often.
constexpr auto kResolveRetry = 1s;
constexpr size_t kReadChunk = 64 * 1024;

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

bool WriteAll(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

std::string Framed(const v1::AgentFrame& frame) {
  std::string out;
  AppendFrame(frame, &out);
  return out;
}

}  // namespace

AgentChannel::AgentChannel(AgentChannelOptions options, std::function<void(const JobEvent&)> on_event,
                           std::function<void(const Status&)> on_closed)
    : options_(std::move(options)), on_event_(std::move(on_event)), on_closed_(std::move(on_closed)) {
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw std::runtime_error(Errno("eventfd"));
  reader_ = std::thread([this] { Run(); });
}

AgentChannel::~AgentChannel() {
  Close();
  ::close(wake_fd_);
}

void AgentChannel::Run() {
  Status end;
  std::string why = "no connection attempt yet";
  auto delay = 2ms;
  while (true) {
    int fd = ConnectOnce(&why);
    if (fd >= 0) {
      v1::AgentFrame hello;
      hello.mutable_hello()->set_token(options_.token);
      if (options_.credential) hello.mutable_hello()->set_munge_credential(options_.credential(port_));
      v1::AgentFrame first;
      first.mutable_liveness()->set_node_rank(options_.node_rank);
      if (options_.first_join) ToProto(*options_.first_join, first.mutable_liveness()->mutable_join());
      std::string opening(kAgentChannelPreface);
      AppendFrame(hello, &opening);
      AppendFrame(first, &opening);
      bool written = false;
      {
        // Under write_mu_ no other frame can slip in before the queued ones.
        std::lock_guard write_lock(write_mu_);
        {
          std::lock_guard lock(mu_);
          if (!closing_) {
            fd_ = fd;
            opening += std::exchange(pending_, {});
          }
        }
        if (fd_ == fd) written = WriteAll(fd, opening);
      }
      if (fd_ != fd) {
        ::close(fd);
        end = {StatusCode::kCancelled, "closed"};
      } else if (!written) {
        end = {StatusCode::kUnavailable, Errno("sending to the coordinator")};
      } else {
        end = ReadFrames(fd);
      }
      break;
    }
    std::chrono::milliseconds wait = delay;
    if (fd == -2) wait = kResolveRetry;
    if (!WaitBeforeRetry(wait)) {
      end = {StatusCode::kCancelled, "closed before a connection was made (last attempt: " + why + ")"};
      break;
    }
    delay = std::min<std::chrono::milliseconds>(delay * 2, 100ms);
  }
  {
    std::lock_guard lock(mu_);
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);  // a writer blocked on it gives up
  }
  {
    std::lock_guard write_lock(write_mu_);
    std::lock_guard lock(mu_);
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    ended_ = true;
    if (closing_ && end.code != StatusCode::kCancelled) end = {StatusCode::kCancelled, "closed"};
  }
  EndCalls(end.ok() ? Status{StatusCode::kUnavailable, "the channel ended"} : end);
  on_closed_(end);
}

// A connected, blocking socket; -1 (refused, unreachable: try again soon) or -2 (the name does not resolve:
// try again later) with `why`.
int AgentChannel::ConnectOnce(std::string* why) {
  int result = -2;
  size_t begin = 0;
  while (begin <= options_.address.size()) {
    size_t end = options_.address.find(',', begin);
    if (end == std::string::npos) end = options_.address.size();
    const std::string address = options_.address.substr(begin, end - begin);
    begin = end + 1;
    int port = 0;
    int fd = ConnectTo(address, why, &port);
    if (fd >= 0) {
      std::lock_guard lock(mu_);
      connected_ = address;
      port_ = port;
      return fd;
    }
    if (fd == -1) result = -1;  // an address that can be tried again soon
    if (options_.address.find(',') != std::string::npos) *why = address + ": " + *why;
  }
  return result;
}

std::string AgentChannel::connected_address() const {
  std::lock_guard lock(mu_);
  return connected_;
}

int AgentChannel::ConnectTo(const std::string& address, std::string* why, int* port_out) {
  std::string host, port;
  try {
    auto [h, p] = SplitHostPort(address, "coordinator address");
    host = h;
    port = std::to_string(p);
    *port_out = p;
  } catch (const UsageError& e) {
    *why = e.what();
    return -2;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0 || found == nullptr) {
    *why = "cannot resolve " + host + ": " + (rc != 0 ? ::gai_strerror(rc) : "no address");
    return -2;
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> list(found, ::freeaddrinfo);
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      *why = Errno("socket");
      continue;
    }
    bool connected = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0;
    if (!connected && errno == EINPROGRESS) {
      pollfd fds[2] = {{fd, POLLOUT, 0}, {wake_fd_, POLLIN, 0}};
      int n = 0;
      do {
        n = ::poll(fds, 2, static_cast<int>(std::chrono::milliseconds(kConnectTimeout).count()));
      } while (n < 0 && errno == EINTR);
      if (n > 0 && (fds[1].revents & POLLIN)) {
        ::close(fd);
        *why = "connect: closed while connecting";
        return -1;
      }
      int err = ETIMEDOUT;
      socklen_t len = sizeof err;
      if (n > 0) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      connected = err == 0;
      errno = err;
    }
    if (!connected) {
      *why = Errno("connect");
      ::close(fd);
      continue;
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
  }
  return -1;
}

bool AgentChannel::WaitBeforeRetry(std::chrono::milliseconds delay) {
  pollfd wake{wake_fd_, POLLIN, 0};
  ::poll(&wake, 1, static_cast<int>(delay.count()));
  std::lock_guard lock(mu_);
  return !closing_;
}

Status AgentChannel::ReadFrames(int fd) {
  FrameReader reader(options_.max_message_bytes);
  std::vector<char> buffer(kReadChunk);
  while (true) {
    ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return {StatusCode::kUnavailable, "the coordinator closed the connection"};
    if (n < 0) return {StatusCode::kUnavailable, Errno("reading from the coordinator")};
    reader.Append(buffer.data(), static_cast<size_t>(n));
    std::string_view bytes;
    while (true) {
      const FrameReader::Result r = reader.Next(&bytes);
      if (r == FrameReader::Result::kNeedMore) break;
      if (r == FrameReader::Result::kTooLarge) {
        return {StatusCode::kResourceExhausted, "the coordinator sent a message of more than " +
                                                    std::to_string(options_.max_message_bytes) + " bytes"};
      }
      v1::CoordinatorFrame frame;
      if (!frame.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
        return {StatusCode::kUnavailable, "the coordinator sent a malformed message"};
      }
      switch (frame.frame_case()) {
        case v1::CoordinatorFrame::kEvent:
          on_event_(FromProto(frame.event()));
          break;
        case v1::CoordinatorFrame::kResult: {
          std::lock_guard lock(mu_);
          if (auto it = calls_.find(frame.result().id()); it != calls_.end()) {
            it->second.done = true;
            it->second.status = FromProto(frame.result().status());
            it->second.root_cause = frame.result().failure().root_cause();
            cv_.notify_all();
          }
          break;
        }
        case v1::CoordinatorFrame::kRefused:
          return FromProto(frame.refused());
        default:
          break;  // a frame of a newer minor version
      }
    }
  }
}

bool AgentChannel::Send(const std::string& frame, bool skippable) {
  std::unique_lock write_lock(write_mu_, std::defer_lock);
  if (skippable) {
    // A write still in progress makes a heartbeat needless; the caller has timeouts to check.
    if (!write_lock.try_lock()) return true;
  } else {
    write_lock.lock();
  }
  int fd = -1;
  {
    std::lock_guard lock(mu_);
    if (ended_ || closing_) return false;
    if (fd_ < 0) {
      if (!skippable) pending_ += frame;
      return true;
    }
    fd = fd_;
  }
  return WriteAll(fd, frame);
}

v1::AgentFrame AgentChannel::Beat(const LinkNews& news) {
  v1::AgentFrame frame;
  frame.mutable_liveness()->set_node_rank(options_.node_rank);
  SetLinkNews(news, frame.mutable_liveness());
  std::lock_guard lock(mu_);
  if (fd_ >= 0) frame.mutable_liveness()->set_retransmitted(retransmits_.Since(fd_));
  return frame;
}

bool AgentChannel::SendHeartbeat(const LinkNews& news) {
  return Send(Framed(Beat(news)), /*skippable=*/true);
}

bool AgentChannel::SendJoin(const NodeJoin& join) {
  v1::AgentFrame frame;
  frame.mutable_liveness()->set_node_rank(options_.node_rank);
  ToProto(join, frame.mutable_liveness()->mutable_join());
  return Send(Framed(frame), /*skippable=*/false);
}

bool AgentChannel::SendSuccess(int restart_round) {
  v1::AgentFrame frame;
  auto* liveness = frame.mutable_liveness();
  liveness->set_node_rank(options_.node_rank);
  liveness->mutable_success()->set_node_rank(options_.node_rank);
  liveness->mutable_success()->set_restart_round(restart_round);
  return Send(Framed(frame), /*skippable=*/false);
}

bool AgentChannel::SendProgress(const NodeProgress& progress, const LinkNews& news) {
  v1::AgentFrame frame = Beat(news);
  ToProto(progress, frame.mutable_liveness()->mutable_progress());
  return Send(Framed(frame), /*skippable=*/true);
}

bool AgentChannel::SendStacks(const StacksReply& reply) {
  v1::AgentFrame frame;
  frame.mutable_liveness()->set_node_rank(options_.node_rank);
  ToProto(reply, frame.mutable_liveness()->mutable_stacks());
  return Send(Framed(frame), /*skippable=*/false);
}

bool AgentChannel::SendStandbyApplied(uint64_t applied, bool needs_snapshot) {
  v1::AgentFrame frame;
  frame.mutable_liveness()->set_node_rank(options_.node_rank);
  frame.mutable_liveness()->mutable_standby()->set_applied(applied);
  frame.mutable_liveness()->mutable_standby()->set_needs_snapshot(needs_snapshot);
  return Send(Framed(frame), /*skippable=*/false);
}

Status AgentChannel::ReportFailure(int restart_round, const FailedWorker& failure, bool* root_cause) {
  *root_cause = false;
  uint64_t id = 0;
  {
    std::lock_guard lock(mu_);
    if (ended_ || closing_) {
      return {StatusCode::kUnavailable,
              "the connection to the distrun runtime at " + options_.address + " has ended"};
    }
    id = next_call_++;
    calls_[id];
  }
  v1::AgentFrame frame;
  frame.mutable_call()->set_id(id);
  frame.mutable_call()->mutable_failure()->set_restart_round(restart_round);
  ToProto(failure, frame.mutable_call()->mutable_failure()->mutable_failure());
  const bool sent = Send(Framed(frame), /*skippable=*/false);
  std::unique_lock lock(mu_);
  Call& call = calls_[id];
  if (sent) cv_.wait_for(lock, options_.call_timeout, [&call] { return call.done; });
  Status status;
  if (call.done) {
    status = call.status;
    *root_cause = status.ok() && call.root_cause;
  } else {
    status = {sent ? StatusCode::kDeadlineExceeded : StatusCode::kUnavailable,
              "no answer from the distrun runtime at " + options_.address};
  }
  calls_.erase(id);
  if (status.code == StatusCode::kUnavailable && status.message.find(options_.address) == std::string::npos) {
    status.message = "cannot reach the distrun runtime at " + options_.address + ": " + status.message;
  }
  return status;
}

void AgentChannel::EndCalls(const Status& status) {
  std::lock_guard lock(mu_);
  for (auto& [id, call] : calls_) {
    if (call.done) continue;
    call.done = true;
    call.status = status;
  }
  cv_.notify_all();
}

// Safe from any thread and more than once; from the reader thread itself (an event callback) it only asks
// the thread to end.
void AgentChannel::Close() {
  {
    std::lock_guard lock(mu_);
    closing_ = true;
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
  }
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
  cv_.notify_all();
  if (reader_.get_id() == std::this_thread::get_id()) return;
  std::call_once(joined_, [this] {
    if (reader_.joinable()) reader_.join();
  });
}

}  // namespace distrun
