#include "launcher/remote/remote_node.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launcher/process/output.h"
#include "launcher/remote/channel.h"

extern char** environ;

namespace distrun {
namespace {

using Clock = std::chrono::steady_clock;

// Lines from a descriptor, a poll at a time: nullopt on the end of the stream, an error or `timeout_ms`.
class LineReader {
 public:
  explicit LineReader(int fd) : fd_(fd) {}
  std::optional<std::string> Next(int timeout_ms) {
    for (;;) {
      if (size_t nl = buffer_.find('\n'); nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      pollfd p{fd_, POLLIN, 0};
      const int ready = ::poll(&p, 1, timeout_ms);
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) return std::nullopt;
      char chunk[4096];
      const ssize_t n = ::read(fd_, chunk, sizeof chunk);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

 private:
  int fd_;
  std::string buffer_;
};

// A port free on this host just now, for node 0's service (the launcher names it to every host).
int FreePort() {
  UniqueFd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof a;
  if (::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(s.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return 0;
  }
  return ntohs(a.sin_port);
}

std::string CwdProblem(const std::string& cwd) {
  struct stat st {};
  if (::stat(cwd.c_str(), &st) != 0) return std::string(std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) return "not a directory";
  if (::access(cwd.c_str(), X_OK) != 0) return std::string(std::strerror(errno));
  return "";
}

constexpr int kStartWaitMs = 10 * 60 * 1000;  // the launcher waits for the slowest host's check at most

}  // namespace

int RunRemoteNode(const Environment& env, const std::string& version) {
  ::signal(SIGPIPE, SIG_IGN);
  LineReader in(STDIN_FILENO);
  std::optional<std::string> first = in.Next(kStartWaitMs);
  std::optional<ChannelLine> cwd_line = first ? ParseChannelLine(*first) : std::nullopt;
  if (!cwd_line || cwd_line->verb != "cwd") {
    std::fprintf(stderr, "distrun: error: %s is for the launcher's ssh (distrun -H); it read no 'cwd' line\n",
                 kRemoteNodeFlag);
    return first ? 1 : 0;
  }
  const std::string cwd = cwd_line->value;
  Hello hello;
  hello.version = version;
  hello.host = env.hostname;
  hello.free_port = FreePort();
  hello.cwd_problem = CwdProblem(cwd);
  if (!WriteAll(STDOUT_FILENO, FormatHello(hello))) return 0;

  StartMessage start;
  for (;;) {
    std::optional<std::string> line = in.Next(kStartWaitMs);
    if (!line) return 0;  // the launcher is gone before the launch: nothing was started
    std::optional<ChannelLine> l = ParseChannelLine(*line);
    if (!l) {
      std::fprintf(stderr, "distrun: error: a malformed line from the launcher: %s\n", line->c_str());
      return 1;
    }
    if (l->verb == "abort") return 0;
    if (l->verb == "arg") start.argv.push_back(l->value);
    if (l->verb == "env") start.env.push_back(l->value);
    if (l->verb == "go") break;
  }
  if (start.argv.empty()) {
    std::fprintf(stderr, "distrun: error: the launcher's start message has no command\n");
    return 1;
  }
  if (::chdir(cwd.c_str()) != 0) {
    std::fprintf(stderr, "distrun: error: cannot enter the launch's working directory %s on %s: %s\n",
                 cwd.c_str(), env.hostname.c_str(), std::strerror(errno));
    return 2;
  }
  // The host's environment (what sshd gives a session), the launcher's variables over it.
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) vars[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const std::string& kv : start.env) {
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) vars[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  std::vector<std::string> envs;
  for (const auto& [k, v] : vars) envs.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (std::string& a : start.argv) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);
  ::execve(argv[0], argv.data(), envp.data());
  std::fprintf(stderr, "distrun: error: cannot run %s on %s: %s\n", argv[0], env.hostname.c_str(),
               std::strerror(errno));
  return 127;
}

UniqueFd LauncherWatch::TakeChannel() {
  UniqueFd channel(::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3));
  if (int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC); null >= 0) {
    ::dup2(null, STDIN_FILENO);
    ::close(null);
  }
  return channel;
}

LauncherWatch::LauncherWatch(UniqueFd channel, double silence_limit_s, std::shared_ptr<spdlog::logger> log)
    : channel_(std::move(channel)),
      wake_(::eventfd(0, EFD_CLOEXEC)),
      silence_limit_s_(silence_limit_s),
      log_(std::move(log)) {
  thread_ = std::thread([this] { Run(); });
}

LauncherWatch::~LauncherWatch() {
  const uint64_t one = 1;
  if (::write(wake_.get(), &one, sizeof one) < 0) {
    // The thread then ends at its next poll's timeout.
  }
  if (thread_.joinable()) thread_.join();
}

void LauncherWatch::Run() {
  auto heard = Clock::now();
  const auto limit = std::chrono::duration<double>(silence_limit_s_);
  bool signalled = false;  // SIGTERM sent: the supervisor stops the workers
  bool ended = false;      // the channel's end: nothing more to read
  auto term = [&] {
    if (!signalled) ::kill(::getpid(), SIGTERM);
    signalled = true;
  };
  auto lost = [&](const std::string& why) {
    if (!signalled) {
      log_->warn("{}; stopping the workers", why);
      launcher_lost_ = true;
    }
    term();
  };
  std::string buffer;
  for (;;) {
    pollfd p[2] = {{wake_.get(), POLLIN, 0}, {channel_.get(), POLLIN, 0}};
    const int ready = ::poll(p, ended ? 1 : 2, 250);
    if (ready < 0 && errno != EINTR) return;
    if (p[0].revents != 0) return;
    if (ready > 0 && !ended && p[1].revents != 0) {
      char chunk[4096];
      const ssize_t n = ::read(channel_.get(), chunk, sizeof chunk);
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
        ended = true;
        lost("the launcher is gone (its connection to this host closed)");
        continue;
      }
      if (n > 0) {
        heard = Clock::now();
        buffer.append(chunk, static_cast<size_t>(n));
      }
      for (size_t nl; (nl = buffer.find('\n')) != std::string::npos;) {
        std::optional<ChannelLine> l = ParseChannelLine(std::string_view(buffer).substr(0, nl));
        buffer.erase(0, nl + 1);
        if (!l) continue;
        if (l->verb == "term") term();
        if (l->verb == "kill") {
          if (!signalled) {
            term();
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
          }
          // A different signal: two of one kind could merge into one before the supervisor looks.
          ::kill(::getpid(), SIGINT);
        }
      }
    }
    if (!ended && Clock::now() - heard > limit) {
      ended = true;
      if (!signalled) {
        log_->warn(
            "no word from the launcher for {}s (--heartbeat-timeout): its link is cut or it is frozen; "
            "stopping the workers",
            silence_limit_s_);
        launcher_lost_ = true;
      }
      term();
    }
  }
}

}  // namespace distrun
