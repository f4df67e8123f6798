#include "launcher/process/spawn.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>

namespace distrun {
namespace {

const std::string kPath = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";

// Everything the child writes to `fd` until EOF.
std::string ReadAll(UniqueFd& fd) {
  ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd.get(), buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

Child StartChild(std::vector<std::string> argv, std::vector<std::string> env = {kPath}) {
  SpawnSpec spec;
  spec.argv = std::move(argv);
  spec.env = std::move(env);
  return Child::Start(spec);
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() / ("distrun-spawn-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::filesystem::path Write(const std::string& name, const std::string& text, mode_t mode) {
    std::filesystem::path p = path / name;
    std::ofstream(p) << text;
    ::chmod(p.c_str(), mode);
    return p;
  }
};

TEST(SpawnPath, CandidatesFollowExecvp) {
  std::string path = "/a:/b/::c";
  EXPECT_EQ(ExecCandidates("x", &path), (std::vector<std::string>{"/a/x", "/b/x", "x", "c/x"}));
  EXPECT_EQ(ExecCandidates("./x", &path), (std::vector<std::string>{"./x"}));
  EXPECT_EQ(ExecCandidates("/bin/sh", &path), (std::vector<std::string>{"/bin/sh"}));
  EXPECT_EQ(ExecCandidates("x", nullptr), (std::vector<std::string>{"/bin/x", "/usr/bin/x"}));
  EXPECT_TRUE(ExecCandidates("", &path).empty());
}

TEST(SpawnChild, RunsWithExactlyTheGivenEnvironmentAndPipes) {
  Child c = StartChild({"sh", "-c", "echo \"$FOO\"; echo err >&2; exit 5"}, {kPath, "FOO=bar baz"});
  EXPECT_GT(c.pid(), 0);
  EXPECT_EQ(ReadAll(c.stdout_pipe()), "bar baz\n");
  EXPECT_EQ(ReadAll(c.stderr_pipe()), "err\n");
  int status = c.Wait();
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 5);
  EXPECT_TRUE(c.reaped());

  Child env = StartChild({"env"}, {kPath, "ONLY=1"});
  EXPECT_EQ(ReadAll(env.stdout_pipe()), kPath + "\nONLY=1\n");
  env.Wait();
}

TEST(SpawnChild, GetsTheDescriptorLimitItIsGiven) {
  rlimit own{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &own), 0);
  SpawnSpec spec;
  spec.argv = {"sh", "-c", "ulimit -Sn; ulimit -Hn"};
  spec.env = {kPath};
  spec.descriptor_limit = rlimit{64, own.rlim_max};
  Child c = Child::Start(spec);
  EXPECT_EQ(ReadAll(c.stdout_pipe()),
            "64\n" +
                (own.rlim_max == RLIM_INFINITY ? std::string("unlimited") : std::to_string(own.rlim_max)) +
                "\n");
  c.Wait();
  // Without one, the child has distrun's.
  Child same = StartChild({"sh", "-c", "ulimit -Sn"});
  EXPECT_EQ(ReadAll(same.stdout_pipe()),
            (own.rlim_cur == RLIM_INFINITY ? std::string("unlimited") : std::to_string(own.rlim_cur)) + "\n");
  same.Wait();
}

TEST(SpawnChild, PathLookupUsesTheWorkersPath) {
  TempDir dir;
  dir.Write("distrun-test-tool", "#!/bin/sh\necho tool ran\n", 0755);
  Child c = StartChild({"distrun-test-tool"}, {"PATH=/nonexistent:" + dir.path.string()});
  EXPECT_EQ(ReadAll(c.stdout_pipe()), "tool ran\n");
  EXPECT_EQ(c.Wait(), 0);
}

TEST(SpawnChild, ScriptWithoutInterpreterLineRunsWithSh) {
  TempDir dir;
  auto script = dir.Write("plain", "echo from sh \"$1\"\n", 0755);
  Child c = StartChild({script.string(), "arg"});
  EXPECT_EQ(ReadAll(c.stdout_pipe()), "from sh arg\n");
  EXPECT_EQ(c.Wait(), 0);
}

TEST(SpawnChild, NotFoundIs127) {
  try {
    StartChild({"distrun-no-such-command-xyz"});
    FAIL() << "expected a SpawnError";
  } catch (const SpawnError& e) {
    EXPECT_EQ(e.kind(), SpawnError::Kind::kNotFound);
    EXPECT_EQ(e.exit_code(), 127);
    std::string what = e.what();
    EXPECT_TRUE(what.starts_with("distrun-no-such-command-xyz: not found")) << what;
    EXPECT_NE(what.find("PATH=/usr/sbin:/usr/bin:/sbin:/bin"), std::string::npos) << what;
  }
  try {
    StartChild({"/no/such/file"});
    FAIL();
  } catch (const SpawnError& e) {
    EXPECT_EQ(e.exit_code(), 127);
  }
}

TEST(SpawnChild, NotExecutableIs126) {
  TempDir dir;
  auto file = dir.Write("data.txt", "not a program\n", 0644);
  try {
    StartChild({file.string()});
    FAIL() << "expected a SpawnError";
  } catch (const SpawnError& e) {
    EXPECT_EQ(e.kind(), SpawnError::Kind::kNotExecutable);
    EXPECT_EQ(e.exit_code(), 126);
    EXPECT_NE(std::string(e.what()).find("permission denied"), std::string::npos) << e.what();
  }
  try {
    StartChild({dir.path.string()});
    FAIL();
  } catch (const SpawnError& e) {
    EXPECT_EQ(e.exit_code(), 126);
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
  // Found in PATH but not executable: "permission denied" wins over later "not found", as in execvp.
  try {
    StartChild({"data.txt"}, {"PATH=" + dir.path.string() + ":/nonexistent"});
    FAIL();
  } catch (const SpawnError& e) {
    EXPECT_EQ(e.exit_code(), 126);
  }
}

TEST(SpawnChild, OwnProcessGroupDefaultSignalsAndDevNullStdin) {
  // Whatever distrun blocks or ignores, the worker starts clean.
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR1);
  sigaddset(&block, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &block, &old);
  struct sigaction ignore {
  }, old_hup{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGHUP, &ignore, &old_hup);

  Child c = StartChild({"grep", "-E", "^(SigBlk|SigIgn)", "/proc/self/status"});
  std::string status = ReadAll(c.stdout_pipe());
  EXPECT_EQ(c.Wait(), 0);
  EXPECT_EQ(status, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");

  ::sigprocmask(SIG_SETMASK, &old, nullptr);
  ::sigaction(SIGHUP, &old_hup, nullptr);

  // Field 5 of /proc/PID/stat is the process group.
  Child g = StartChild({"sh", "-c", "exec cut -d' ' -f1,5 /proc/self/stat"});
  std::string ids = ReadAll(g.stdout_pipe());
  std::string pid = std::to_string(g.pid());
  EXPECT_EQ(ids, pid + " " + pid + "\n");
  g.Wait();

  Child in = StartChild({"readlink", "/proc/self/fd/0"});
  EXPECT_EQ(ReadAll(in.stdout_pipe()), "/dev/null\n");
  in.Wait();
}

TEST(SpawnChild, InheritedStdin) {
  SpawnSpec spec;
  spec.argv = {"readlink", "/proc/self/fd/0"};
  spec.env = {kPath};
  spec.inherit_stdin = true;
  char self[256] = {};
  ssize_t n = ::readlink("/proc/self/fd/0", self, sizeof(self) - 1);
  ASSERT_GT(n, 0);
  Child c = Child::Start(spec);
  EXPECT_EQ(ReadAll(c.stdout_pipe()), std::string(self) + "\n");
  c.Wait();
}

TEST(SpawnChild, DestructorKillsAndReaps) {
  pid_t pid;
  {
    Child c = StartChild({"sleep", "30"});
    pid = c.pid();
    EXPECT_TRUE(c.SignalGroup(0));
    auto children = ChildrenOf(::getpid());
    EXPECT_NE(std::find(children.begin(), children.end(), pid), children.end());
  }
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), -1) << "already reaped";
  EXPECT_EQ(errno, ECHILD);
  EXPECT_FALSE(std::filesystem::exists("/proc/" + std::to_string(pid)));
}

TEST(SpawnChild, AGroupFoundEmptyAfterTheReapIsNeverSignalledAgain) {
  // As distrun is: a subreaper, so that the member the leader leaves behind becomes this test's child.
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  Child c = StartChild({"sh", "-c", "sleep 0.2 >/dev/null 2>&1 & echo $!"});
  const pid_t member = static_cast<pid_t>(std::stol(ReadAll(c.stdout_pipe())));
  c.Wait();
  EXPECT_TRUE(c.SignalGroup(0)) << "the member is still in the group";
  EXPECT_EQ(::waitpid(member, nullptr, 0), member);
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  EXPECT_FALSE(c.SignalGroup(0));
  EXPECT_FALSE(c.SignalGroup(SIGTERM));
}

TEST(SpawnChild, OwnChildrenListsChildrenForkedByAnyThread) {
  Child a = StartChild({"sleep", "30"});
  Child b;
  std::thread other([&b] { b = StartChild({"sleep", "30"}); });
  other.join();
  auto own = OwnChildren();
  auto scanned = ChildrenOf(::getpid());
  std::sort(own.begin(), own.end());
  std::sort(scanned.begin(), scanned.end());
  EXPECT_EQ(own, scanned);
  EXPECT_NE(std::find(own.begin(), own.end(), a.pid()), own.end());
  EXPECT_NE(std::find(own.begin(), own.end(), b.pid()), own.end());
}

TEST(SpawnChild, AnOrphanOfAWorkerStartedOnAnotherThreadIsAdoptedByTheMainThread) {
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  // The thread lives on until the end, as distrun's start threads do: the child's death signal follows
  // the thread that started it.
  Child c;
  std::promise<void> started, done;
  std::thread other([&] {
    c = StartChild({"sh", "-c", "sleep 30 >/dev/null 2>&1 & echo $!"});
    started.set_value();
    done.get_future().wait();
  });
  started.get_future().wait();
  const pid_t orphan = static_cast<pid_t>(std::stol(ReadAll(c.stdout_pipe())));
  c.Wait();
  // The orphan is this process's child now, on the main thread's list, whichever thread started its parent.
  auto adopted = AdoptedChildren();
  EXPECT_NE(std::find(adopted.begin(), adopted.end(), orphan), adopted.end());
  ::kill(orphan, SIGKILL);
  EXPECT_EQ(::waitpid(orphan, nullptr, 0), orphan);
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  done.set_value();
  other.join();
}

TEST(SpawnChild, MovedChildIsOwnedOnce) {
  Child a = StartChild({"sleep", "30"});
  pid_t pid = a.pid();
  Child b = std::move(a);
  EXPECT_EQ(a.pid(), -1);
  EXPECT_EQ(b.pid(), pid);
  EXPECT_TRUE(b.SignalGroup(SIGTERM));
  int status = b.Wait();
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

TEST(SpawnProc, ReadingProcessesThatComeAndGoNeverThrows) {
  EXPECT_EQ(ReadProcFile("/proc/999999999/stat"), "");
  EXPECT_NE(ReadProcFile("/proc/self/stat"), "");
  // Processes exit while /proc is read (read() then fails with ESRCH): no exception, no garbage.
  std::vector<Child> children;
  for (int i = 0; i < 100; ++i) {
    children.push_back(StartChild({"true"}));
    EXPECT_NO_THROW(ChildrenOf(::getpid()));
  }
  for (Child& c : children) c.Wait();
}

TEST(SpawnStatus, Descriptions) {
  EXPECT_EQ(DescribeWaitStatus(W_EXITCODE(3, 0)), "exit code 3");
  EXPECT_EQ(ExitCodeOf(W_EXITCODE(3, 0)), 3);
  EXPECT_EQ(DescribeWaitStatus(W_EXITCODE(0, SIGSEGV)), "signal SIGSEGV");
  EXPECT_EQ(ExitCodeOf(W_EXITCODE(0, SIGSEGV)), 139);
  EXPECT_EQ(DescribeWaitStatus(W_EXITCODE(0, SIGABRT) | WCOREFLAG), "signal SIGABRT (core dumped)");
  EXPECT_EQ(ExitCodeOf(W_EXITCODE(0, SIGKILL)), 137);
}

// Specs made one after another while earlier ones start: every outcome in its spec's place, a start that
// fails reported in its own, and the spawner usable again for the next batch.
TEST(Spawner, StartsSpecsAsTheyAreMadeInOrder) {
  Spawner spawner(3);
  for (int batch = 0; batch < 2; ++batch) {
    std::vector<size_t> made;
    std::vector<SpawnOutcome> out = spawner.Start(6, [&](size_t i, SpawnSpec& spec) {
      made.push_back(i);
      if (i == 4) {
        spec.argv = {"/nonexistent/distrun-no-such-program"};
      } else {
        spec.argv = {"/bin/sh", "-c", "exit " + std::to_string(i)};
      }
      spec.env = {kPath};
    });
    EXPECT_EQ(made, (std::vector<size_t>{0, 1, 2, 3, 4, 5}));
    ASSERT_EQ(out.size(), 6u);
    for (size_t i = 0; i < out.size(); ++i) {
      if (i == 4) {
        ASSERT_TRUE(out[i].error);
        EXPECT_THROW(std::rethrow_exception(out[i].error), SpawnError);
        continue;
      }
      ASSERT_FALSE(out[i].error) << i;
      EXPECT_EQ(ExitCodeOf(out[i].child.Wait()), static_cast<int>(i));
    }
  }
}

// Pids of the processes whose environment holds `entry`.
std::vector<pid_t> ProcessesWith(const std::string& entry) {
  std::vector<pid_t> found;
  ForEachProcess([&](pid_t pid) {
    std::string env = ReadProcFile("/proc/" + std::to_string(pid) + "/environ");
    if (env.find(entry + '\0') != std::string::npos) found.push_back(pid);
  });
  return found;
}

// A spec that cannot be made ends the batch: the exception goes on, and every child started before it is
// gone (its Child ended it), none left running.
TEST(Spawner, MakeThatThrowsEndsTheChildrenStartedBefore) {
  Spawner spawner(2);
  const std::string marker = "DISTRUN_SPAWNER_TEST=" + std::to_string(::getpid());
  EXPECT_THROW(spawner.Start(5,
                             [&](size_t i, SpawnSpec& spec) {
                               if (i == 3) {
                                 // Spec 0 was handed to a helper when made: wait until it runs.
                                 for (int tries = 0; tries < 500 && ProcessesWith(marker).empty(); ++tries) {
                                   std::this_thread::sleep_for(std::chrono::milliseconds(10));
                                 }
                                 EXPECT_FALSE(ProcessesWith(marker).empty()) << "no child started";
                                 throw std::runtime_error("cannot make spec 3");
                               }
                               spec.argv = {"/bin/sleep", "30"};
                               spec.env = {kPath, marker};
                             }),
               std::runtime_error);
  EXPECT_EQ(ProcessesWith(marker), std::vector<pid_t>{});
  // The next batch runs.
  std::vector<SpawnOutcome> out = spawner.Start(1, [](size_t, SpawnSpec& spec) {
    spec.argv = {"/bin/true"};
    spec.env = {kPath};
  });
  ASSERT_FALSE(out[0].error);
  EXPECT_EQ(ExitCodeOf(out[0].child.Wait()), 0);
}

}  // namespace
}  // namespace distrun
