#include "launcher/supervise/sentinel.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "launcher/process/close_from.h"
#include "launcher/process/companion_files.h"
#include "launcher/process/spawn.h"

namespace distrun {
namespace {

constexpr char kFingerprint = 'F';
constexpr char kQuit = 'Q';
constexpr char kWatch = 'W';  // + uint32 milliseconds (0: stop watching)
constexpr char kPulse = 'P';
constexpr char kScratch = 'D';  // + uint32 size + a directory of distrun's own, removed after a sweep

// What the sweep needs of /proc/PID/stat: when the process started, and whether its environment can ever be
// read (a zombie's and a kernel thread's never can).
struct ProcStat {
  unsigned long long start = 0;
  bool has_environ = false;
};

ProcStat ReadStat(const std::string& pid) {
  std::string text = ReadProcFile("/proc/" + pid + "/stat");
  size_t close = text.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream rest(text.substr(close + 1));
  // After "(comm)": state (field 3), ..., flags (field 9), ..., starttime (field 22).
  std::string state, field;
  unsigned long long flags = 0;
  rest >> state;
  for (int i = 4; i < 9; ++i) rest >> field;
  rest >> flags;
  for (int i = 10; i < 22; ++i) rest >> field;
  ProcStat s;
  rest >> s.start;
  constexpr unsigned long long kPfKthread = 0x00200000;
  s.has_environ = state != "Z" && state != "X" && (flags & kPfKthread) == 0;
  return s;
}

// Field 22 of /proc/PID/stat: when the process started, in clock ticks since boot; 0 when unknown.
unsigned long long StartTime(const std::string& pid) { return ReadStat(pid).start; }

// distrun's messages, read through a buffer: one read takes what distrun sent at once (a launch's 64
// fingerprints were 192 reads, on the CPU beside the one starting the workers).
class Inbox {
 public:
  explicit Inbox(int fd) : fd_(fd), buffer_(64 * 1024) {}

  // Whether a message (or part of one) is here already: no need to wait for the socket.
  bool holds_data() const { return start_ < end_; }

  bool ReadExact(void* out, size_t size) {
    char* to = static_cast<char*>(out);
    while (size > 0) {
      if (start_ == end_ && !Fill()) return false;
      const size_t n = std::min(size, end_ - start_);
      std::memcpy(to, buffer_.data() + start_, n);
      start_ += n;
      to += n;
      size -= n;
    }
    return true;
  }

 private:
  bool Fill() {
    start_ = end_ = 0;
    while (true) {
      ssize_t n = ::read(fd_, buffer_.data(), buffer_.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      end_ = static_cast<size_t>(n);
      return true;
    }
  }

  int fd_;
  std::vector<char> buffer_;
  size_t start_ = 0, end_ = 0;
};

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
// fingerprint, until a round finds none (killed processes may have forked in between). A process inside
// execve has no environment to read for a moment (the kernel is replacing its memory): a round that met
// one whose environment should be readable goes again, or that process would run on, a worker that
// escaped. Each round is a few milliseconds of reading /proc; 200 rounds are 4 s at most (a process of the
// user's started during the job with an empty environment, `env -i`, costs a sweep its 200 short rounds).
void Sweep(const std::vector<std::vector<std::string>>& fingerprints, unsigned long long since) {
  const pid_t self = ::getpid();
  for (int round = 0; round < 200; ++round) {
    int killed = 0;
    int unread = 0;
    ForEachProcess([&](pid_t pid) {
      if (pid == self) return;
      const std::string id = std::to_string(pid);
      const ProcStat stat = ReadStat(id);
      if (stat.start < since) return;
      std::string environ_block = ReadProcFile("/proc/" + id + "/environ");
      if (environ_block.empty()) {
        // Gone meanwhile (its stat unreadable now), another user's (never a worker), or unreadable for the
        // moment: look again next round.
        struct stat owner {};
        if (stat.has_environ && ::stat(("/proc/" + id).c_str(), &owner) == 0 && owner.st_uid == ::geteuid() &&
            ReadStat(id).start == stat.start)
          ++unread;
        return;
      }
      for (const auto& fingerprint : fingerprints) {
        if (EnvironHasAll(environ_block, fingerprint)) {
          ::kill(pid, SIGKILL);
          ++killed;
          return;
        }
      }
    });
    if (killed == 0 && unread == 0) return;
    ::usleep(killed > 0 ? 20000 : 2000);
  }
}

// The sentinel's descriptor for its socket when it is a program of its own.
constexpr int kProgramFd = 3;

// Starts `program` (distrun-sentinel) as posix_spawn does, in distrun's memory until it execs: distrun is
// not copied, unlike a fork, and the new program's start runs beside distrun. Returns -1 with errno set.
pid_t SpawnProgram(const std::string& program, int fd, unsigned long long since) {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  if (::posix_spawn_file_actions_init(&actions) != 0) return -1;
  if (::posix_spawnattr_init(&attr) != 0) {
    ::posix_spawn_file_actions_destroy(&actions);
    return -1;
  }
  // Its own process group at once (a kill of distrun's group must not take it too); the signal mask is
  // distrun's, so the signals distrun handles stay blocked in it, and a Ctrl-C does not end it.
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  ::posix_spawnattr_setpgroup(&attr, 0);
  ::posix_spawn_file_actions_adddup2(&actions, fd, kProgramFd);
  // Whoever reads distrun's stdout must see EOF when distrun ends; stderr stays for its own messages.
  ::posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  std::string fd_text = std::to_string(kProgramFd);
  std::string since_text = std::to_string(since);
  char* argv[] = {const_cast<char*>(program.c_str()), fd_text.data(), since_text.data(), nullptr};
  char* envp[] = {nullptr};
  pid_t pid = -1;
  int error = ::posix_spawn(&pid, program.c_str(), &actions, &attr, argv, envp);
  ::posix_spawn_file_actions_destroy(&actions);
  ::posix_spawnattr_destroy(&attr);
  if (error != 0) {
    errno = error;
    return -1;
  }
  return pid;
}

}  // namespace

[[noreturn]] void RunSentinel(int fd, unsigned long long since) {
  try {
    // Only the socket and stdio stay open: the sentinel must not keep anyone's pipe alive, not even one
    // distrun inherited without close-on-exec.
    for (int other = STDERR_FILENO + 1; other < fd; ++other) ::close(other);
    CloseFrom(fd + 1);
    ::setpgid(0, 0);  // out of distrun's group: a kill of that group must not take the sentinel too
    ::prctl(PR_SET_NAME, "distrun-sentinel");
    // It writes nothing, but may have started before distrun ignored SIGPIPE (SentinelStart).
    ::signal(SIGPIPE, SIG_IGN);
    int null_fd = ::open("/dev/null", O_RDWR);
    if (null_fd >= 0) {
      ::dup2(null_fd, STDIN_FILENO);
      ::dup2(null_fd, STDOUT_FILENO);  // whoever reads distrun's stdout must see EOF when distrun ends
      if (null_fd > STDERR_FILENO) ::close(null_fd);
    }
    const pid_t distrun = ::getppid();
    std::vector<std::vector<std::string>> fingerprints;
    std::vector<std::string> scratch;
    uint32_t watch_ms = 0;
    // After the sweep: distrun's private directories (progress board, stack dumps, torch's error files),
    // which a distrun killed with SIGKILL cannot remove itself.
    auto clean = [&] {
      for (const std::string& dir : scratch) {
        std::error_code ignored;
        std::filesystem::remove_all(dir, ignored);
      }
    };
    Inbox inbox(fd);
    while (true) {
      if (watch_ms > 0 && !inbox.holds_data()) {
        pollfd p{fd, POLLIN, 0};
        int ready = ::poll(&p, 1, static_cast<int>(watch_ms));
        if (ready < 0 && errno == EINTR) continue;
        if (ready == 0) {
          // distrun is frozen (stopped, hung): it cannot stop its workers, and node 0 has given up on it.
          // Its workers go, and distrun too, so that neither GPUs nor the Slurm step are held.
          Sweep(fingerprints, since);
          ::kill(distrun, SIGKILL);
          clean();
          ::_exit(0);
        }
      }
      char type = 0;
      if (!inbox.ReadExact(&type, 1)) break;  // distrun is gone without dismissing us
      if (type == kQuit) ::_exit(0);
      if (type == kPulse) continue;
      if (type == kWatch) {
        if (!inbox.ReadExact(&watch_ms, sizeof(watch_ms))) break;
        continue;
      }
      uint32_t size = 0;
      if ((type != kFingerprint && type != kScratch) || !inbox.ReadExact(&size, sizeof(size))) break;
      std::string payload(size, '\0');
      if (!inbox.ReadExact(payload.data(), size)) break;
      if (type == kScratch) {
        if (!payload.empty()) scratch.push_back(std::move(payload));
        continue;
      }
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
    clean();
  } catch (...) {
  }
  ::_exit(0);
}

SentinelStart::SentinelStart(std::string program) {
  EnsureStandardFds();
  thread_ = PromptThread([this, program = std::move(program)] {
    try {
      sentinel_ = Sentinel::Start(program, /*fork_if_that_fails=*/false);
    } catch (...) {
      error_ = std::current_exception();
    }
  });
}

SentinelStart::~SentinelStart() { Finish(); }

void SentinelStart::Finish() {
  if (thread_.joinable()) thread_.join();
}

Sentinel SentinelStart::Take() {
  Finish();
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  return std::move(sentinel_);
}

std::string FindSentinelProgram(const std::string& self) {
  return FindCompanionFile(self, kSentinelProgram, X_OK);
}

Sentinel Sentinel::Start(const std::string& program, bool fork_if_that_fails) {
  unsigned long long since = StartTime(std::to_string(::getpid()));
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    throw std::runtime_error(std::string("cannot start the sentinel: socketpair: ") + std::strerror(errno));
  }
  UniqueFd ours(fds[0]), theirs(fds[1]);
  if (!program.empty()) {
    // Above the descriptor the sentinel expects it on, so that the dup2 never meets itself.
    UniqueFd high(::fcntl(theirs.get(), F_DUPFD_CLOEXEC, kProgramFd + 1));
    pid_t pid = high ? SpawnProgram(program, high.get(), since) : -1;
    if (pid > 0) {
      Sentinel s;
      s.pid_ = pid;
      s.to_sentinel_ = std::move(ours);
      return s;
    }
    if (!fork_if_that_fails) {
      throw std::runtime_error("cannot start " + program + ": " + std::strerror(errno));
    }
    // A program that cannot be started is not fatal: the fork below does the same work.
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    throw std::runtime_error(std::string("cannot start the sentinel: fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ours.Reset();                          // else distrun's death would not be seen as EOF
    RunSentinel(theirs.Release(), since);  // which closes every other descriptor but stdio
  }
  // Also here, so that the sentinel is out of distrun's group before anything can signal that group.
  ::setpgid(pid, pid);
  Sentinel s;
  s.pid_ = pid;
  s.to_sentinel_ = std::move(ours);
  return s;
}

Sentinel::Sentinel(Sentinel&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      reaped_(other.reaped_),
      released_(other.released_),
      to_sentinel_(std::move(other.to_sentinel_)) {}

Sentinel& Sentinel::operator=(Sentinel&& other) noexcept {
  if (this != &other) {
    this->~Sentinel();
    pid_ = std::exchange(other.pid_, -1);
    reaped_ = other.reaped_;
    released_ = other.released_;
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

void Sentinel::AddFingerprints(const std::vector<std::vector<std::string>>& fingerprints) {
  if (!to_sentinel_) return;
  // One send for all: each message would otherwise wake the sentinel while the workers start.
  std::string message;
  for (const std::vector<std::string>& entries : fingerprints) {
    if (entries.empty()) continue;
    std::string payload;
    for (const std::string& e : entries) payload.append(e).push_back('\0');
    payload.pop_back();
    uint32_t size = static_cast<uint32_t>(payload.size());
    message.push_back(kFingerprint);
    message.append(reinterpret_cast<const char*>(&size), sizeof(size));
    message += payload;
  }
  if (!message.empty() && !SendAll(to_sentinel_.get(), message)) to_sentinel_.Reset();
}

void Sentinel::AddScratch(const std::string& dir) {
  if (!to_sentinel_ || dir.empty()) return;
  uint32_t size = static_cast<uint32_t>(dir.size());
  std::string message(1, kScratch);
  message.append(reinterpret_cast<const char*>(&size), sizeof(size));
  message += dir;
  if (!SendAll(to_sentinel_.get(), message)) to_sentinel_.Reset();
}

void Sentinel::Watch(std::chrono::milliseconds timeout) {
  if (!to_sentinel_) return;
  std::string message(1, kWatch);
  uint32_t ms = static_cast<uint32_t>(std::clamp<int64_t>(timeout.count(), 0, INT32_MAX));
  message.append(reinterpret_cast<const char*>(&ms), sizeof(ms));
  if (!SendAll(to_sentinel_.get(), message)) to_sentinel_.Reset();
}

void Sentinel::Pulse() {
  if (!to_sentinel_) return;
  std::string message(1, kPulse);
  if (!SendAll(to_sentinel_.get(), message)) to_sentinel_.Reset();
}

void Sentinel::Release() {
  released_ = true;
  if (to_sentinel_) {
    std::string quit(1, kQuit);
    SendAll(to_sentinel_.get(), quit);
  }
  to_sentinel_.Reset();
}

void Sentinel::Dismiss() {
  Release();
  if (pid_ > 0 && !reaped_) {
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
  }
}

std::vector<std::string> FingerprintOf(const std::vector<std::pair<std::string, std::string>>& worker_env) {
  // The first family whose variables are all set; distrun's own names are the least likely to be changed
  // by a program before it starts children. The epoch is part of it: in an elastic job another node may
  // run the same rank in a later epoch (a spare in a lost node's seat), on the same host in per-task mode,
  // and a lost node's sentinel must leave that worker alone.
  // string_views, whose lengths are known: most names differ in length from the one sought (this runs for
  // every worker before the first starts).
  using namespace std::string_view_literals;
  static const std::vector<std::vector<std::string_view>> kGroups = {
      {"DISTRUN_RUN_ID"sv, "DISTRUN_COORDINATOR_ADDRESS"sv, "DISTRUN_PROCESS_ID"sv, "DISTRUN_EPOCH"sv},
      {"TORCHELASTIC_RUN_ID"sv, "RANK"sv, "MASTER_ADDR"sv, "MASTER_PORT"sv, "TORCHELASTIC_RESTART_COUNT"sv},
      {"KERAS_DISTRIBUTION_JOB_ADDRESSES"sv, "KERAS_DISTRIBUTION_PROCESS_ID"sv},
      {"JAX_COORDINATOR_ADDRESS"sv},
  };
  for (const auto& group : kGroups) {
    std::vector<std::string> entries;
    for (std::string_view name : group) {
      for (const auto& [n, v] : worker_env) {
        if (std::string_view(n) == name) entries.push_back(n + "=" + v);
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
