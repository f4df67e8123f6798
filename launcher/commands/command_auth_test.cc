#include "launcher/commands/command_auth.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "runtime/auth/munge_test_daemon.h"

namespace distrun {
namespace {

using Env = std::map<std::string, std::string, std::less<>>;

TEST(CommandAuth, TheTokenWhereItIsSetAndNoMungeAsked) {
  GrpcClientConfig c;
  c.address = "127.0.0.1:4000";
  // The socket named would fail: it is never tried when the token is there.
  const CommandAuth auth =
      SetCommandAuth(Env{{"DISTRUN_TOKEN", "t0k"}, {"DISTRUN_MUNGE_SOCKET", "/nonexistent/socket"}}, &c);
  EXPECT_EQ(c.token, "t0k");
  EXPECT_FALSE(c.credential);
  EXPECT_FALSE(auth.munge);
  EXPECT_EQ(auth.munge_problem, "");
  EXPECT_EQ(RefusalMessage(auth, "h:4000", "wrong job token"),
            "the runtime at h:4000 refused the job token; DISTRUN_TOKEN must be the job's");
}

TEST(CommandAuth, AMungeCredentialPerCallWithoutTheToken) {
  testing::MungeTestDaemon daemon;
  std::string why;
  auto munge = daemon.Credentials(&why);
  if (!munge) GTEST_SKIP() << why;
  GrpcClientConfig c;
  c.address = "127.0.0.1:4000";
  const CommandAuth auth = SetCommandAuth(Env{{"DISTRUN_MUNGE_SOCKET", daemon.socket()}}, &c);
  ASSERT_TRUE(auth.munge) << auth.munge_problem;
  EXPECT_EQ(c.token, "");
  ASSERT_TRUE(c.credential);
  const std::string first = c.credential(), second = c.credential();
  EXPECT_NE(first, second);  // each call its own
  auto decoded = munge->Decode(first, &why);
  ASSERT_TRUE(decoded) << why;
  EXPECT_EQ(decoded->payload, "distrun-client/1 port=4000");
  EXPECT_EQ(
      RefusalMessage(auth, "h:4000", "munge credential refused: replayed"),
      "the runtime at h:4000 refused this user's munge credential (munge credential refused: replayed); a "
      "job protected by a token needs DISTRUN_TOKEN set to it");
}

TEST(CommandAuth, NeitherTokenNorMungeSaysWhyMungeFailed) {
  GrpcClientConfig c;
  c.address = "127.0.0.1:4000";
  const CommandAuth auth = SetCommandAuth(Env{{"DISTRUN_MUNGE_SOCKET", "/nonexistent/munge.socket"}}, &c);
  EXPECT_FALSE(auth.munge);
  EXPECT_FALSE(c.credential);
  EXPECT_NE(auth.munge_problem, "");
  const std::string line = RefusalMessage(auth, "h:4000", "no job token");
  EXPECT_NE(line.find("DISTRUN_TOKEN must be the job's (no munge credential either: "), std::string::npos)
      << line;
}

}  // namespace
}  // namespace distrun
