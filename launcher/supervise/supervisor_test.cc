#include "launcher/supervise/supervisor.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "detect/detection.h"
#include "launcher/process/output.h"
#include "test_support.h"

namespace distrun {
namespace {

using Seconds = std::chrono::duration<double>;

struct TestJob {
  Environment env;
  Options options;
  Plan plan;
};

// A local job of `workers` workers running `script` with sh, planned as distrun would.
TestJob MakeJob(int workers, const std::string& script, RawValues flags = {}) {
  TestJob job;
  job.env = testing::MakeEnv({{"PATH", "/usr/sbin:/usr/bin:/sbin:/bin"}, {"CUDA_VISIBLE_DEVICES", ""}});
  flags["nproc-per-node"] = RawValue{std::to_string(workers), "--nproc-per-node"};
  flags["cluster-detection-method"] = RawValue{"local", "--cluster-detection-method"};
  if (!flags.contains("grace-period")) flags["grace-period"] = RawValue{"0.3", "--grace-period"};
  if (!flags.contains("tag-output")) flags["tag-output"] = RawValue{"off", "--tag-output"};
  job.options = ResolveOptions(flags, job.env.vars, {});
  job.options.command = {"sh", "-c", script};
  Topology t = DetectTopology(job.env, job.options.topology);
  LocalLayout layout = ComputeLocalLayout(t, job.options, job.env);
  JobAssignment a = ProvisionalAssignment(t, layout, job.options);
  job.plan = MakePlan(t, layout, a, job.options, job.env);
  return job;
}

int RunJob(TestJob job, Seconds* took = nullptr) {
  auto start = std::chrono::steady_clock::now();
  Supervisor s(job.plan, job.options, job.env, MakeLogger("warn"));
  int code = s.Run();
  if (took) *took = std::chrono::steady_clock::now() - start;
  return code;
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() / ("distrun-supervisor-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string Read(const std::string& name) const {
    std::ifstream in(path / name);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
};

TEST(SupervisorRun, AllWorkersSucceed) {
  TempDir dir;
  EXPECT_EQ(RunJob(MakeJob(3, "echo $RANK >> " + dir.path.string() + "/ran")), 0);
  std::string ran = dir.Read("ran");
  for (const char* rank : {"0\n", "1\n", "2\n"}) EXPECT_NE(ran.find(rank), std::string::npos) << ran;
}

TEST(SupervisorRun, FirstFailureIsTheRootCauseAndStopsTheOthers) {
  Seconds took{};
  int code = RunJob(MakeJob(3, "if [ $RANK = 1 ]; then exit 3; fi; exec sleep 30"), &took);
  EXPECT_EQ(code, 3);
  EXPECT_LT(took.count(), 10);
}

TEST(SupervisorRun, WorkerKilledBySignalGives128PlusN) {
  EXPECT_EQ(RunJob(MakeJob(1, "kill -KILL $$")), 137);
  EXPECT_EQ(RunJob(MakeJob(2, "if [ $RANK = 0 ]; then kill -SEGV $$; fi; exec sleep 30")), 139);
}

TEST(SupervisorRun, WorkersIgnoringTermAreKilledAfterTheGracePeriod) {
  TempDir dir;
  const std::string ready = dir.path.string() + "/ignoring";
  // Rank 1 fails once rank 0 ignores TERM.
  Seconds took{};
  int code = RunJob(MakeJob(2, "trap '' TERM; if [ $RANK = 1 ]; then while [ ! -e " + ready +
                                   " ]; do sleep 0.02; done; exit 4; fi; touch " + ready +
                                   "; while :; do sleep 0.05; done"),
                    &took);
  EXPECT_EQ(code, 4);
  EXPECT_GE(took.count(), 0.3);
  EXPECT_LT(took.count(), 10);
}

TEST(SupervisorRun, RestartsIncrementTheRestartCount) {
  TempDir dir;
  std::string log = dir.path.string() + "/attempts";
  std::string script = "echo $DISTRUN_RESTART_COUNT/$TORCHELASTIC_RESTART_COUNT >> " + log +
                       "; [ $DISTRUN_RESTART_COUNT -ge 2 ]";
  EXPECT_EQ(RunJob(MakeJob(1, script, {{"max-restarts", RawValue{"3", "--max-restarts"}}})), 0);
  EXPECT_EQ(dir.Read("attempts"), "0/0\n1/1\n2/2\n");
}

TEST(SupervisorRun, RestartsRunOutWithTheRootCausesCode) {
  TempDir dir;
  std::string script = "echo x >> " + dir.path.string() + "/attempts; exit 9";
  EXPECT_EQ(RunJob(MakeJob(1, script, {{"max-restarts", RawValue{"1", "--max-restarts"}}})), 9);
  EXPECT_EQ(dir.Read("attempts"), "x\nx\n");
}

TEST(SupervisorRun, TimeoutExits124) {
  Seconds took{};
  int code = RunJob(MakeJob(2, "exec sleep 30", {{"timeout", RawValue{"0.3", "--timeout"}}}), &took);
  EXPECT_EQ(code, kTimeoutExit);
  EXPECT_LT(took.count(), 10);
}

TEST(SupervisorRun, CommandNotFoundExits127) {
  TestJob job = MakeJob(2, "");
  job.options.command = {"distrun-no-such-command-xyz"};
  EXPECT_EQ(RunJob(job), 127);
}

TEST(SupervisorRun, OrphansAreKilledAtTeardown) {
  TempDir dir;
  std::string pid_file = dir.path.string() + "/orphan";
  // The worker leaves a process behind in its own session and exits 0 at once.
  EXPECT_EQ(RunJob(MakeJob(1, "setsid sleep 30 </dev/null >/dev/null 2>&1 & echo $! > " + pid_file)), 0);
  pid_t orphan = static_cast<pid_t>(std::atol(dir.Read("orphan").c_str()));
  ASSERT_GT(orphan, 0);
  EXPECT_FALSE(std::filesystem::exists("/proc/" + std::to_string(orphan)));
}

TEST(SupervisorRun, ExtraFdCanStopTheJobWithItsCode) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  TestJob job = MakeJob(2, "exec sleep 30");
  Supervisor s(job.plan, job.options, job.env, MakeLogger("off"));
  int calls = 0;
  s.WatchFd(read_end.get(), POLLIN, [&](short revents) {
    EXPECT_TRUE(revents & POLLIN);
    ++calls;
    s.UnwatchFd(read_end.get());
    s.StopJob(42, "the coordinator reported a failure on another node");
  });
  ASSERT_EQ(::write(write_end.get(), "x", 1), 1);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(s.Run(), 42);
  EXPECT_EQ(calls, 1);
  EXPECT_LT(Seconds(std::chrono::steady_clock::now() - start).count(), 10);
}

TEST(SupervisorRun, StopJobBeforeRunStartsNothing) {
  TempDir dir;
  TestJob job = MakeJob(1, "touch " + dir.path.string() + "/started");
  Supervisor s(job.plan, job.options, job.env, MakeLogger("off"));
  s.StopJob(5, "told to stop");
  EXPECT_EQ(s.Run(), 5);
  EXPECT_FALSE(std::filesystem::exists(dir.path / "started"));
}

TEST(SupervisorRun, SignalMaskIsRestoredAfterwards) {
  sigset_t before, after;
  ::sigprocmask(SIG_BLOCK, nullptr, &before);
  EXPECT_EQ(RunJob(MakeJob(1, "true")), 0);
  ::sigprocmask(SIG_BLOCK, nullptr, &after);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGUSR1}) {
    EXPECT_EQ(sigismember(&before, sig), sigismember(&after, sig)) << sig;
  }
}

}  // namespace
}  // namespace distrun
