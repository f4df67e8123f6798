#include "launcher/supervise/node_check.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>

#include "detect/test_temp_root.h"

namespace distrun {
namespace {

std::vector<std::string> Env(const std::string& extra = "") {
  std::vector<std::string> env = {"PATH=/usr/bin:/bin"};
  if (!extra.empty()) env.push_back(extra);
  return env;
}

TEST(NodeCheck, ExitStatusDecides) {
  EXPECT_TRUE(RunNodeCheck("true", Env(), 10).ok);
  NodeCheckResult r = RunNodeCheck("exit 3", Env(), 10);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.problem, "exit code 3");
  EXPECT_EQ(RunNodeCheck("kill -SEGV $$", Env(), 10).problem, "signal SIGSEGV");
  // It sees the environment it is given.
  EXPECT_TRUE(RunNodeCheck("test \"$DISTRUN_EPOCH\" = 2", Env("DISTRUN_EPOCH=2"), 10).ok);
}

TEST(NodeCheck, ACheckRunningPastItsTimeoutFailsAndLeavesNothingBehind) {
  testing::TempRoot dir;
  const std::string pid_file = (dir.path() / "child").string();
  auto start = std::chrono::steady_clock::now();
  NodeCheckResult r = RunNodeCheck("sleep 30 & echo $! > " + pid_file + "; wait", Env(), 0.3);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.problem, "ran past 0.3s (--node-check-timeout)");
  int child = 0;
  std::ifstream(pid_file) >> child;
  ASSERT_GT(child, 0);
  // The background sleep went with the check's process group (it is not our child: kill(0) checks it).
  for (int i = 0; i < 200 && ::kill(child, 0) == 0; ++i) ::usleep(10'000);
  EXPECT_NE(::kill(child, 0), 0);
}

TEST(NodeCheck, BlockedSignalsAreNotInherited) {
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ::pthread_sigmask(SIG_BLOCK, &term, &old);
  // A check that SIGTERMs itself must die of it, as it would outside distrun.
  NodeCheckResult r = RunNodeCheck("kill -TERM $$; sleep 5", Env(), 10);
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  EXPECT_EQ(r.problem, "signal SIGTERM");
}

}  // namespace
}  // namespace distrun
