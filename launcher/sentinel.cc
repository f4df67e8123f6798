#include "launcher/sentinel.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>

#include "launcher/spawn.h"

namespace distrun {
namespace {

constexpr char kFingerprint = 'F';
constexpr char kQuit = 'Q';

// Field 22 of /proc/PID/stat: when the process started, in clock ticks since boot; 0 when unknown.
unsigned long long StartTime(const std::string& pid) {
  std::string text = ReadProcFile("/proc/" + pid + "/stat");
  size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(text.substr(close + 1));
  std::string field;
  // After "(comm)", state is field 3; starttime is field 22.
  for (int i = 3; i < 22; ++i) rest >> field;
  unsigned long long start = 0;
  rest >> start;
  return start;
}

bool ReadExact(int fd, void* buf, size_t size) {
  size_t got = 0;
  while (got < size) {
    ssize_t n = ::read(fd, static_cast<char*>(buf) + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

bool SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// Kills, round after round, every process started since `since` whose environment matches a
// fingerprint, until a round finds none (killed processes may have forked in between).
void Sweep(const std::vector<std::vector<std::string>>& fingerprints, unsigned long long since) {
  const pid_t self = ::getpid();
  for (int round = 0; round < 200; ++round) {
    int killed = 0;
    ForEachProcess([&](pid_t pid) {
      if (pid == self) return;
      const std::string id = std::to_string(pid);
      if (StartTime(id) < since) return;
      std::string environ_block = ReadProcFile("/proc/" + id + "/environ");
      for (const auto& fingerprint : fingerprints) {
        if (EnvironHasAll(environ_block, fingerprint)) {
          ::kill(pid, SIGKILL);
          ++killed;
          return;
        }
      }
    });
    if (killed == 0) return;
    ::usleep(20000);
  }
}

[[noreturn]] void RunSentinel(int fd, unsigned long long since) {
  try {
    ::setpgid(0, 0);  // out of distrun's group: a kill of that group must not take the sentinel too
    ::prctl(PR_SET_NAME, "distrun-sentinel");
    int null_fd = ::open("/dev/null", O_RDWR);
    if (null_fd >= 0) {
      ::dup2(null_fd, STDIN_FILENO);
      ::dup2(null_fd, STDOUT_FILENO);  // whoever reads distrun's stdout must see EOF when distrun ends
      if (null_fd > STDERR_FILENO) ::close(null_fd);
    }
    std::vector<std::vector<std::string>> fingerprints;
    while (true) {
      char type = 0;
      if (!ReadExact(fd, &type, 1)) break;  // distrun is gone without dismissing us
      if (type == kQuit) ::_exit(0);
      uint32_t size = 0;
      if (type != kFingerprint || !ReadExact(fd, &size, sizeof(size))) break;
      std::string payload(size, '\0');
      if (!ReadExact(fd, payload.data(), size)) break;
      std::vector<std::string> entries;
      for (size_t start = 0; start < payload.size();) {
        size_t end = payload.find('\0', start);
        if (end == std::string::npos) end = payload.size();
        entries.push_back(payload.substr(start, end - start));
        start = end + 1;
      }
      if (!entries.empty()) fingerprints.push_back(std::move(entries));
    }
    Sweep(fingerprints, since);
  } catch (...) {
  }
  ::_exit(0);
}

}  // namespace

Sentinel Sentinel::Start() {
  unsigned long long since = StartTime(std::to_string(::getpid()));
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    throw std::runtime_error(std::string("cannot start the sentinel: socketpair: ") + std::strerror(errno));
  }
  UniqueFd ours(fds[0]), theirs(fds[1]);
  pid_t pid = ::fork();
  if (pid < 0) {
    throw std::runtime_error(std::string("cannot start the sentinel: fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ours.Reset();  // else distrun's death would not be seen as EOF
    // Only the socket (and stdio) stay open: the sentinel must not keep anyone's pipe alive.
    int fd = ::fcntl(theirs.Release(), F_DUPFD_CLOEXEC, 3);
    for (int other = 3; other < fd; ++other) ::close(other);
    ::close_range(static_cast<unsigned>(fd) + 1, ~0U, 0);
    RunSentinel(fd, since);
  }
  Sentinel s;
  s.pid_ = pid;
  s.to_sentinel_ = std::move(ours);
  return s;
}

Sentinel::Sentinel(Sentinel&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      reaped_(other.reaped_),
      to_sentinel_(std::move(other.to_sentinel_)) {}

Sentinel& Sentinel::operator=(Sentinel&& other) noexcept {
  if (this != &other) {
    this->~Sentinel();
    pid_ = std::exchange(other.pid_, -1);
    reaped_ = other.reaped_;
    to_sentinel_ = std::move(other.to_sentinel_);
  }
  return *this;
}

Sentinel::~Sentinel() {
  // Not dismissed: distrun is unwinding after an error, so the sentinel sweeps before it is reaped.
  to_sentinel_.Reset();
  if (pid_ > 0 && !reaped_) {
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
}

void Sentinel::AddFingerprint(const std::vector<std::string>& entries) {
  if (!to_sentinel_ || entries.empty()) return;
  std::string payload;
  for (const std::string& e : entries) payload.append(e).push_back('\0');
  payload.pop_back();
  uint32_t size = static_cast<uint32_t>(payload.size());
  std::string message(1, kFingerprint);
  message.append(reinterpret_cast<const char*>(&size), sizeof(size));
  message += payload;
  if (!SendAll(to_sentinel_.get(), message)) to_sentinel_.Reset();
}

void Sentinel::Dismiss() {
  if (to_sentinel_) {
    std::string quit(1, kQuit);
    SendAll(to_sentinel_.get(), quit);
  }
  to_sentinel_.Reset();
  if (pid_ > 0 && !reaped_) {
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
  }
}

std::vector<std::string> FingerprintOf(const std::vector<std::pair<std::string, std::string>>& worker_env) {
  // The first family whose variables are all set; distrun's own names are the least likely to be changed
  // by a program before it starts children.
  static const std::vector<std::vector<const char*>> kGroups = {
      {"DISTRUN_RUN_ID", "DISTRUN_COORDINATOR_ADDRESS", "DISTRUN_PROCESS_ID"},
      {"TORCHELASTIC_RUN_ID", "RANK", "MASTER_ADDR", "MASTER_PORT"},
      {"KERAS_DISTRIBUTION_JOB_ADDRESSES", "KERAS_DISTRIBUTION_PROCESS_ID"},
      {"JAX_COORDINATOR_ADDRESS"},
  };
  for (const auto& group : kGroups) {
    std::vector<std::string> entries;
    for (const char* name : group) {
      for (const auto& [n, v] : worker_env) {
        if (n == name) entries.push_back(n + "=" + v);
      }
    }
    if (entries.size() == group.size()) return entries;
  }
  return {};
}

bool EnvironHasAll(std::string_view environ_block, const std::vector<std::string>& entries) {
  if (entries.empty()) return false;
  for (const std::string& entry : entries) {
    bool found = false;
    size_t start = 0;
    while (start < environ_block.size()) {
      size_t end = environ_block.find('\0', start);
      if (end == std::string_view::npos) end = environ_block.size();
      if (environ_block.substr(start, end - start) == entry) {
        found = true;
        break;
      }
      start = end + 1;
    }
    if (!found) return false;
  }
  return true;
}

}  // namespace distrun
