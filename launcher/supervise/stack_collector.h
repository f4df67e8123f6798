#pragma once
// The current stacks of this node's workers, taken without stopping the job, to diagnose a hung one.
//
// Python workers dump their own stacks: distrun's sitecustomize.py (launcher/supervise/python_site.h), first
// on every worker's PYTHONPATH, registers faulthandler for a signal of distrun's, writing to a file per
// process in a private directory; Collect sends that signal and reads what the handler wrote. The handler is
// C code run from the signal, so it answers even when the interpreter is deadlocked holding the GIL. Other
// workers (native programs, Python started with -I or -S) are read with gdb, which attaches for a moment
// (ptrace; about 0.2 s) and detaches when it exits.

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <string>
#include <utility>
#include <vector>

namespace distrun {

struct StackTarget {
  int rank = 0;
  pid_t pid = 0;  // the worker process distrun spawned (its own process group leader)
};

struct CollectedStack {
  int rank = 0;
  pid_t pid = 0;          // the process dumped: the worker, or a descendant when the worker is a shell
  std::string mechanism;  // "python" (faulthandler) or "native" (gdb); "" when no process was found
  // faulthandler's output, or gdb's `thread apply all bt` output (its stdout). With an error it may hold a
  // partial dump (gdb killed at the deadline) for a human to read, never a stack to trust.
  std::string text;
  std::string error;  // non-empty: no stack; one line saying why and what to do
};

struct StackCollectorConfig {
  std::string dir;  // a private directory of this distrun (created by the caller, 0700)
  // The signal Python workers dump on. A real-time one: SIGUSR1/SIGUSR2 are taken by training stacks
  // (Lightning's Slurm requeue, MPI libraries), and the first real-time ones by programs that want "a free
  // signal" for timers. A process that does not catch it is never sent it (its default action kills).
  int signal = SIGRTMIN + 5;
  std::string gdb = "gdb";                    // looked up in the PATH of gdb_env unless it contains a '/'
  std::vector<std::string> gdb_env;           // gdb's complete environment ("NAME=value"); empty: none
  std::chrono::milliseconds timeout{10'000};  // for one Collect as a whole
};

class StackCollector {
 public:
  explicit StackCollector(StackCollectorConfig config);

  // What every worker's environment gets so that Python workers (with distrun's sitecustomize.py) can dump
  // on request: DISTRUN_STACKS_DIR=<dir> and DISTRUN_STACK_SIGNAL=<number>.
  std::vector<std::pair<std::string, std::string>> WorkerEnvironment() const;

  // One result per target, in order. Blocks until every stack is in or the timeout has passed (all targets
  // are worked on at once), so a caller runs it on a thread of its own. Starts gdb as a child of this
  // process and reaps it; a caller that reaps with waitpid(-1) may take that exit status first, which does
  // no harm.
  std::vector<CollectedStack> Collect(const std::vector<StackTarget>& targets) const;

  const StackCollectorConfig& config() const { return config_; }

 private:
  StackCollectorConfig config_;
};

// The error for a process gdb could not attach to ("ptrace: Operation not permitted"), naming the likely
// cause; `yama_ptrace_scope` is the text of /proc/sys/kernel/yama/ptrace_scope ("" where Yama is absent).
std::string PtraceDeniedError(pid_t pid, const std::string& yama_ptrace_scope);

}  // namespace distrun
