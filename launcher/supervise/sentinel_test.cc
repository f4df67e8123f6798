#include "launcher/supervise/sentinel.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "launcher/process/spawn.h"

namespace distrun {
namespace {

using namespace std::string_literals;

TEST(SpawnSentinel, EnvironMatching) {
  std::string block = "A=1\0B=two\0C=\0"s;
  EXPECT_TRUE(EnvironHasAll(block, {"A=1"}));
  EXPECT_TRUE(EnvironHasAll(block, {"B=two", "A=1", "C="}));
  EXPECT_FALSE(EnvironHasAll(block, {"A=1", "B=tw"}));
  EXPECT_FALSE(EnvironHasAll(block, {"A="}));
  EXPECT_FALSE(EnvironHasAll(block, {}));
  EXPECT_FALSE(EnvironHasAll("", {"A=1"}));
}

TEST(SpawnSentinel, FingerprintPrefersDistrunsOwnVariables) {
  std::vector<std::pair<std::string, std::string>> env = {{"DISTRUN_PROCESS_ID", "3"},
                                                          {"DISTRUN_RUN_ID", "r"},
                                                          {"DISTRUN_COORDINATOR_ADDRESS", "h:1"},
                                                          {"DISTRUN_EPOCH", "1"},
                                                          {"RANK", "3"},
                                                          {"MASTER_ADDR", "h"},
                                                          {"MASTER_PORT", "2"},
                                                          {"TORCHELASTIC_RUN_ID", "r"},
                                                          {"TORCHELASTIC_RESTART_COUNT", "1"},
                                                          {"OMP_NUM_THREADS", "1"}};
  EXPECT_EQ(FingerprintOf(env),
            (std::vector<std::string>{"DISTRUN_RUN_ID=r", "DISTRUN_COORDINATOR_ADDRESS=h:1",
                                      "DISTRUN_PROCESS_ID=3", "DISTRUN_EPOCH=1"}));
  env.erase(env.begin(), env.begin() + 4);  // --export torch
  EXPECT_EQ(FingerprintOf(env), (std::vector<std::string>{"TORCHELASTIC_RUN_ID=r", "RANK=3", "MASTER_ADDR=h",
                                                          "MASTER_PORT=2", "TORCHELASTIC_RESTART_COUNT=1"}));
  EXPECT_TRUE(FingerprintOf({{"OMP_NUM_THREADS", "1"}}).empty());
}

// Whether `pid` has ended (gone, or a zombie nobody reaped yet); reaps it if it is ours.
bool Ended(pid_t pid) {
  ::waitpid(pid, nullptr, WNOHANG);
  std::string text = ReadProcFile("/proc/" + std::to_string(pid) + "/stat");
  if (text.empty()) return true;
  size_t close = text.rfind(')');
  return close != std::string::npos && text.substr(close + 2, 1) == "Z";
}

bool EndsWithin(pid_t pid, std::chrono::milliseconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (Ended(pid)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Ended(pid);
}

// A process that left its parent's session (setsid) and outlives its parent; returns its pid.
pid_t StartEscapee(const std::string& mark) {
  SpawnSpec spec;
  spec.argv = {"sh", "-c", "setsid sleep 30 </dev/null >/dev/null 2>&1 & echo $!"};
  spec.env = {"PATH=/usr/bin:/bin", mark};
  Child c = Child::Start(spec);
  ::fcntl(c.stdout_pipe().get(), F_SETFL, 0);
  char buf[64] = {};
  ssize_t n = ::read(c.stdout_pipe().get(), buf, sizeof(buf) - 1);
  c.Wait();
  return n > 0 ? static_cast<pid_t>(std::atol(buf)) : -1;
}

// Each behaviour holds for both ways of starting the sentinel: the distrun-sentinel program and a fork.
class Sentinels : public ::testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(Start, Sentinels,
                         ::testing::Values(std::string(DISTRUN_SENTINEL_PROGRAM), std::string()),
                         [](const auto& param_info) {
                           return param_info.param.empty() ? "Fork" : "Program";
                         });

TEST_P(Sentinels, DismissedSentinelKillsNothing) {
  std::string mark = "DISTRUN_SENTINEL_TEST=" + std::to_string(::getpid()) + "-dismissed";
  Sentinel s = Sentinel::Start(GetParam());
  ASSERT_GT(s.pid(), 0);
  s.AddFingerprints({{mark}});
  pid_t escapee = StartEscapee(mark);
  ASSERT_GT(escapee, 0);
  s.Dismiss();
  EXPECT_FALSE(Ended(escapee));
  ::kill(escapee, SIGKILL);
  EXPECT_TRUE(EndsWithin(escapee, std::chrono::seconds(5)));
}

TEST_P(Sentinels, SentinelSweepsWhenDistrunGoesAwayWithoutDismissing) {
  std::string mark = "DISTRUN_SENTINEL_TEST=" + std::to_string(::getpid()) + "-swept";
  pid_t escapee = -1;
  pid_t unrelated = -1;
  {
    Sentinel s = Sentinel::Start(GetParam());
    s.AddFingerprints({{"OTHER=1", mark}, {}, {mark}});
    escapee = StartEscapee(mark);
    unrelated = StartEscapee("DISTRUN_SENTINEL_TEST=unrelated");
    ASSERT_GT(escapee, 0);
    ASSERT_GT(unrelated, 0);
  }  // closing the socket is what distrun's death looks like to the sentinel
  EXPECT_TRUE(EndsWithin(escapee, std::chrono::seconds(5)));
  EXPECT_FALSE(Ended(unrelated)) << "only processes with the fingerprint are killed";
  ::kill(unrelated, SIGKILL);
  EXPECT_TRUE(EndsWithin(unrelated, std::chrono::seconds(5)));
}

TEST_P(Sentinels, SentinelRemovesDistrunsScratchDirectoriesAfterASweepOnly) {
  namespace fs = std::filesystem;
  const fs::path base = fs::temp_directory_path() / ("sentinel-scratch-" + std::to_string(::getpid()));
  fs::create_directories(base / "swept" / "stacks");
  fs::create_directories(base / "dismissed");
  pid_t sentinel = -1;
  {
    Sentinel s = Sentinel::Start(GetParam());
    sentinel = s.pid();
    s.AddScratch((base / "swept").string());
  }  // distrun's death, as the sentinel sees it
  // The sentinel is no child of this test once the Sentinel object is gone: wait for the directory.
  for (int i = 0; i < 250 && fs::exists(base / "swept"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(fs::exists(base / "swept")) << "sentinel " << sentinel;
  {
    Sentinel s = Sentinel::Start(GetParam());
    s.AddScratch((base / "dismissed").string());
    s.Dismiss();  // distrun removes its own directories when it ends normally
  }
  EXPECT_TRUE(fs::exists(base / "dismissed"));
  fs::remove_all(base);
}

TEST_P(Sentinels, KeepsNoDescriptorButItsSocketAndIsInItsOwnGroup) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);  // inherited by anything that does not close it: no close-on-exec
  Sentinel s = Sentinel::Start(GetParam());
  ::close(pipe_fds[1]);
  ASSERT_GT(s.pid(), 0);
  // The sentinel keeps no copy of the pipe's write end (it closes what it inherited as it starts): the
  // reader sees EOF.
  char c;
  EXPECT_EQ(::read(pipe_fds[0], &c, 1), 0);
  ::close(pipe_fds[0]);
  EXPECT_EQ(::getpgid(s.pid()), s.pid());
  s.Dismiss();
}

// Where it is looked for: launcher/process/companion_files_test.cc; here, that it is looked for by its name.
TEST(SpawnSentinel, ProgramIsFoundByItsName) {
  namespace fs = std::filesystem;
  fs::path root = fs::temp_directory_path() / ("distrun-sentinel-find-" + std::to_string(::getpid()));
  fs::create_directories(root / "bin");
  EXPECT_EQ(FindSentinelProgram((root / "bin" / "distrun").string()), "");
  fs::path beside = root / "bin" / kSentinelProgram;
  fs::copy_file("/bin/true", beside);
  EXPECT_EQ(FindSentinelProgram((root / "bin" / "distrun").string()), beside.string());
  fs::remove_all(root);
}

// Started on a thread: Take gives the running sentinel, which sweeps when its distrun goes; a program that
// cannot start is Take's error (no fork from a thread); one never taken is reaped by its SentinelStart.
TEST(SpawnSentinel, StartedOnAThread) {
  std::string mark = "DISTRUN_SENTINEL_TEST=" + std::to_string(::getpid()) + "-thread";
  pid_t escapee = -1;
  {
    SentinelStart start(DISTRUN_SENTINEL_PROGRAM);
    start.Finish();
    start.Finish();  // idempotent
    Sentinel s = start.Take();
    ASSERT_GT(s.pid(), 0);
    s.AddFingerprints({{mark}});
    escapee = StartEscapee(mark);
    ASSERT_GT(escapee, 0);
  }
  EXPECT_TRUE(EndsWithin(escapee, std::chrono::seconds(5)));

  SentinelStart broken("/nonexistent/distrun-sentinel");
  EXPECT_THROW(broken.Take(), std::runtime_error);

  pid_t untaken = -1;
  {
    SentinelStart start(DISTRUN_SENTINEL_PROGRAM);
    start.Finish();
    // The sentinel is this process's child: find it by its name among this process's children. The scan
    // reads each thread's list in turn, and the helper thread that spawned it may exit meanwhile, its
    // children moving to another thread's list: look again until a deadline.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (untaken <= 0 && std::chrono::steady_clock::now() < deadline) {
      for (pid_t pid : OwnChildren()) {
        if (ReadProcFile("/proc/" + std::to_string(pid) + "/comm").starts_with("distrun-sentine"))
          untaken = pid;
      }
      if (untaken <= 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_GT(untaken, 0);
  }
  EXPECT_TRUE(Ended(untaken));
}

TEST(SpawnSentinel, ProgramThatCannotStartFallsBackToAFork) {
  Sentinel s = Sentinel::Start("/nonexistent/distrun-sentinel");
  ASSERT_GT(s.pid(), 0);
  s.Dismiss();
}

}  // namespace
}  // namespace distrun
