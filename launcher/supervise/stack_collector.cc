#include "launcher/supervise/stack_collector.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "detect/parse.h"
#include "launcher/process/signal_names.h"
#include "launcher/process/spawn.h"

namespace distrun {
namespace {

using Clock = std::chrono::steady_clock;

// How long a dump file must stay the same size before it is taken as complete: faulthandler writes it line
// by line from the signal handler, and gives no sign of its end.
constexpr auto kQuietTime = std::chrono::milliseconds(30);
constexpr auto kPollInterval = std::chrono::milliseconds(5);

struct ProcessInfo {
  pid_t pid = 0;
  char state = '?';
  pid_t ppid = 0;
  pid_t pgid = 0;
  std::string comm;
};

// From /proc/PID/stat: "pid (comm) state ppid pgrp ..."; comm may hold spaces and parentheses.
std::optional<ProcessInfo> ReadProcess(pid_t pid) {
  const std::string text = ReadProcFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t open = text.find('(');
  const size_t close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return std::nullopt;
  ProcessInfo info;
  info.pid = pid;
  info.comm = text.substr(open + 1, close - open - 1);
  std::istringstream rest(text.substr(close + 1));
  long ppid = 0, pgid = 0;
  if (!(rest >> info.state >> ppid >> pgid)) return std::nullopt;
  info.ppid = static_cast<pid_t>(ppid);
  info.pgid = static_cast<pid_t>(pgid);
  return info;
}

bool Gone(const std::optional<ProcessInfo>& info) {
  return !info || info->state == 'Z' || info->state == 'X' || info->state == 'x';
}

// A line "Name:\tvalue" of /proc/PID/status.
std::string StatusField(pid_t pid, const std::string& name) {
  const std::string text = ReadProcFile("/proc/" + std::to_string(pid) + "/status");
  const std::string key = "\n" + name + ":";
  size_t at = text.find(key);
  if (at == std::string::npos) return {};
  at += key.size();
  const size_t end = text.find('\n', at);
  std::string value = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
  value.erase(0, value.find_first_not_of(" \t"));
  return value;
}

bool CatchesSignal(pid_t pid, int signal) {
  const std::string mask = StatusField(pid, "SigCgt");
  if (mask.empty()) return false;
  const unsigned long long bits = std::strtoull(mask.c_str(), nullptr, 16);
  return signal >= 1 && signal <= 64 && ((bits >> (signal - 1)) & 1ULL) != 0;
}

bool IsShell(const std::string& comm) {
  static constexpr const char* kShells[] = {"sh", "bash", "dash", "zsh", "ksh", "mksh"};
  return std::any_of(std::begin(kShells), std::end(kShells), [&](const char* s) { return comm == s; });
}

std::string StateWord(char state) {
  switch (state) {
    case 'R':
      return "running";
    case 'S':
      return "sleeping";
    case 'D':
      return "uninterruptible sleep, e.g. I/O";
    case 'T':
      return "stopped";
    case 't':
      return "stopped by a tracer";
    default:
      return "";
  }
}

std::string StateNote(pid_t pid) {
  std::optional<ProcessInfo> info = ReadProcess(pid);
  if (!info) return "";
  const std::string word = StateWord(info->state);
  return " (state " + std::string(1, info->state) + (word.empty() ? "" : ": " + word) + ")";
}

// Every process of the machine, once per Collect, to find the workers' descendants.
std::vector<ProcessInfo> ProcessTable() {
  std::vector<ProcessInfo> out;
  ForEachProcess([&](pid_t pid) {
    if (std::optional<ProcessInfo> info = ReadProcess(pid)) out.push_back(std::move(*info));
  });
  return out;
}

// `worker` and its descendants, closest first (lowest pid first on one level), then members of its process
// group whose parent line was cut (orphans re-parented to distrun, a subreaper).
std::vector<ProcessInfo> Family(pid_t worker, const std::vector<ProcessInfo>& table) {
  std::multimap<pid_t, const ProcessInfo*> children;
  const ProcessInfo* self = nullptr;
  for (const ProcessInfo& p : table) {
    children.emplace(p.ppid, &p);
    if (p.pid == worker) self = &p;
  }
  std::vector<ProcessInfo> out;
  if (self == nullptr) return out;
  std::vector<const ProcessInfo*> level = {self};
  std::vector<pid_t> seen;
  while (!level.empty()) {
    std::sort(level.begin(), level.end(),
              [](const ProcessInfo* a, const ProcessInfo* b) { return a->pid < b->pid; });
    std::vector<const ProcessInfo*> next;
    for (const ProcessInfo* p : level) {
      if (std::find(seen.begin(), seen.end(), p->pid) != seen.end()) continue;
      seen.push_back(p->pid);
      out.push_back(*p);
      auto [begin, end] = children.equal_range(p->pid);
      for (auto it = begin; it != end; ++it) next.push_back(it->second);
    }
    level = std::move(next);
  }
  std::vector<ProcessInfo> strays;
  for (const ProcessInfo& p : table) {
    if (p.pgid == worker && std::find(seen.begin(), seen.end(), p.pid) == seen.end()) strays.push_back(p);
  }
  std::sort(strays.begin(), strays.end(), [](const auto& a, const auto& b) { return a.pid < b.pid; });
  out.insert(out.end(), strays.begin(), strays.end());
  return out;
}

off_t FileSize(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

std::string ReadFrom(const std::string& path, off_t offset, off_t size) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd || size <= offset) return {};
  std::string out(static_cast<size_t>(size - offset), '\0');
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::pread(fd.get(), out.data() + got, out.size() - got, offset + static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  return out;
}

// Appends what `fd` has now; false at end of file (or an error), after which the descriptor is closed.
bool Drain(UniqueFd& fd, std::string& out) {
  char buf[16384];
  while (fd) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    fd.Reset();
  }
  return false;
}

std::string LastLine(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  }
  return last;
}

// One target's collection in progress.
struct Job {
  enum class Step { kDone, kPython, kGdb };
  Step step = Step::kDone;
  CollectedStack result;
  // kPython
  std::string stack_path;
  off_t offset = 0;  // the file's size before the signal: the dump is what comes after
  off_t last_size = 0;
  Clock::time_point last_change;
  // kGdb
  Child gdb;
  std::string gdb_err;
  bool gdb_exited = false;
  bool was_stopped = false;  // the worker was in state T before gdb came

  void Fail(std::string error) {
    result.error = std::move(error);
    step = Step::kDone;
  }
};

}  // namespace

std::string PtraceDeniedError(pid_t pid, const std::string& yama_ptrace_scope) {
  std::string text =
      "gdb may not attach to pid " + std::to_string(pid) + " (ptrace: Operation not permitted)";
  const std::string scope = yama_ptrace_scope.substr(0, yama_ptrace_scope.find_first_of(" \n"));
  if (scope == "1") {
    return text +
           ": kernel.yama.ptrace_scope is 1, so only an ancestor or a registered tracer may attach (distrun "
           "registers itself for the workers it starts, not for processes they start); run distrun as root "
           "or set kernel.yama.ptrace_scope=0";
  }
  if (scope == "2") {
    return text +
           ": kernel.yama.ptrace_scope is 2, so attaching needs CAP_SYS_PTRACE; run distrun as root "
           "or with that capability";
  }
  if (scope == "3") {
    return text +
           ": kernel.yama.ptrace_scope is 3, so no process may be attached until the next boot; only "
           "Python workers can dump their stacks";
  }
  return text +
         ": probably a container without CAP_SYS_PTRACE or with a seccomp profile that forbids ptrace "
         "(docker run --cap-add SYS_PTRACE)";
}

StackCollector::StackCollector(StackCollectorConfig config) : config_(std::move(config)) {}

std::vector<std::pair<std::string, std::string>> StackCollector::WorkerEnvironment() const {
  return {{"DISTRUN_STACKS_DIR", config_.dir}, {"DISTRUN_STACK_SIGNAL", std::to_string(config_.signal)}};
}

std::vector<CollectedStack> StackCollector::Collect(const std::vector<StackTarget>& targets) const {
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + config_.timeout;
  const std::string signal_name = SignalName(config_.signal);
  const std::vector<ProcessInfo> table = ProcessTable();
  const std::vector<int> non_default_signals = NonDefaultSignals();

  std::vector<Job> jobs(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    Job& job = jobs[i];
    job.result.rank = targets[i].rank;
    job.result.pid = targets[i].pid;
    std::vector<ProcessInfo> family = Family(targets[i].pid, table);
    if (family.empty() || Gone(family.front())) {
      job.Fail("pid " + std::to_string(targets[i].pid) + " exited");
      continue;
    }

    // A Python process of ours: its dump file exists and it catches the signal (both, so that a program
    // that catches the signal for reasons of its own is not sent it).
    const ProcessInfo* python = nullptr;
    for (const ProcessInfo& p : family) {
      if (Gone(p)) continue;
      const std::string path = config_.dir + "/" + std::to_string(p.pid) + ".stack";
      if (::access(path.c_str(), F_OK) == 0 && CatchesSignal(p.pid, config_.signal)) {
        python = &p;
        job.stack_path = path;
        break;
      }
    }
    if (python != nullptr) {
      job.result.pid = python->pid;
      job.result.mechanism = "python";
      if (python->state == 'T' || python->state == 't') {
        job.Fail("pid " + std::to_string(python->pid) + " is stopped (state " + python->state +
                 "): a stopped process cannot dump its stack; it was probably sent SIGSTOP (continue it with "
                 "kill -CONT " +
                 std::to_string(python->pid) + ")");
        continue;
      }
      job.offset = std::max<off_t>(FileSize(job.stack_path), 0);
      job.last_size = job.offset;
      if (::kill(python->pid, config_.signal) != 0) {
        job.Fail("pid " + std::to_string(python->pid) + " exited");
        continue;
      }
      job.step = Job::Step::kPython;
      continue;
    }

    // Native: the worker itself, or past shells to the program they run.
    const ProcessInfo* native = &family.front();
    while (IsShell(native->comm)) {
      auto child = std::find_if(family.begin(), family.end(),
                                [&](const ProcessInfo& p) { return p.ppid == native->pid && !Gone(p); });
      if (child == family.end()) break;
      native = &*child;
    }
    job.result.pid = native->pid;
    job.result.mechanism = "native";
    const std::string tracer = StatusField(native->pid, "TracerPid");
    if (!tracer.empty() && tracer != "0") {
      job.Fail("pid " + std::to_string(native->pid) + " is already traced by pid " + tracer +
               " (a debugger or strace); a process can have only one tracer: detach it and retry");
      continue;
    }
    job.was_stopped = native->state == 'T';
    SpawnSpec spec;
    spec.argv = {config_.gdb, "-p", std::to_string(native->pid), "-batch", "-nx", "-q",
                 // A node without network would wait here for the debuginfod server.
                 "-iex", "set debuginfod enabled off", "-ex", "set pagination off", "-ex",
                 "set print thread-events off", "-ex", "thread apply all bt"};
    spec.env = config_.gdb_env;
    spec.non_default_signals = &non_default_signals;
    try {
      job.gdb = Child::Start(spec);
      job.step = Job::Step::kGdb;
    } catch (const SpawnError& e) {
      if (e.kind() == SpawnError::Kind::kNotFound) {
        job.Fail("native stacks need gdb; install it (apt install gdb)" +
                 (config_.gdb != "gdb" ? " or check the path " + config_.gdb : std::string()));
      } else {
        job.Fail(std::string("cannot run gdb: ") + e.what());
      }
    }
  }

  auto pending = [&] {
    return std::any_of(jobs.begin(), jobs.end(), [](const Job& j) { return j.step != Job::Step::kDone; });
  };
  auto finish_gdb = [&](Job& job) {
    Drain(job.gdb.stdout_pipe(), job.result.text);
    Drain(job.gdb.stderr_pipe(), job.gdb_err);
    job.step = Job::Step::kDone;
    const std::string& out = job.result.text;
    const bool has_stack = out.find("#0 ") != std::string::npos;
    if (has_stack) return;
    const std::string both = job.gdb_err + "\n" + out;
    const pid_t pid = job.result.pid;
    if (both.find("ptrace: Operation not permitted") != std::string::npos) {
      job.result.error = PtraceDeniedError(pid, ReadProcFile("/proc/sys/kernel/yama/ptrace_scope"));
    } else if (both.find("ptrace: No such process") != std::string::npos || Gone(ReadProcess(pid))) {
      job.result.error = "pid " + std::to_string(pid) + " exited";
    } else {
      const std::string line = LastLine(job.gdb_err.empty() ? out : job.gdb_err);
      job.result.error = "gdb printed no stack for pid " + std::to_string(pid) +
                         (line.empty() ? std::string(" and no error") : ": " + line);
    }
  };

  while (pending()) {
    const Clock::time_point now = Clock::now();
    if (now >= deadline) break;
    std::vector<pollfd> fds;
    for (Job& job : jobs) {
      if (job.step != Job::Step::kGdb) continue;
      for (UniqueFd* fd : {&job.gdb.stdout_pipe(), &job.gdb.stderr_pipe()}) {
        if (*fd) fds.push_back({fd->get(), POLLIN, 0});
      }
    }
    const auto wait = std::min<Clock::duration>(kPollInterval, deadline - now);
    ::poll(fds.data(), fds.size(),
           static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(wait).count()));

    for (Job& job : jobs) {
      if (job.step == Job::Step::kGdb) {
        Drain(job.gdb.stdout_pipe(), job.result.text);
        Drain(job.gdb.stderr_pipe(), job.gdb_err);
        int status = 0;
        const pid_t r = ::waitpid(job.gdb.pid(), &status, WNOHANG);
        // ECHILD: a caller that reaps with waitpid(-1) took it; gdb is gone all the same.
        if (r == job.gdb.pid() || (r < 0 && errno == ECHILD)) {
          job.gdb.SetReaped(status);
          finish_gdb(job);
        }
      } else if (job.step == Job::Step::kPython) {
        const off_t size = FileSize(job.stack_path);
        const Clock::time_point t = Clock::now();
        if (size != job.last_size) {
          job.last_size = size;
          job.last_change = t;
        } else if (size > job.offset && t - job.last_change >= kQuietTime) {
          job.result.text = ReadFrom(job.stack_path, job.offset, size);
          if (!job.result.text.empty() && job.result.text.back() == '\n') {
            job.step = Job::Step::kDone;
          } else {
            job.result.text.clear();  // a line still being written: wait for the rest
          }
        } else if (size <= job.offset) {
          std::optional<ProcessInfo> info = ReadProcess(job.result.pid);
          if (Gone(info)) {
            job.Fail("pid " + std::to_string(job.result.pid) + " exited before it dumped its stack");
          } else if (info->state == 'T' || info->state == 't') {
            job.Fail("pid " + std::to_string(job.result.pid) +
                     " was stopped (state T) before it dumped its stack; a stopped process cannot dump its "
                     "stack (continue it with kill -CONT " +
                     std::to_string(job.result.pid) + ")");
          }
        }
      }
    }
  }

  // The deadline: what is still open gets its error; every gdb is killed and reaped.
  for (Job& job : jobs) {
    if (job.step == Job::Step::kPython) {
      const off_t size = FileSize(job.stack_path);
      if (size > job.offset) {
        // Part of a dump: better than nothing, but not a stack to trust.
        job.result.text = ReadFrom(job.stack_path, job.offset, size);
        job.Fail("the stack dump of pid " + std::to_string(job.result.pid) + " did not end within " +
                 FormatSeconds(config_.timeout));
      } else {
        std::optional<ProcessInfo> info = ReadProcess(job.result.pid);
        const bool in_kernel = info && info->state == 'D';
        job.Fail("pid " + std::to_string(job.result.pid) + " sent no stack in answer to " + signal_name +
                 " in " + FormatSeconds(config_.timeout) + StateNote(job.result.pid) +
                 (in_kernel ? "; it runs no handler until the kernel call returns: retry later"
                            : "; it may block that signal; try gdb -p " + std::to_string(job.result.pid)));
      }
    } else if (job.step == Job::Step::kGdb) {
      const std::string state = StateNote(job.result.pid);
      job.gdb.SignalGroup(SIGKILL);
      job.gdb.Wait();
      Drain(job.gdb.stdout_pipe(), job.result.text);
      Drain(job.gdb.stderr_pipe(), job.gdb_err);
      // gdb killed while attached leaves the worker stopped by its SIGSTOP; it was running before.
      std::optional<ProcessInfo> info = ReadProcess(job.result.pid);
      if (!job.was_stopped && info && info->state == 'T') ::kill(job.result.pid, SIGCONT);
      job.Fail("gdb did not finish in " + FormatSeconds(config_.timeout) + " for pid " +
               std::to_string(job.result.pid) + state);
    }
  }

  std::vector<CollectedStack> out;
  out.reserve(jobs.size());
  for (Job& job : jobs) out.push_back(std::move(job.result));
  return out;
}

}  // namespace distrun
