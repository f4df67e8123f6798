#include "launcher/process/spawn.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <system_error>

#include "launcher/process/cpu_set.h"
#include "launcher/process/signal_names.h"

namespace distrun {
namespace {

// The child runs in distrun's memory on a stack of its own until it execs (CloneChild). AddressSanitizer
// must not instrument what runs there: it would poison shadow memory distrun shares and take the foreign
// stack for a corrupted one.
#define DISTRUN_CHILD_SIDE __attribute__((no_sanitize("address")))

// What the child leaves in the parent's memory (CLONE_VM) when it cannot exec, before it exits; untouched
// when exec succeeds. The parent reads it only once the child has exec'd or exited (CLONE_VFORK), as
// glibc's posix_spawn reads its child's errno: no report pipe, four system calls less per worker.
struct ChildReport {
  int stage;      // kStage*
  int error;      // errno
  int candidate;  // index into the exec candidates (for EACCES: the file that was refused)
};
constexpr int kStageSetup = 1;
constexpr int kStageExec = 2;
constexpr int kStageAffinity = 3;

[[noreturn]] DISTRUN_CHILD_SIDE void ChildFail(ChildReport* report, int stage, int error, int candidate) {
  report->stage = stage;
  report->error = error;
  report->candidate = candidate;
  ::_exit(127);
}

// Puts `fd` on `target`, clearing close-on-exec even when it is already there.
DISTRUN_CHILD_SIDE bool MoveFd(int fd, int target) {
  if (fd == target) return ::fcntl(fd, F_SETFD, 0) == 0;
  return ::dup2(fd, target) == target;
}

// Everything the child uses, prepared before it starts: the child shares distrun's memory until it execs, so
// it only makes system calls and writes nothing but its own stack.
struct ChildPlan {
  pid_t parent = 0;
  int stdin_fd = -1;  // -1: keep distrun's stdin
  int stdout_fd = -1;
  int stderr_fd = -1;
  ChildReport* report = nullptr;  // the parent's, written only on failure
  bool foreground = false;
  std::vector<const char*> candidates;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  char** sh_argv = nullptr;  // {"/bin/sh", <candidate>, args..., nullptr} for scripts without #!
  const std::vector<unsigned long>* cpu_mask = nullptr;  // CpuMaskWords of SpawnSpec::cpus; null: inherit
  const std::vector<int>* reset_signals = nullptr;       // NonDefaultSignals()
  const rlimit* descriptor_limit = nullptr;              // null: inherit distrun's
};

[[noreturn]] DISTRUN_CHILD_SIDE void RunChild(const ChildPlan& p) {
  // Own process group: distrun signals the worker and everything it starts with kill(-pgid).
  ::setpgid(0, 0);
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) ChildFail(p.report, kStageSetup, errno, -1);
  // distrun may have died between fork and prctl; the death signal would then never come.
  if (::getppid() != p.parent) ::_exit(127);
  // Under Yama ptrace_scope=1 only an ancestor or a registered tracer may attach: this lets the gdb that
  // distrun starts to collect a hung worker's stack (a sibling, not an ancestor) attach. Lasts across exec,
  // not to the worker's own children. EINVAL without Yama: nothing to do.
  ::prctl(PR_SET_PTRACER, static_cast<unsigned long>(p.parent), 0UL, 0UL, 0UL);
  // Before the worker can read the terminal (as a shell does, in both parent and child; SIGTTOU is still
  // ignored here, so a background caller may do it).
  if (p.foreground) ::tcsetpgrp(STDIN_FILENO, ::getpid());
  if (p.descriptor_limit != nullptr && ::setrlimit(RLIMIT_NOFILE, p.descriptor_limit) != 0) {
    ChildFail(p.report, kStageSetup, errno, -1);
  }
  // Before exec, so the worker's first instruction already runs on its CPUs (and its threads inherit them).
  if (p.cpu_mask != nullptr) {
    if (int error = ApplyCpuMask(*p.cpu_mask); error != 0) ChildFail(p.report, kStageAffinity, error, -1);
  }

  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  // Only those not at their default: one system call each, where resetting all 64 cost 0.1 ms per worker.
  for (int sig : *p.reset_signals) ::sigaction(sig, &dfl, nullptr);
  sigset_t empty;
  sigemptyset(&empty);
  ::sigprocmask(SIG_SETMASK, &empty, nullptr);

  if (p.stdin_fd >= 0 && !MoveFd(p.stdin_fd, STDIN_FILENO)) ChildFail(p.report, kStageSetup, errno, -1);
  if (!MoveFd(p.stdout_fd, STDOUT_FILENO)) ChildFail(p.report, kStageSetup, errno, -1);
  if (!MoveFd(p.stderr_fd, STDERR_FILENO)) ChildFail(p.report, kStageSetup, errno, -1);

  // execvp's rules, with the worker's PATH rather than distrun's.
  int error = ENOENT;
  int failed = -1;
  bool denied = false;
  for (size_t i = 0; i < p.candidates.size(); ++i) {
    const int index = static_cast<int>(i);
    ::execve(p.candidates[i], p.argv, p.envp);
    int e = errno;
    if (e == ENOEXEC) {
      // A script without "#!": execvp runs it with /bin/sh.
      p.sh_argv[1] = const_cast<char*>(p.candidates[i]);
      ::execve("/bin/sh", p.sh_argv, p.envp);
      ChildFail(p.report, kStageExec, errno, index);
    }
    if (e == EACCES) {
      if (!denied) failed = index;
      denied = true;
      continue;
    }
    if (e == ENOENT || e == ENOTDIR || e == ESTALE || e == ENODEV || e == ETIMEDOUT) {
      if (!denied) failed = index;
      continue;
    }
    ChildFail(p.report, kStageExec, e, index);
  }
  if (denied) error = EACCES;
  ChildFail(p.report, kStageExec, error, failed);
}

DISTRUN_CHILD_SIDE int RunChildEntry(void* plan) { RunChild(*static_cast<const ChildPlan*>(plan)); }

// The child's stack while it runs in distrun's memory (it needs a few hundred bytes; the rest is margin).
constexpr size_t kChildStackBytes = 64 * 1024;

// Starts the child as posix_spawn does: clone(CLONE_VM | CLONE_VFORK) runs it in distrun's memory on a stack
// of its own, and this thread waits until it has exec'd or exited. A fork would copy distrun's page tables
// (gRPC's threads, a 20 MB binary) and make distrun take copy-on-write faults afterwards, on every worker.
// All signals stay blocked until the child has reset their handlers, so no handler of distrun's runs in it.
pid_t CloneChild(ChildPlan& plan) {
  std::unique_ptr<char[]> stack(new char[kChildStackBytes]);
  sigset_t all, saved;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &saved);
  pid_t pid = ::clone(RunChildEntry, stack.get() + kChildStackBytes, CLONE_VM | CLONE_VFORK | SIGCHLD, &plan);
  int error = errno;
  ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  errno = error;
  return pid;
}

UniqueFd OpenDevNull() {
  int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw SpawnError(SpawnError::Kind::kSystem, errno,
                     std::string("cannot open /dev/null: ") + std::strerror(errno));
  return UniqueFd(fd);
}

void MakePipe(UniqueFd& read_end, UniqueFd& write_end) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw SpawnError(SpawnError::Kind::kSystem, errno,
                     std::string("cannot create a pipe for a worker: ") + std::strerror(errno));
  }
  read_end.Reset(fds[0]);
  write_end.Reset(fds[1]);
}

std::string ExecFailureMessage(const std::string& command, const ChildReport& report,
                               const std::vector<std::string>& candidates, const std::string* path) {
  const bool has_slash = command.find('/') != std::string::npos;
  const std::string file = report.candidate >= 0 && static_cast<size_t>(report.candidate) < candidates.size()
                               ? candidates[static_cast<size_t>(report.candidate)]
                               : command;
  switch (report.error) {
    case ENOENT:
    case ENOTDIR:
      if (has_slash) return command + ": not found; check the path (no such file)";
      return command + ": not found; check the name, or give its path (searched the worker's PATH=" +
             (path ? *path : std::string("(unset: /bin:/usr/bin)")) + ")";
    case EACCES: {
      struct stat st;
      if (::stat(file.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        return command + ": is a directory, not a program; name the program to run";
      }
      return command + ": permission denied" + (file != command ? " (" + file + ")" : std::string()) +
             "; make it executable (chmod +x) or run it through its interpreter";
    }
    default:
      return command + ": cannot execute " + (file != command ? "(" + file + ") " : std::string()) + "(" +
             std::strerror(report.error) + ")";
  }
}

}  // namespace

std::vector<int> NonDefaultSignals() {
  std::vector<int> out;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    struct sigaction current;
    // EINVAL for the real-time signals glibc keeps for itself: they are not the worker's concern.
    if (::sigaction(sig, nullptr, &current) != 0) continue;
    bool is_default = (current.sa_flags & SA_SIGINFO) == 0 && current.sa_handler == SIG_DFL;
    if (!is_default) out.push_back(sig);
  }
  return out;
}

std::vector<std::string> ExecCandidates(const std::string& file, const std::string* path) {
  if (file.empty()) return {};
  if (file.find('/') != std::string::npos) return {file};
  // glibc's default when PATH is unset (confstr _CS_PATH).
  const std::string search = path ? *path : std::string("/bin:/usr/bin");
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t end = search.find(':', start);
    std::string dir = search.substr(start, end == std::string::npos ? std::string::npos : end - start);
    // An empty PATH element means the current directory.
    out.push_back(dir.empty() ? file : dir + (dir.back() == '/' ? "" : "/") + file);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

Child Child::Start(const SpawnSpec& spec, int dev_null) {
  if (spec.argv.empty() || spec.argv.front().empty()) {
    throw SpawnError(SpawnError::Kind::kNotFound, ENOENT, "the worker command is empty");
  }
  const std::string* path = nullptr;
  for (const std::string& kv : spec.env) {
    if (kv.starts_with("PATH=")) path = &kv;
  }
  std::string path_value = path ? path->substr(5) : std::string();
  std::vector<std::string> candidates = ExecCandidates(spec.argv.front(), path ? &path_value : nullptr);

  std::vector<char*> argv;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  std::vector<char*> sh_argv;
  sh_argv.push_back(const_cast<char*>("/bin/sh"));
  sh_argv.push_back(nullptr);  // the script, filled in by the child
  for (size_t i = 1; i < spec.argv.size(); ++i) sh_argv.push_back(const_cast<char*>(spec.argv[i].c_str()));
  sh_argv.push_back(nullptr);

  Child child;
  UniqueFd own_dev_null, in_r;
  if (spec.stdin_pipe) {
    MakePipe(in_r, child.stdin_);
    dev_null = in_r.get();
  } else if (!spec.inherit_stdin && dev_null < 0) {
    own_dev_null = OpenDevNull();
    dev_null = own_dev_null.get();
  }
  UniqueFd out_w, err_w;
  MakePipe(child.stdout_, out_w);
  MakePipe(child.stderr_, err_w);

  ChildReport report{};
  ChildPlan plan;
  plan.parent = ::getpid();
  plan.stdin_fd = spec.inherit_stdin && !spec.stdin_pipe ? -1 : dev_null;
  plan.stdout_fd = out_w.get();
  plan.stderr_fd = err_w.get();
  plan.report = &report;
  plan.foreground = spec.foreground && spec.inherit_stdin;
  for (const std::string& c : candidates) plan.candidates.push_back(c.c_str());
  plan.argv = argv.data();
  plan.envp = envp.data();
  plan.sh_argv = sh_argv.data();
  std::vector<int> own_signals;
  if (spec.non_default_signals == nullptr) own_signals = NonDefaultSignals();
  plan.reset_signals = spec.non_default_signals != nullptr ? spec.non_default_signals : &own_signals;
  if (spec.descriptor_limit) plan.descriptor_limit = &*spec.descriptor_limit;
  std::vector<unsigned long> cpu_mask = CpuMaskWords(spec.cpus);
  if (!spec.cpus.empty()) plan.cpu_mask = &cpu_mask;

  pid_t pid = CloneChild(plan);
  if (pid < 0) {
    throw SpawnError(SpawnError::Kind::kSystem, errno,
                     std::string("cannot start a worker: clone: ") + std::strerror(errno));
  }

  child.pid_ = pid;
  // No setpgid(pid, pid) here as after a fork: CLONE_VFORK returns once the child has exec'd or exited, so
  // its own setpgid came first and the group exists (the call here always failed with EACCES).
  if (plan.foreground) ::tcsetpgrp(STDIN_FILENO, pid);
  out_w.Reset();
  err_w.Reset();
  in_r.Reset();

  if (report.stage != 0) {
    child.Wait();
    if (report.stage == kStageAffinity) {
      throw SpawnError(SpawnError::Kind::kSystem, report.error,
                       "cannot pin a worker to CPUs " + FormatCpuList(spec.cpus) + " (--cpu-bind): " +
                           std::strerror(report.error) + "; check the CPUs distrun may use (taskset -p " +
                           std::to_string(::getpid()) + ") or use --cpu-bind none");
    }
    if (report.stage == kStageSetup) {
      throw SpawnError(SpawnError::Kind::kSystem, report.error,
                       "cannot set up a worker process: " + std::string(std::strerror(report.error)));
    }
    SpawnError::Kind kind = report.error == ENOENT || report.error == ENOTDIR
                                ? SpawnError::Kind::kNotFound
                                : SpawnError::Kind::kNotExecutable;
    throw SpawnError(kind, report.error,
                     ExecFailureMessage(spec.argv.front(), report, candidates, path ? &path_value : nullptr));
  }
  // A pipe's read end has no other status flag to keep.
  for (const UniqueFd* fd : {&child.stdout_, &child.stderr_}) ::fcntl(fd->get(), F_SETFL, O_NONBLOCK);
  if (child.stdin_) ::fcntl(child.stdin_.get(), F_SETFL, O_NONBLOCK);
  return child;
}

Spawner::Spawner(size_t threads) : threads_(std::max<size_t>(threads, 1)) {}

Spawner::~Spawner() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (PromptThread& t : helpers_) t.join();
}

std::vector<SpawnOutcome> Spawner::Start(size_t count, const MakeSpec& make) {
  std::vector<SpawnSpec> specs(count);
  std::vector<SpawnOutcome> out(count);
  // One /dev/null for every worker's stdin, open until the batch has started (if it cannot be opened,
  // each start tries and reports why).
  UniqueFd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const size_t wanted = std::min(threads_, count);
  while (helpers_.size() + 1 < wanted) {
    try {
      helpers_.emplace_back([this] { HelperLoop(); });
    } catch (const std::system_error&) {
      break;  // fewer threads only make it slower
    }
  }
  std::unique_lock lock(mu_);
  specs_ = &specs;
  out_ = &out;
  dev_null_ = dev_null.get();
  made_ = 0;
  next_ = 0;
  auto end_batch = [&] {
    done_cv_.wait(lock, [this] { return busy_ == 0; });
    specs_ = nullptr;
    out_ = nullptr;
    dev_null_ = -1;
  };
  // Helpers read a spec only below made_, which moves under the lock: the spec is complete by then.
  for (size_t i = 0; i < count; ++i) {
    lock.unlock();
    try {
      make(i, specs[i]);
    } catch (...) {
      lock.lock();
      next_ = made_;  // nothing more is taken; those taken finish, and `out` ends them as it unwinds
      end_batch();
      throw;
    }
    lock.lock();
    made_ = i + 1;
    work_cv_.notify_one();
  }
  Work(lock);
  end_batch();
  return out;
}

void Spawner::HelperLoop() {
  std::unique_lock lock(mu_);
  while (true) {
    work_cv_.wait(lock, [&] { return stopping_ || (specs_ != nullptr && next_ < made_); });
    if (stopping_) return;
    Work(lock);
  }
}

void Spawner::Work(std::unique_lock<std::mutex>& lock) {
  ++busy_;
  while (specs_ != nullptr && next_ < made_) {
    const size_t i = next_++;
    const SpawnSpec& spec = (*specs_)[i];
    SpawnOutcome& outcome = (*out_)[i];
    const int dev_null = dev_null_;
    lock.unlock();
    try {
      outcome.child = Child::Start(spec, dev_null);
    } catch (...) {
      outcome.error = std::current_exception();
    }
    lock.lock();
  }
  if (--busy_ == 0) done_cv_.notify_all();
}

Child::Child(Child&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      reaped_(other.reaped_),
      group_gone_(other.group_gone_),
      wait_status_(other.wait_status_),
      stdout_(std::move(other.stdout_)),
      stderr_(std::move(other.stderr_)),
      stdin_(std::move(other.stdin_)) {}

Child& Child::operator=(Child&& other) noexcept {
  if (this != &other) {
    KillAndReap();
    pid_ = std::exchange(other.pid_, -1);
    reaped_ = other.reaped_;
    group_gone_ = other.group_gone_;
    wait_status_ = other.wait_status_;
    stdout_ = std::move(other.stdout_);
    stderr_ = std::move(other.stderr_);
    stdin_ = std::move(other.stdin_);
  }
  return *this;
}

Child::~Child() { KillAndReap(); }

void Child::KillAndReap() {
  if (pid_ > 0 && !reaped_) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    Wait();
  }
}

void Child::SetReaped(int wait_status) {
  reaped_ = true;
  wait_status_ = wait_status;
}

int Child::Wait() {
  if (pid_ <= 0 || reaped_) return wait_status_;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, 0);
  } while (r < 0 && errno == EINTR);
  SetReaped(r == pid_ ? status : 0);
  return wait_status_;
}

bool Child::SignalGroup(int signal) {
  if (pid_ <= 0 || group_gone_) return false;
  if (::kill(-pid_, signal) == 0) return true;
  // Until the reap the zombie leader still counts as a member: ESRCH means something else then.
  if (errno == ESRCH && reaped_) group_gone_ = true;
  return false;
}

std::string DescribeWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) return "exit code " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    return "signal " + SignalName(WTERMSIG(wait_status)) + (WCOREDUMP(wait_status) ? " (core dumped)" : "");
  }
  return "status " + std::to_string(wait_status);
}

int ExitCodeOf(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

std::string ReadProcFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return {};
  std::string out;
  char buf[4096];
  while (true) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return {};
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

void ForEachProcess(const std::function<void(pid_t)>& visit) {
  std::unique_ptr<DIR, int (*)(DIR*)> proc(::opendir("/proc"), ::closedir);
  if (!proc) return;
  while (dirent* entry = ::readdir(proc.get())) {
    const char* name = entry->d_name;
    if (name[0] < '1' || name[0] > '9') continue;
    visit(static_cast<pid_t>(std::atol(name)));
  }
}

std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> out;
  ForEachProcess([&](pid_t pid) {
    std::string text = ReadProcFile("/proc/" + std::to_string(pid) + "/stat");
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so parse after the last ')'.
    size_t close = text.rfind(')');
    if (close == std::string::npos) return;
    std::istringstream rest(text.substr(close + 1));
    std::string state;
    long ppid = 0;
    if (rest >> state >> ppid && ppid == parent) out.push_back(pid);
  });
  return out;
}

namespace {

// No child at all (the usual answer once a job is over): the kernel says so in one call, where the
// children files cost three per thread.
bool NoChildLeft() {
  siginfo_t info{};
  return ::waitid(P_ALL, 0, &info, WEXITED | WSTOPPED | WCONTINUED | WNOHANG | WNOWAIT) < 0 &&
         errno == ECHILD;
}

std::string ChildrenFile(const std::string& task) { return "/proc/self/task/" + task + "/children"; }

// Appends the pids a /proc/self/task/T/children file lists.
void ReadChildrenFile(const std::string& path, std::vector<pid_t>& out) {
  std::istringstream pids(ReadProcFile(path));
  long pid = 0;
  while (pids >> pid) out.push_back(static_cast<pid_t>(pid));
}

}  // namespace

std::vector<pid_t> OwnChildren() {
  if (NoChildLeft()) return {};
  // Without CONFIG_PROC_CHILDREN no thread has the file: the full scan still finds everything.
  if (::access(ChildrenFile(std::to_string(::getpid())).c_str(), R_OK) != 0) return ChildrenOf(::getpid());
  std::vector<pid_t> out;
  DIR* tasks = ::opendir("/proc/self/task");
  if (tasks == nullptr) return ChildrenOf(::getpid());
  while (dirent* entry = ::readdir(tasks)) {
    if (entry->d_name[0] == '.') continue;
    // Each thread lists the children it forked; orphans re-parented to this subreaper appear under one.
    ReadChildrenFile(ChildrenFile(entry->d_name), out);
  }
  ::closedir(tasks);
  return out;
}

std::vector<pid_t> AdoptedChildren() {
  if (NoChildLeft()) return {};
  const std::string path = ChildrenFile(std::to_string(::getpid()));
  if (::access(path.c_str(), R_OK) != 0) return OwnChildren();
  std::vector<pid_t> out;
  ReadChildrenFile(path, out);
  return out;
}

void EnsureStandardFds() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
      // open() returns the lowest free descriptor: this one. Not close-on-exec: workers inherit stdio.
      int opened = ::open("/dev/null", O_RDWR);
      if (opened >= 0 && opened != fd) ::close(opened);
    }
  }
}

}  // namespace distrun
