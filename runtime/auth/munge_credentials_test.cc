// munge credentials through libmunge.so.2 against a private munged (munge_test_daemon.h).

#include "runtime/auth/munge_credentials.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "runtime/auth/munge_test_daemon.h"

namespace distrun {
namespace {

class MungeCredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    munge = daemon.Credentials(&why);
    if (!munge) GTEST_SKIP() << why;
  }
  testing::MungeTestDaemon daemon;
  std::shared_ptr<MungeCredentials> munge;
};

TEST_F(MungeCredentialsTest, ACredentialCarriesItsPayloadAndTheEncodersUserOnce) {
  std::string why;
  std::optional<std::string> credential = munge->Encode("distrun-agent/1 run=r1 node=2", &why);
  ASSERT_TRUE(credential) << why;
  EXPECT_TRUE(credential->starts_with("MUNGE:")) << *credential;
  std::optional<MungeDecoded> decoded = munge->Decode(*credential, &why);
  ASSERT_TRUE(decoded) << why;
  EXPECT_EQ(decoded->payload, "distrun-agent/1 run=r1 node=2");
  EXPECT_EQ(decoded->uid, ::geteuid());
  EXPECT_EQ(decoded->gid, ::getegid());
  // munged's replay cache: the same credential is refused the second time.
  EXPECT_FALSE(munge->Decode(*credential, &why));
  EXPECT_NE(why.find("replayed"), std::string::npos) << why;
}

TEST_F(MungeCredentialsTest, BadCredentialsAndADownDaemonAreNamed) {
  std::string why;
  EXPECT_FALSE(munge->Decode("MUNGE:not-a-credential:", &why));
  EXPECT_NE(why.find("bad munge credential"), std::string::npos) << why;
  EXPECT_TRUE(munge->Probe(&why)) << why;
  daemon.Stop();
  EXPECT_FALSE(munge->Encode("x", &why));
  EXPECT_NE(why.find("munged does not answer at " + daemon.socket()), std::string::npos) << why;
  EXPECT_FALSE(munge->Probe(&why));
}

TEST(MungeCredentialsLoad, ANonexistentSocketIsMungedDown) {
  std::string why;
  auto munge = MungeCredentials::Load("/nonexistent/munge.socket", &why);
  if (!munge) GTEST_SKIP() << why;
  EXPECT_FALSE(munge->Encode("x", &why));
  EXPECT_NE(why.find("munged does not answer at /nonexistent/munge.socket"), std::string::npos) << why;
}

}  // namespace
}  // namespace distrun
