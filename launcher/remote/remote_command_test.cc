#include "launcher/remote/remote_command.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "detect/errors.h"
#include "tests/test_support.h"

namespace distrun {
namespace {

using testing::MakeEnv;
using testing::ParseArgs;
using testing::ParseArgsError;

Options Resolve(const std::vector<std::string>& args,
                std::initializer_list<std::pair<std::string, std::string>> vars = {}) {
  CommandLine cl = ParseArgs(args);
  Options o = ResolveOptions(cl.flags, MakeEnv(vars).vars, {}, cl.defaults);
  o.command = cl.command;
  return o;
}

bool Has(const std::vector<std::string>& argv, const std::string& word) {
  return std::find(argv.begin(), argv.end(), word) != argv.end();
}

TEST(RemoteCommand, DashHAndDashXAreMpirunsSpellings) {
  Options o =
      Resolve({"-H", "a:2,b", "-x", "SEED=1,2", "-xWANDB_*", "--forward-env", "NCCL_DEBUG", "--", "t"});
  ASSERT_EQ(o.hosts.size(), 2u);
  EXPECT_EQ(o.hosts[0].slots, 2);
  EXPECT_EQ(o.forward_env, (std::vector<std::string>{"SEED=1,2", "WANDB_*", "NCCL_DEBUG"}));
  EXPECT_EQ(Resolve({"--host=c", "--", "t"}).hosts[0].host, "c");
  Options from_env = Resolve({"--", "t"}, {{"DISTRUN_HOSTS", "x,y:3"}, {"DISTRUN_FORWARD_ENV", "A,B=2"}});
  EXPECT_EQ(from_env.hosts.size(), 2u);
  EXPECT_EQ(from_env.forward_env, (std::vector<std::string>{"A", "B=2"}));
  EXPECT_NE(ParseArgsError({"-H"}).find("needs a value"), std::string::npos);
}

TEST(RemoteCommand, HostsAndHostfileExcludeEachOther) {
  const std::string file = ::testing::TempDir() + "/hosts-" + std::to_string(::getpid());
  std::ofstream(file) << "b slots=2\n";
  CommandLine cl = ParseArgs({"-H", "a", "--", "t"});
  try {
    ResolveOptions(cl.flags, MakeEnv({{"DISTRUN_HOSTFILE", file}}).vars, {}, cl.defaults);
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--hosts and --hostfile both name the job's hosts; give one of them");
  }
  CommandLine only_file = ParseArgs({"--hostfile", file, "--", "t"});
  Options o = ResolveOptions(only_file.flags, MakeEnv({}).vars, {}, only_file.defaults);
  ASSERT_EQ(o.hosts.size(), 1u);
  EXPECT_EQ(o.hosts[0].slots, 2);
  std::remove(file.c_str());
}

TEST(RemoteCommand, SshNeverPromptsAndTheUsersOptionsComeFirst) {
  Options o = Resolve(
      {"-H", "root@a", "--ssh-args", "-p 2222 -F '/my dir/config'", "--ssh-connect-timeout", "5", "--", "t"});
  std::vector<std::string> ssh = SshCommand(o, o.hosts[0], "/opt/d/distrun");
  const std::vector<std::string> head = {"ssh",
                                         "-T",
                                         "-x",
                                         "-p",
                                         "2222",
                                         "-F",
                                         "/my dir/config",
                                         "-o",
                                         "BatchMode=yes",
                                         "-o",
                                         "ConnectTimeout=5"};
  ASSERT_GE(ssh.size(), head.size());
  EXPECT_TRUE(std::equal(head.begin(), head.end(), ssh.begin()));
  EXPECT_EQ(ssh[ssh.size() - 3], "--");
  EXPECT_EQ(ssh[ssh.size() - 2], "root@a");
  EXPECT_EQ(ssh.back(), "exec /opt/d/distrun --remote-node");
}

TEST(RemoteCommand, EachHostGetsTheOptionsAndItsPlaceButNotTheLaunchersOwn) {
  Options o = Resolve({"-H", "a:2,b", "--grace-period", "5", "--max-restarts", "1", "--ssh-args", "-p 22",
                       "-x", "A=1", "--", "python3", "-u", "train.py"},
                      {{"DISTRUN_LOG_LEVEL", "debug"}});
  NodeZero zero{"a", 41000};
  std::vector<std::string> b = RemoteDistrunArgs(o, "/d/distrun", 1, 2, zero, "run7", std::nullopt, false);
  EXPECT_EQ(b[0], "/d/distrun");
  EXPECT_EQ(b[1], "--launcher-channel");
  EXPECT_TRUE(Has(b, "--grace-period=5"));
  EXPECT_TRUE(Has(b, "--max-restarts=1"));
  EXPECT_TRUE(Has(b, "--log-level=debug"));  // from the launcher's variable
  EXPECT_TRUE(Has(b, "--num-nodes=2"));
  EXPECT_TRUE(Has(b, "--node-rank=1"));
  EXPECT_TRUE(Has(b, "--coordinator-address=a:41000"));
  EXPECT_TRUE(Has(b, "--run-id=run7"));
  EXPECT_TRUE(Has(b, "--cluster-detection-method=deactivate"));
  EXPECT_FALSE(Has(b, "--nproc-per-node=2"));
  for (const std::string& w : b) {
    EXPECT_FALSE(w.starts_with("--hosts") || w.starts_with("--ssh") || w.starts_with("--forward-env")) << w;
  }
  const std::vector<std::string> tail = {"--", "python3", "-u", "train.py"};
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), b.end() - 4));
  std::vector<std::string> a = RemoteDistrunArgs(o, "/d/distrun", 0, 2, {"fe80::1", 5}, "r", 2, true);
  EXPECT_EQ(a[2], "--dry-run");
  EXPECT_TRUE(Has(a, "--nproc-per-node=2"));
  EXPECT_TRUE(Has(a, "--coordinator-address=[fe80::1]:5"));
}

}  // namespace
}  // namespace distrun
