#include "launcher/job/job_protection.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include "detect/errors.h"
#include "detect/test_temp_root.h"
#include "runtime/auth/munge_test_daemon.h"
#include "runtime/auth/token_check.h"
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

// A job of `nodes` distrun processes on as many hosts.
Plan HostsJob(int nodes) {
  Plan plan = JobOf(nodes);
  plan.topology.num_nodes = nodes;
  for (int i = 1; i <= nodes; ++i) plan.topology.hosts.push_back("node" + std::to_string(i));
  return plan;
}

class JobProtectionTest : public ::testing::Test {
 protected:
  Options WithSocket(MungeUse use, const std::string& socket) {
    Options o;
    o.munge = use;
    o.munge_socket = socket;
    return o;
  }
  testing::MungeTestDaemon daemon;
};

TEST_F(JobProtectionTest, ASingleHostJobIsProtectedByLoopbackAndNeedsNoMunge) {
  JobProtection p = ResolveProtection(JobOf(1), Options{}, MakeEnv({}));
  EXPECT_EQ(p.kind, JobProtection::Kind::kLoopback);
  EXPECT_FALSE(p.munge);
  EXPECT_EQ(p.worker_token, p.token.value);
}

TEST_F(JobProtectionTest, WithoutATokenMungeProtectsAMultiHostJobAndNodeZeroMakesTheWorkersToken) {
  if (!daemon.problem().empty()) GTEST_SKIP() << daemon.problem();
  JobProtection p = ResolveProtection(HostsJob(3), WithSocket(MungeUse::kAuto, daemon.socket()), MakeEnv({}));
  EXPECT_EQ(p.kind, JobProtection::Kind::kMunge);
  ASSERT_TRUE(p.munge);
  EXPECT_TRUE(p.token.insecure);
  EXPECT_EQ(p.worker_token.size(), 32u);
  EXPECT_NE(p.worker_token, p.token.value);  // the derived token is no secret: never the workers'
  EXPECT_EQ(p.Describe(),
            "munge: node 0 admits agents of its own user only and hands the workers its token; "
            "munged at " +
                daemon.socket() + " (--munge-socket)");
}

// Without --munge-socket, the socket Slurm's configuration names (a cluster that runs munged elsewhere).
TEST_F(JobProtectionTest, MungedsSocketFromSlurmsConfiguration) {
  if (!daemon.problem().empty()) GTEST_SKIP() << daemon.problem();
  testing::TempRoot root;
  root.Write("lab/slurm.conf", "AuthType=auth/munge\nAuthInfo=socket=" + daemon.socket() + "\n");
  Environment env = MakeEnv({{"SLURM_CONF", (root.path() / "lab/slurm.conf").string()}});
  JobProtection p = ResolveProtection(HostsJob(3), WithSocket(MungeUse::kAuto, ""), env);
  EXPECT_EQ(p.kind, JobProtection::Kind::kMunge);
  EXPECT_EQ(p.munge_socket.source, "AuthInfo in " + (root.path() / "lab/slurm.conf").string());
  EXPECT_EQ(p.munge_socket.warning, "");
  // An unreadable slurm.conf: libmunge's default socket (no munged there), said in one line.
  Environment bad = MakeEnv({{"SLURM_CONF", "/nonexistent/slurm.conf"}});
  JobProtection q = ResolveProtection(HostsJob(3), WithSocket(MungeUse::kAuto, ""), bad);
  EXPECT_EQ(q.munge_socket.warning,
            "the munge socket in Slurm's configuration is unknown: cannot read "
            "/nonexistent/slurm.conf; using libmunge's default socket");
  EXPECT_EQ(q.kind, JobProtection::Kind::kNone);
}

TEST_F(JobProtectionTest, AnArrivalWithoutTheJobsTokenProvesItsUserWithMunge) {
  if (!daemon.problem().empty()) GTEST_SKIP() << daemon.problem();
  Options o = WithSocket(MungeUse::kAuto, daemon.socket());
  o.join = "node1:61500";
  JobProtection p = ResolveProtection(JobOf(1), o, MakeEnv({}));  // planned alone: its token is its own
  EXPECT_EQ(p.kind, JobProtection::Kind::kMunge);
  EXPECT_TRUE(p.munge);
  EXPECT_EQ(p.Describe().find("and the job token"), std::string::npos);
}

TEST_F(JobProtectionTest, AUserTokenIsEnoughUnlessMungeIsRequired) {
  if (!daemon.problem().empty()) GTEST_SKIP() << daemon.problem();
  auto env = MakeEnv({{"DISTRUN_TOKEN", "users-secret"}});
  JobProtection token = ResolveProtection(HostsJob(2), WithSocket(MungeUse::kAuto, daemon.socket()), env);
  EXPECT_EQ(token.kind, JobProtection::Kind::kToken);
  EXPECT_FALSE(token.munge);
  EXPECT_EQ(token.worker_token, "users-secret");
  JobProtection both = ResolveProtection(HostsJob(2), WithSocket(MungeUse::kRequire, daemon.socket()), env);
  EXPECT_EQ(both.kind, JobProtection::Kind::kMunge);
  EXPECT_TRUE(both.munge);
  EXPECT_EQ(both.worker_token, "users-secret");
  EXPECT_NE(both.Describe().find("; and the job token"), std::string::npos);
}

TEST_F(JobProtectionTest, WithoutMungeTheJobIsUnprotectedAndSaysWhyOrRequireStopsIt) {
  const std::string missing = "/nonexistent/munge.socket";
  JobProtection none = ResolveProtection(HostsJob(2), WithSocket(MungeUse::kAuto, missing), MakeEnv({}));
  EXPECT_EQ(none.kind, JobProtection::Kind::kNone);
  EXPECT_FALSE(none.munge);
  EXPECT_EQ(none.worker_token, none.token.value);  // as before munge: the derived token
  EXPECT_NE(none.Describe().find("none: no job token, and munge does not work: "), std::string::npos)
      << none.Describe();
  EXPECT_NE(none.Describe().find("munged does not answer at " + missing + ": "), std::string::npos)
      << none.Describe();
  // No socket, no munged: libmunge was not even loaded (each test runs in a process of its own).
  EXPECT_EQ(::dlopen("libmunge.so.2", RTLD_NOW | RTLD_NOLOAD), nullptr);
  JobProtection off = ResolveProtection(HostsJob(2), WithSocket(MungeUse::kOff, missing), MakeEnv({}));
  EXPECT_EQ(off.Describe(), "none: no job token and munge is off");
  try {
    ResolveProtection(HostsJob(2), WithSocket(MungeUse::kRequire, missing), MakeEnv({}));
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--munge require, but "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("name its socket with --munge-socket"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace distrun
