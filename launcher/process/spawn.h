#pragma once
// One worker process (DESIGN §3.2): fork + exec with the child's set-up done between the two, and RAII so
// that a Child going out of scope never leaves its process behind.

#include <sys/resource.h>
#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "launcher/process/prompt_thread.h"
#include "launcher/process/unique_fd.h"

namespace distrun {

struct SpawnSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in the PATH of `env` unless it contains a '/'
  std::vector<std::string> env;   // the complete environment, "NAME=value"
  bool inherit_stdin = false;     // false: stdin is /dev/null
  bool stdin_pipe = false;        // stdin is a pipe whose write end is Child::stdin_pipe()
  // Make the child's process group the foreground group of the terminal on stdin (distrun's stdin is
  // its controlling terminal and the child reads it); distrun must ignore SIGTTOU.
  bool foreground = false;
  std::vector<int> cpus;  // pin the child to these CPUs before exec (--cpu-bind); empty: inherit
  // NonDefaultSignals() of this process, taken once by a caller that starts many children; null: taken at
  // each start. The child resets exactly these to SIG_DFL.
  const std::vector<int>* non_default_signals = nullptr;
  // The descriptor limit the child gets, when distrun raised its own (it hosts the job's service).
  std::optional<rlimit> descriptor_limit;
};

// The signals whose disposition in this process is not SIG_DFL (ignored or caught). A worker must start
// with every signal at its default: exec resets caught signals itself but keeps ignored ones ignored, and
// the child must not run a handler of distrun's between unblocking signals and exec.
std::vector<int> NonDefaultSignals();

// Why a worker could not be started; exit_code() is what distrun exits with, as a shell would.
class SpawnError : public std::runtime_error {
 public:
  enum class Kind { kNotFound, kNotExecutable, kSystem };
  SpawnError(Kind kind, int error, const std::string& message)
      : std::runtime_error(message), kind_(kind), error_(error) {}
  Kind kind() const { return kind_; }
  int error() const { return error_; }  // errno
  int exit_code() const { return kind_ == Kind::kNotFound ? 127 : kind_ == Kind::kNotExecutable ? 126 : 1; }

 private:
  Kind kind_;
  int error_;
};

class Child {
 public:
  // Starts the process in its own process group with stdout and stderr on pipes. Throws SpawnError; a
  // command that is not found or cannot be executed is reported here, not as an exit status.
  // `dev_null`: a descriptor of /dev/null to use for stdin (opened here when -1).
  static Child Start(const SpawnSpec& spec, int dev_null = -1);

  Child() = default;
  Child(Child&& other) noexcept;
  Child& operator=(Child&& other) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  // An unreaped child's process group is killed (SIGKILL) and the child reaped.
  ~Child();

  pid_t pid() const { return pid_; }
  // The read ends of the child's stdout and stderr: non-blocking and close-on-exec.
  UniqueFd& stdout_pipe() { return stdout_; }
  UniqueFd& stderr_pipe() { return stderr_; }
  // The write end of the child's stdin (SpawnSpec::stdin_pipe): non-blocking and close-on-exec.
  UniqueFd& stdin_pipe() { return stdin_; }

  bool reaped() const { return reaped_; }
  int wait_status() const { return wait_status_; }
  // Records the status waitpid returned for pid() (the supervisor reaps with waitpid(-1)).
  void SetReaped(int wait_status);
  // Blocks until the child exits and reaps it; returns the wait status.
  int Wait();

  // Sends `signal` to the child's process group; false when no process of the group is left. Once the
  // child is reaped and its group found empty, the group is gone for good (nothing can join an empty
  // group) and is never signalled again: one system call per worker at the job's end, not four, and no
  // signal for an unrelated group that a reused pid might lead later.
  bool SignalGroup(int signal);

 private:
  void KillAndReap();

  pid_t pid_ = -1;
  bool reaped_ = false;
  bool group_gone_ = false;  // reaped, and kill(-pid) said ESRCH
  int wait_status_ = 0;
  UniqueFd stdout_, stderr_, stdin_;
};

// One child of StartChildren: started, or the exception Child::Start threw (a SpawnError).
struct SpawnOutcome {
  Child child;
  std::exception_ptr error;
};

// Starts many children at once. A start waits until its child has exec'd, so one thread alone would start
// the workers one after another while the other CPUs idle; the spawner starts them on up to `threads`
// threads, the caller's included. Its helper threads live as long as the spawner: a child's parent-death
// signal (PR_SET_PDEATHSIG) fires when the *thread* that started it ends, so destroy the spawner only once
// its children are gone.
class Spawner {
 public:
  explicit Spawner(size_t threads);
  ~Spawner();
  Spawner(const Spawner&) = delete;
  Spawner& operator=(const Spawner&) = delete;

  // Starts `count` children, spec i made by `make(i, spec)` on the calling thread, in order, while the
  // helper threads already start the ones made before it: the first worker starts while the others'
  // environments are still being written (15 us each, a millisecond for 64). The calling thread then
  // starts what is left. Outcome i belongs to spec i. Helper threads are created at the first call that
  // can use them. When `make` throws, the children started so far are ended (their Child destructors) and
  // the exception goes on.
  using MakeSpec = std::function<void(size_t i, SpawnSpec& spec)>;
  std::vector<SpawnOutcome> Start(size_t count, const MakeSpec& make);

 private:
  void HelperLoop();
  // Starts the batch's children that are made and not yet taken, until none is left.
  void Work(std::unique_lock<std::mutex>& lock);

  const size_t threads_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  const std::vector<SpawnSpec>* specs_ = nullptr;
  std::vector<SpawnOutcome>* out_ = nullptr;
  size_t made_ = 0;    // specs_[0, made_) may be started
  size_t next_ = 0;    // the next one to start
  size_t busy_ = 0;    // threads inside Work
  int dev_null_ = -1;  // the batch's /dev/null (-1: each start opens its own)
  bool stopping_ = false;
  std::vector<PromptThread> helpers_;  // prompt: each starts workers while this thread makes specs
};

// The files execvp would try for `file` with `path` (the worker's PATH; nullptr: unset), in order.
std::vector<std::string> ExecCandidates(const std::string& file, const std::string* path);

// "exit code 3", "signal SIGSEGV", "signal SIGSEGV (core dumped)".
std::string DescribeWaitStatus(int wait_status);
// The code a shell would report: the exit code, or 128 + N for signal N.
int ExitCodeOf(int wait_status);

// Processes whose parent is `parent` (from /proc/*/stat): distrun, a subreaper, inherits its workers'
// orphans and must find them to kill and reap them.
std::vector<pid_t> ChildrenOf(pid_t parent);
// This process's children, from /proc/self/task/*/children: a few small reads where ChildrenOf reads the
// stat file of every process on the machine. Falls back to ChildrenOf where the kernel lacks those files.
std::vector<pid_t> OwnChildren();
// The children of this process's main thread, from one file: every orphan this subreaper adopted is there
// (the kernel hands an orphan to the first live thread of its reaper, the main thread while it runs), with
// what the main thread started itself. Falls back to OwnChildren where the kernel lacks the file.
std::vector<pid_t> AdoptedChildren();

// The whole of a /proc file, or "" when it cannot be read (the process may exit while it is read, which
// makes read() fail with ESRCH: no exception, no partial result to trust).
std::string ReadProcFile(const std::string& path);

// Calls `visit` with the pid of every process in /proc.
void ForEachProcess(const std::function<void(pid_t)>& visit);

// Makes sure fds 0, 1 and 2 are open (on /dev/null if not), so that no pipe or file distrun opens later
// lands on them and gets closed or clobbered in a worker.
void EnsureStandardFds();

}  // namespace distrun
