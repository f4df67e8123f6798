#include "runtime/auth/munge_socket.h"

#include <gtest/gtest.h>

#include "detect/test_temp_root.h"
#include "runtime/auth/slurm_conf.h"

namespace distrun {
namespace {

using testing::TempRoot;

// What ReadSlurmConfMunge reads: SLURM_CONF's value and the file system (a private root).
struct Conf {
  std::string slurm_conf;
  std::filesystem::path root;
};
Conf EnvIn(const TempRoot& root, std::initializer_list<std::pair<std::string, std::string>> vars) {
  Conf c{"", root.path()};
  for (const auto& [name, value] : vars) {
    if (name == "SLURM_CONF") c.slurm_conf = value;
  }
  return c;
}
SlurmConfMunge ReadSlurmConfMunge(const Conf& c) { return distrun::ReadSlurmConfMunge(c.slurm_conf, c.root); }
MungeSocket ChooseMungeSocket(const std::optional<std::string>& given, const std::string& source,
                              const Conf& c) {
  return distrun::ChooseMungeSocket(given, source, c.slurm_conf, c.root);
}

TEST(SlurmConf, AuthInfosSocketIsMungedsSocket) {
  TempRoot root;
  root.Write("etc/slurm/slurm.conf",
             "ClusterName=lab  # comment\nAuthType=auth/munge\nauthinfo=ttl=60,socket=/run/lab/munge.sock\n"
             "NodeName=node[1-3] CPUs=8 State=UNKNOWN\n");
  SlurmConfMunge m = ReadSlurmConfMunge(EnvIn(root, {}));
  EXPECT_EQ(m.socket, "/run/lab/munge.sock");
  EXPECT_EQ(m.file, "/etc/slurm/slurm.conf");
  EXPECT_EQ(m.problem, "");
}

TEST(SlurmConf, SlurmConfNamesTheFileAndIncludesAreFollowed) {
  TempRoot root;
  root.Write("lab/etc/slurm.conf", "ClusterName=lab\nInclude auth.conf\ninclude /lab/etc/conf.d/*.conf\n");
  root.Write("lab/etc/auth.conf", "AuthInfo=socket=/first\n");
  // Later lines win: the wildcard's files, in name order.
  root.Write("lab/etc/conf.d/10-a.conf", "AuthType=auth/munge\n");
  root.Write("lab/etc/conf.d/20-b.conf", "AuthInfo=socket=/run/munge-lab/munge.socket\n");
  root.Write("etc/slurm/slurm.conf", "AuthInfo=socket=/not/this/one\n");
  SlurmConfMunge m = ReadSlurmConfMunge(EnvIn(root, {{"SLURM_CONF", "/lab/etc/slurm.conf"}}));
  EXPECT_EQ(m.socket, "/run/munge-lab/munge.socket");
  EXPECT_EQ(m.file, "/lab/etc/conf.d/20-b.conf");
  EXPECT_EQ(m.config, "/lab/etc/slurm.conf");
}

TEST(SlurmConf, NoSocketNoFileOrABadFile) {
  TempRoot root;
  // No slurm.conf at all (a workstation): nothing, and nothing to say.
  SlurmConfMunge none = ReadSlurmConfMunge(EnvIn(root, {}));
  EXPECT_EQ(none.socket, "");
  EXPECT_EQ(none.problem, "");
  root.Write("etc/slurm/slurm.conf", "AuthType=auth/munge\n");
  EXPECT_EQ(ReadSlurmConfMunge(EnvIn(root, {})).socket, "");
  // SLURM_CONF names a file that cannot be read; an include that loops.
  SlurmConfMunge missing = ReadSlurmConfMunge(EnvIn(root, {{"SLURM_CONF", "/nowhere/slurm.conf"}}));
  EXPECT_EQ(missing.problem,
            "the munge socket in Slurm's configuration is unknown: cannot read /nowhere/slurm.conf");
  root.Write("loop/slurm.conf", "Include slurm.conf\n");
  SlurmConfMunge loop = ReadSlurmConfMunge(EnvIn(root, {{"SLURM_CONF", "/loop/slurm.conf"}}));
  EXPECT_EQ(loop.problem,
            "the munge socket in Slurm's configuration is unknown: /loop/slurm.conf includes itself "
            "(Include lines loop)");
  root.Write("bad/slurm.conf", "Include\n");
  EXPECT_NE(ReadSlurmConfMunge(EnvIn(root, {{"SLURM_CONF", "/bad/slurm.conf"}})).problem, "");
}

TEST(MungeSocket, TheUsersChoiceThenSlurmsThenLibmunges) {
  TempRoot root;
  root.Write("etc/slurm/slurm.conf", "AuthInfo=socket=/run/lab/munge.sock\n");
  Conf env = EnvIn(root, {});
  MungeSocket given = ChooseMungeSocket(std::string("/mine"), "DISTRUN_MUNGE_SOCKET", env);
  EXPECT_EQ(given.Describe(), "/mine (DISTRUN_MUNGE_SOCKET)");
  MungeSocket slurm = ChooseMungeSocket(std::nullopt, "", env);
  EXPECT_EQ(slurm.Describe(), "/run/lab/munge.sock (AuthInfo in /etc/slurm/slurm.conf)");
  EXPECT_EQ(slurm.warning, "");
  TempRoot empty;
  MungeSocket neither = ChooseMungeSocket(std::nullopt, "", EnvIn(empty, {}));
  EXPECT_EQ(neither.Describe(), "libmunge's default socket");
  MungeSocket bad = ChooseMungeSocket(std::nullopt, "", EnvIn(empty, {{"SLURM_CONF", "/gone.conf"}}));
  EXPECT_EQ(bad.path, "");
  EXPECT_EQ(bad.warning,
            "the munge socket in Slurm's configuration is unknown: cannot read /gone.conf; using libmunge's "
            "default socket");
}

}  // namespace
}  // namespace distrun
