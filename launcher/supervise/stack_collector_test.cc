#include "launcher/supervise/stack_collector.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

#include "launcher/process/spawn.h"
#include "launcher/supervise/python_site.h"

namespace distrun {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

const std::string kPython = "/usr/bin/python3";
const std::string kPath = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "distrun-stacks-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path = pattern;  // mkdtemp makes it 0700, as distrun's private directory is
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string Write(const std::string& name, const std::string& text) const {
    std::filesystem::create_directories((path / name).parent_path());
    std::ofstream(path / name) << text;
    return (path / name).string();
  }
};

// A collector writing into its own private directory (a subdirectory of `dir`).
StackCollectorConfig ConfigIn(const TempDir& dir) {
  StackCollectorConfig config;
  config.dir = (dir.path / "stacks").string();
  std::filesystem::create_directory(config.dir);
  config.gdb_env = {kPath};
  return config;
}

// A worker's environment: distrun's Python site beside the collector's directory, as WorkerWatch lays them
// out, and the collector's variables.
std::vector<std::string> EnvFor(const StackCollector& collector) {
  PythonSite site((std::filesystem::path(collector.config().dir).parent_path() / "python").string());
  std::vector<std::string> env = {kPath, "PYTHONPATH=" + site.PythonPath("")};
  for (const auto& [name, value] : collector.WorkerEnvironment()) env.push_back(name + "=" + value);
  return env;
}

Child Start(std::vector<std::string> argv, std::vector<std::string> env) {
  SpawnSpec spec;
  spec.argv = std::move(argv);
  spec.env = std::move(env);
  return Child::Start(spec);
}

// Reads the child's stdout until it holds `count` lines "ready"; false after 20 s.
bool WaitReady(Child& child, int count = 1) {
  std::string out;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  size_t seen = 0;
  while (Clock::now() < deadline) {
    pollfd fd{child.stdout_pipe().get(), POLLIN, 0};
    ::poll(&fd, 1, 100);
    char buf[1024];
    ssize_t n = ::read(fd.fd, buf, sizeof buf);
    if (n == 0) return false;
    if (n > 0) out.append(buf, static_cast<size_t>(n));
    seen = 0;
    for (size_t at = out.find("ready\n"); at != std::string::npos; at = out.find("ready\n", at + 1)) ++seen;
    if (seen >= static_cast<size_t>(count)) return true;
  }
  return false;
}

char StateOf(pid_t pid) {
  std::string text = ReadProcFile("/proc/" + std::to_string(pid) + "/stat");
  size_t close = text.rfind(')');
  return close == std::string::npos || close + 2 >= text.size() ? '?' : text[close + 2];
}

bool Alive(pid_t pid) {
  const char state = StateOf(pid);
  return state != '?' && state != 'Z' && state != 'X';
}

bool HaveGdb() {
  const std::string path = kPath.substr(5);
  for (const std::string& candidate : ExecCandidates("gdb", &path)) {
    if (::access(candidate.c_str(), X_OK) == 0) return true;
  }
  return false;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

const std::string kStuckScript = R"PY(import time

def stuck_in_here():
    print("ready", flush=True)
    time.sleep(60)

stuck_in_here()
)PY";

double MillisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

TEST(StackCollectorSetup, WorkerEnvironmentNamesTheDirectoryAndTheSignal) {
  TempDir dir;
  StackCollectorConfig config = ConfigIn(dir);
  StackCollector collector(config);
  auto env = collector.WorkerEnvironment();
  ASSERT_EQ(env.size(), 2u);
  EXPECT_EQ(env[0], (std::pair<std::string, std::string>{"DISTRUN_STACKS_DIR", config.dir}));
  EXPECT_EQ(env[1],
            (std::pair<std::string, std::string>{"DISTRUN_STACK_SIGNAL", std::to_string(SIGRTMIN + 5)}));
}

TEST(StackCollectorPython, DumpsAStuckWorkerAndLeavesItRunning) {
  TempDir dir;
  StackCollector collector(ConfigIn(dir));
  const std::string script = dir.Write("worker.py", kStuckScript);
  Child worker = Start({kPython, script}, EnvFor(collector));
  ASSERT_TRUE(WaitReady(worker));

  for (int round = 0; round < 2; ++round) {  // the second returns only the second dump
    const auto start = Clock::now();
    std::vector<CollectedStack> stacks = collector.Collect({{3, worker.pid()}});
    const double ms = MillisecondsSince(start);
    std::cout << "[ measured ] one Python worker: " << ms << " ms\n";
    ASSERT_EQ(stacks.size(), 1u);
    EXPECT_EQ(stacks[0].rank, 3);
    EXPECT_EQ(stacks[0].pid, worker.pid());
    EXPECT_EQ(stacks[0].mechanism, "python");
    EXPECT_EQ(stacks[0].error, "");
    EXPECT_TRUE(Contains(stacks[0].text, "stuck_in_here")) << stacks[0].text;
    EXPECT_TRUE(Contains(stacks[0].text, script)) << stacks[0].text;
    EXPECT_EQ(stacks[0].text.find("Current thread"), stacks[0].text.rfind("Current thread"))
        << "one dump only:\n"
        << stacks[0].text;
    EXPECT_LT(ms, 1000);
  }
  EXPECT_TRUE(Alive(worker.pid()));
}

TEST(StackCollectorPython, DumpsADeadlockedWorkerWithAllItsThreads) {
  TempDir dir;
  StackCollector collector(ConfigIn(dir));
  const std::string script = dir.Write("deadlock.py", R"PY(import threading, time

def helper_thread_idles():
    time.sleep(60)

def deadlocks_on_its_own_lock():
    lock = threading.Lock()
    lock.acquire()
    print("ready", flush=True)
    lock.acquire()

threading.Thread(target=helper_thread_idles, daemon=True).start()
deadlocks_on_its_own_lock()
)PY");
  Child worker = Start({kPython, script}, EnvFor(collector));
  ASSERT_TRUE(WaitReady(worker));
  std::this_thread::sleep_for(milliseconds(50));  // into the second acquire
  std::vector<CollectedStack> stacks = collector.Collect({{0, worker.pid()}});
  ASSERT_EQ(stacks.size(), 1u);
  EXPECT_EQ(stacks[0].mechanism, "python");
  EXPECT_EQ(stacks[0].error, "");
  EXPECT_TRUE(Contains(stacks[0].text, "deadlocks_on_its_own_lock")) << stacks[0].text;
  EXPECT_TRUE(Contains(stacks[0].text, "helper_thread_idles")) << stacks[0].text;
  EXPECT_TRUE(Alive(worker.pid()));
}

TEST(StackCollectorPython, FindsThePythonBehindAShell) {
  TempDir dir;
  StackCollector collector(ConfigIn(dir));
  const std::string script = dir.Write("worker.py", kStuckScript);
  // exec: the shell became Python; a command followed by another: Python is the shell's child.
  Child exec = Start({"/bin/sh", "-c", "exec " + kPython + " " + script}, EnvFor(collector));
  Child child = Start({"/bin/sh", "-c", kPython + " " + script + "; true"}, EnvFor(collector));
  ASSERT_TRUE(WaitReady(exec));
  ASSERT_TRUE(WaitReady(child));
  std::vector<CollectedStack> stacks = collector.Collect({{0, exec.pid()}, {1, child.pid()}});
  ASSERT_EQ(stacks.size(), 2u);
  EXPECT_EQ(stacks[0].pid, exec.pid());
  EXPECT_NE(stacks[1].pid, child.pid());
  EXPECT_EQ(stacks[1].rank, 1);
  for (const CollectedStack& s : stacks) {
    EXPECT_EQ(s.mechanism, "python");
    EXPECT_EQ(s.error, "");
    EXPECT_TRUE(Contains(s.text, "stuck_in_here")) << s.text;
    EXPECT_TRUE(Alive(s.pid));
  }
  EXPECT_TRUE(Alive(child.pid()));  // the shell, never sent the signal
}

TEST(StackCollectorPython, PrefersTheTrainerToItsForkedChildrenWhichDumpIntoTheirOwnFiles) {
  TempDir dir;
  StackCollector collector(ConfigIn(dir));
  const std::string script = dir.Write("forks.py", R"PY(import os, time

def dataloader_child():
    print("ready", flush=True)
    time.sleep(60)

def trainer_parent():
    print("ready", flush=True)
    time.sleep(60)

child = os.fork()
if child == 0:
    dataloader_child()
else:
    print(child, flush=True)
    trainer_parent()
)PY");
  Child worker = Start({kPython, script}, EnvFor(collector));
  ASSERT_TRUE(WaitReady(worker, 2));
  std::vector<pid_t> children = ChildrenOf(worker.pid());
  ASSERT_EQ(children.size(), 1u);
  std::vector<CollectedStack> stacks = collector.Collect({{0, worker.pid()}, {1, children[0]}});
  ASSERT_EQ(stacks.size(), 2u);
  EXPECT_EQ(stacks[0].pid, worker.pid());
  EXPECT_TRUE(Contains(stacks[0].text, "trainer_parent")) << stacks[0].text;
  EXPECT_FALSE(Contains(stacks[0].text, "dataloader_child")) << stacks[0].text;
  EXPECT_EQ(stacks[1].pid, children[0]);
  EXPECT_EQ(stacks[1].mechanism, "python");
  EXPECT_TRUE(Contains(stacks[1].text, "dataloader_child")) << stacks[1].text;
  EXPECT_TRUE(Alive(worker.pid()));
  EXPECT_TRUE(Alive(children[0]));
}

TEST(StackCollectorPython, StoppedWorkerFailsAtOnceAndIsNotKilled) {
  TempDir dir;
  StackCollector collector(ConfigIn(dir));
  const std::string script = dir.Write("worker.py", kStuckScript);
  Child worker = Start({kPython, script}, EnvFor(collector));
  ASSERT_TRUE(WaitReady(worker));
  ASSERT_EQ(::kill(worker.pid(), SIGSTOP), 0);
  while (StateOf(worker.pid()) != 'T') std::this_thread::sleep_for(milliseconds(1));
  const auto start = Clock::now();
  std::vector<CollectedStack> stacks = collector.Collect({{0, worker.pid()}});
  const double ms = MillisecondsSince(start);
  std::cout << "[ measured ] stopped worker answered in " << ms << " ms\n";
  ASSERT_EQ(stacks.size(), 1u);
  EXPECT_EQ(stacks[0].mechanism, "python");
  EXPECT_TRUE(Contains(stacks[0].error, "stopped (state T)")) << stacks[0].error;
  EXPECT_TRUE(Contains(stacks[0].error, "SIGSTOP")) << stacks[0].error;
  EXPECT_EQ(stacks[0].error.find('\n'), std::string::npos);
  EXPECT_LT(ms, 500);
  ASSERT_EQ(::kill(worker.pid(), SIGCONT), 0);
  // Continued, it dumps as usual: the request of the stopped time was never sent.
  std::vector<CollectedStack> again = collector.Collect({{0, worker.pid()}});
  EXPECT_EQ(again[0].error, "");
  EXPECT_TRUE(Contains(again[0].text, "stuck_in_here"));
  EXPECT_EQ(again[0].text.find("Current thread"), again[0].text.rfind("Current thread"));
  EXPECT_TRUE(Alive(worker.pid()));
}

TEST(StackCollectorPython, SixteenWorkersAtOnce) {
  TempDir dir;
  StackCollector collector(ConfigIn(dir));
  const std::string script = dir.Write("worker.py", kStuckScript);
  std::vector<Child> workers;
  std::vector<StackTarget> targets;
  for (int rank = 0; rank < 16; ++rank) {
    workers.push_back(Start({kPython, script}, EnvFor(collector)));
    targets.push_back({rank, workers.back().pid()});
  }
  for (Child& w : workers) ASSERT_TRUE(WaitReady(w));
  const auto start = Clock::now();
  std::vector<CollectedStack> stacks = collector.Collect(targets);
  const double ms = MillisecondsSince(start);
  std::cout << "[ measured ] 16 Python workers: " << ms << " ms\n";
  ASSERT_EQ(stacks.size(), 16u);
  for (size_t i = 0; i < stacks.size(); ++i) {
    EXPECT_EQ(stacks[i].rank, static_cast<int>(i));
    EXPECT_EQ(stacks[i].error, "") << i;
    EXPECT_TRUE(Contains(stacks[i].text, "stuck_in_here")) << i;
    EXPECT_TRUE(Alive(stacks[i].pid));
  }
  EXPECT_LT(ms, 1000);
}

TEST(StackCollectorNative, DumpsANativeWorkerWithGdbAndLeavesItRunning) {
  if (!HaveGdb()) GTEST_SKIP() << "gdb is not installed";
  TempDir dir;
  StackCollector collector(ConfigIn(dir));
  std::vector<Child> workers;
  std::vector<StackTarget> targets;
  for (int rank = 0; rank < 4; ++rank) {
    workers.push_back(Start({"/bin/sleep", "60"}, EnvFor(collector)));
    targets.push_back({rank, workers.back().pid()});
  }
  // A shell in front of the program: gdb reads the program, not the shell.
  workers.push_back(Start({"/bin/sh", "-c", "/bin/sleep 60; true"}, EnvFor(collector)));
  targets.push_back({4, workers.back().pid()});
  std::this_thread::sleep_for(milliseconds(100));
  const auto start = Clock::now();
  std::vector<CollectedStack> stacks = collector.Collect(targets);
  const double ms = MillisecondsSince(start);
  std::cout << "[ measured ] 5 native workers with gdb: " << ms << " ms\n";
  ASSERT_EQ(stacks.size(), 5u);
  for (const CollectedStack& s : stacks) {
    EXPECT_EQ(s.mechanism, "native");
    EXPECT_EQ(s.error, "") << s.error;
    EXPECT_TRUE(Contains(s.text, "nanosleep")) << s.text;
    EXPECT_TRUE(Alive(s.pid));
    EXPECT_NE(StateOf(s.pid), 'T') << "gdb left it stopped";
  }
  EXPECT_NE(stacks[4].pid, workers[4].pid());
  EXPECT_EQ(ChildrenOf(::getpid()).size(), workers.size()) << "a gdb was left behind";
}

TEST(StackCollectorNative, ProcessesThatDoNotCatchTheSignalAreNeverSentIt) {
  TempDir dir;
  StackCollectorConfig config = ConfigIn(dir);
  config.gdb = "/nonexistent/gdb";
  StackCollector collector(config);
  const std::string script = dir.Write("worker.py", kStuckScript);
  Child sleep = Start({"/bin/sleep", "60"}, EnvFor(collector));
  // -I skips sitecustomize: a Python that cannot dump is a native worker.
  Child isolated = Start({kPython, "-I", script}, EnvFor(collector));
  ASSERT_TRUE(WaitReady(isolated));
  std::vector<CollectedStack> stacks = collector.Collect({{0, sleep.pid()}, {1, isolated.pid()}});
  ASSERT_EQ(stacks.size(), 2u);
  for (const CollectedStack& s : stacks) {
    EXPECT_EQ(s.mechanism, "native");
    EXPECT_EQ(s.error,
              "native stacks need gdb; install it (apt install gdb) or check the path /nonexistent/gdb");
  }
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_TRUE(Alive(sleep.pid()));
  EXPECT_TRUE(Alive(isolated.pid()));
  EXPECT_EQ(::waitpid(sleep.pid(), nullptr, WNOHANG), 0);
}

TEST(StackCollectorErrors, ExitedWorker) {
  TempDir dir;
  StackCollector collector(ConfigIn(dir));
  Child gone = Start({"/bin/true"}, EnvFor(collector));
  const pid_t pid = gone.pid();
  gone.Wait();
  std::vector<CollectedStack> stacks = collector.Collect({{2, pid}});
  ASSERT_EQ(stacks.size(), 1u);
  EXPECT_EQ(stacks[0].error, "pid " + std::to_string(pid) + " exited");
  EXPECT_EQ(stacks[0].mechanism, "");
}

TEST(StackCollectorErrors, GdbRunningPastTheDeadlineIsKilledAndTheWorkerContinued) {
  TempDir dir;
  StackCollectorConfig config = ConfigIn(dir);
  // A "gdb" that never ends, standing in for one stuck on a process in state D.
  config.gdb = dir.Write("slow-gdb", "#!/bin/sh\nexec sleep 60\n");
  ::chmod(config.gdb.c_str(), 0755);
  config.timeout = milliseconds(300);
  StackCollector collector(config);
  Child worker = Start({"/bin/sleep", "60"}, EnvFor(collector));
  const auto start = Clock::now();
  std::vector<CollectedStack> stacks = collector.Collect({{0, worker.pid()}});
  const double ms = MillisecondsSince(start);
  ASSERT_EQ(stacks.size(), 1u);
  EXPECT_TRUE(Contains(stacks[0].error, "gdb did not finish in 0.3s")) << stacks[0].error;
  EXPECT_LT(ms, 1000);
  EXPECT_EQ(ChildrenOf(::getpid()), std::vector<pid_t>{worker.pid()}) << "the gdb was left behind";
  EXPECT_TRUE(Alive(worker.pid()));
}

TEST(StackCollectorErrors, GdbKilledWhileAttachedLeavesTheWorkerRunning) {
  if (!HaveGdb()) GTEST_SKIP() << "gdb is not installed";
  TempDir dir;
  // Deadlines that fall before, during and after gdb's attach: whichever it is, the worker goes on.
  for (int ms : {30, 60, 90, 120, 150}) {
    StackCollectorConfig config = ConfigIn(dir);
    config.timeout = milliseconds(ms);
    StackCollector collector(config);
    Child worker = Start({"/bin/sleep", "60"}, EnvFor(collector));
    std::this_thread::sleep_for(milliseconds(20));
    std::vector<CollectedStack> stacks = collector.Collect({{0, worker.pid()}});
    ASSERT_EQ(stacks.size(), 1u);
    if (!stacks[0].error.empty()) {
      EXPECT_TRUE(Contains(stacks[0].error, "gdb did not finish in")) << stacks[0].error;
    }
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_TRUE(Alive(worker.pid()));
    EXPECT_NE(StateOf(worker.pid()), 'T') << ms;
    EXPECT_NE(StateOf(worker.pid()), 't') << ms;
    EXPECT_EQ(ChildrenOf(::getpid()), std::vector<pid_t>{worker.pid()}) << "the gdb was left behind";
  }
}

TEST(StackCollectorErrors, PtraceDeniedNamesTheLikelyCause) {
  EXPECT_TRUE(Contains(PtraceDeniedError(7, "1\n"), "kernel.yama.ptrace_scope is 1"));
  EXPECT_TRUE(Contains(PtraceDeniedError(7, "2\n"), "CAP_SYS_PTRACE"));
  EXPECT_TRUE(Contains(PtraceDeniedError(7, "3\n"), "until the next boot"));
  const std::string none = PtraceDeniedError(7, "");
  EXPECT_TRUE(Contains(none, "gdb may not attach to pid 7 (ptrace: Operation not permitted)")) << none;
  EXPECT_TRUE(Contains(none, "container without CAP_SYS_PTRACE")) << none;
  for (const char* scope : {"", "0\n", "1\n", "2\n", "3\n"}) {
    EXPECT_EQ(PtraceDeniedError(7, scope).find('\n'), std::string::npos);
  }
}

}  // namespace
}  // namespace distrun
