#include "launcher/runtime_link.h"

#include <gtest/gtest.h>

#include "detect/errors.h"
#include "detect/test_temp_root.h"
#include "runtime/token_check.h"
#include "test_support.h"

namespace distrun {
namespace {

using testing::MakeEnv;

Plan JobOf(int units, const std::string& job_id = "4242") {
  Plan plan;
  plan.layout.units = units;
  plan.topology.job_id = job_id;
  plan.topology.coordinator_host = "node1";
  plan.topology.coordinator_port = 61500;
  plan.assignment.coordinator_address = "node1:61500";
  return plan;
}

TEST(JobToken, TheVariableWinsOverEverything) {
  Plan plan = JobOf(4);
  plan.topology.job_token = "from-mpi";
  Options options;
  options.token_file = "/nonexistent";
  JobToken t = ResolveJobToken(plan, options, MakeEnv({{"DISTRUN_TOKEN", "from-env"}}));
  EXPECT_EQ(t.value, "from-env");
  EXPECT_FALSE(t.insecure);
}

TEST(JobToken, TokenFileIsReadAndTrimmed) {
  testing::TempRoot dir;
  dir.Write("token", "  s3cret-value\n");
  Options options;
  options.token_file = (dir.path() / "token").string();
  Plan plan = JobOf(4);
  plan.topology.job_token = "from-mpi";
  EXPECT_EQ(ResolveJobToken(plan, options, MakeEnv({})).value, "s3cret-value");
}

TEST(JobToken, UnusableTokenFilesAreUsageErrorsThatSayWhatToDo) {
  testing::TempRoot dir;
  dir.Write("empty", "\n");
  dir.Write("two", "one two\n");
  dir.Write("long", std::string(kMaxTokenBytes + 1, 'x') + "\n");
  Options options;
  for (const char* name : {"missing", "empty", "two", "long"}) {
    options.token_file = (dir.path() / name).string();
    try {
      ResolveJobToken(JobOf(2), options, MakeEnv({}));
      ADD_FAILURE() << name << " was accepted";
    } catch (const UsageError& e) {
      std::string message = e.what();
      EXPECT_NE(message.find("--token-file"), std::string::npos) << message;
      EXPECT_NE(message.find(*options.token_file), std::string::npos) << message;
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
  }
}

TEST(JobToken, AMalformedVariableIsAUsageErrorNotSentToTheCoordinator) {
  // gRPC metadata carries printable ASCII only, and the agent channel reads at most kMaxTokenBytes of a
  // hello before it trusts the peer: a token beyond either would fail later and less clearly.
  for (const std::string& bad : {std::string("two words"), std::string("tab\there"),
                                 std::string("caf\xc3\xa9"), std::string(kMaxTokenBytes + 1, 'x')}) {
    try {
      ResolveJobToken(JobOf(2), Options{}, MakeEnv({{"DISTRUN_TOKEN", bad}}));
      ADD_FAILURE() << bad.substr(0, 20) << " was accepted";
    } catch (const UsageError& e) {
      std::string message = e.what();
      EXPECT_TRUE(message.starts_with("DISTRUN_TOKEN ")) << message;
      EXPECT_NE(message.find("/dev/urandom"), std::string::npos) << message;
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
      EXPECT_EQ(message.find(bad), std::string::npos) << "the token itself is never shown: " << message;
    }
  }
  EXPECT_EQ(
      ResolveJobToken(JobOf(2), Options{}, MakeEnv({{"DISTRUN_TOKEN", std::string(kMaxTokenBytes, 'x')}}))
          .value.size(),
      kMaxTokenBytes);
}

TEST(JobToken, DetectionsTokenIsUsedWhenNothingIsGiven) {
  Plan plan = JobOf(4);
  plan.topology.job_token = "from-mpi";
  JobToken t = ResolveJobToken(plan, Options{}, MakeEnv({}));
  EXPECT_EQ(t.value, "from-mpi");
  EXPECT_FALSE(t.insecure);
}

TEST(JobToken, AJobOfOneDistrunMakesAFreshSecret) {
  JobToken a = ResolveJobToken(JobOf(1), Options{}, MakeEnv({}));
  JobToken b = ResolveJobToken(JobOf(1), Options{}, MakeEnv({}));
  EXPECT_EQ(a.value.size(), 32u);
  EXPECT_NE(a.value, b.value);
  EXPECT_FALSE(a.insecure);
}

TEST(JobToken, SeveralDistrunsWithoutATokenShareOneDerivedFromTheJobAndSaySo) {
  JobToken a = ResolveJobToken(JobOf(3), Options{}, MakeEnv({}));
  JobToken b = ResolveJobToken(JobOf(3), Options{}, MakeEnv({}));
  JobToken other_job = ResolveJobToken(JobOf(3, "4243"), Options{}, MakeEnv({}));
  EXPECT_TRUE(a.insecure);
  EXPECT_EQ(a.value, b.value);
  EXPECT_NE(a.value, other_job.value);
}

}  // namespace
}  // namespace distrun
