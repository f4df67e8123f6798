#include "launcher/remote/host_session.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

namespace distrun {

void HostSession::Start(const SpawnSpec& spec, const std::string& cwd) {
  started_ = Clock::now();
  state_ = State::kConnecting;
  try {
    child_ = Child::Start(spec);
  } catch (const SpawnError& e) {
    out_open_ = err_open_ = false;
    Fail(std::string(local_ ? "cannot start distrun: " : "cannot start ssh: ") + e.what());
    return;
  }
  Send(FormatChannelLine("cwd", cwd));
}

void HostSession::Send(const std::string& text) {
  if (!child_.stdin_pipe()) return;
  pending_ += text;
  Flush();
}

void HostSession::Flush() {
  while (!pending_.empty() && child_.stdin_pipe()) {
    const ssize_t n = ::write(child_.stdin_pipe().get(), pending_.data(), pending_.size());
    if (n > 0) {
      pending_.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;  // POLLOUT says when to go on
    CloseInput();                          // EPIPE: it is gone; its exit says the rest
  }
}

void HostSession::CloseInput() {
  pending_.clear();
  child_.stdin_pipe().Reset();
}

std::vector<std::string> HostSession::Read(bool is_stdout) {
  UniqueFd& fd = is_stdout ? child_.stdout_pipe() : child_.stderr_pipe();
  std::string& buffer = is_stdout ? out_buffer_ : err_buffer_;
  bool& open = is_stdout ? out_open_ : err_open_;
  std::vector<std::string> lines;
  if (!open) return lines;
  char chunk[16384];
  for (;;) {
    const ssize_t n = ::read(fd.get(), chunk, sizeof chunk);
    if (n > 0) {
      buffer.append(chunk, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    open = false;  // the end, or an error that is one
    fd.Reset();
    break;
  }
  size_t begin = 0;
  for (size_t nl; (nl = buffer.find('\n', begin)) != std::string::npos; begin = nl + 1) {
    lines.push_back(buffer.substr(begin, nl + 1 - begin));
  }
  buffer.erase(0, begin);
  if (!open && !buffer.empty()) {
    lines.push_back(buffer + "\n");
    buffer.clear();
  }
  return lines;
}

bool HostSession::OutputOpen() const { return out_open_ || err_open_; }

void HostSession::TakeLine(const std::string& line) {
  if (std::optional<Hello> h = ParseHello(line)) {
    hello_ = std::move(h);
    state_ = State::kChecked;
  }
}

void HostSession::KeepSaid(const std::string& line) {
  if (said_.size() < 64 * 1024) said_ += line;
}

void HostSession::Fail(std::string why) {
  outcome_ = std::move(why);
  state_ = State::kFailed;
}

void HostSession::Ended(int wait_status) {
  child_.SetReaped(wait_status);
  if (WIFEXITED(wait_status)) {
    exit_code_ = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    exit_code_ = 128 + WTERMSIG(wait_status);
    killed_ = true;
  }
  if (state_ == State::kRunning) state_ = State::kEnded;
}

}  // namespace distrun
