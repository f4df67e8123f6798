#include "detect/mpi_probe.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <set>
#include <string>

#include "test_support.h"

namespace distrun {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::MakeEnv;
using ::testing::MatchesRegex;
using ::testing::Not;

TEST(MpiLibraries, OpenMpiRanksLoadOpenMpi) {
  EXPECT_THAT(MpiLibraries(MakeEnv({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "1"}})),
              ElementsAre("libmpi.so.40"));
}

TEST(MpiLibraries, PmiRanksLoadTheMpichFamily) {
  for (const char* variable :
       {"PMI_RANK", "PMI_FD", "PALS_RANKID", "MV2_COMM_WORLD_RANK", "MVP_COMM_WORLD_RANK"}) {
    EXPECT_THAT(MpiLibraries(MakeEnv({{variable, "0"}})), ElementsAre("libmpich.so.12", "libmpi.so.12"))
        << variable;
  }
}

TEST(MpiLibraries, UnknownLauncherTriesEveryKnownLibrary) {
  EXPECT_THAT(MpiLibraries(MakeEnv({{"PMIX_RANK", "0"}})),
              ElementsAre("libmpi.so.40", "libmpich.so.12", "libmpi.so.12"));
}

TEST(MpiLibraries, TheOverrideIsTheOnlyChoice) {
  EXPECT_THAT(MpiLibraries(MakeEnv(
                  {{"DISTRUN_MPI_LIBRARY", "/opt/mpi/lib/libmpi.so"}, {"OMPI_COMM_WORLD_SIZE", "4"}})),
              ElementsAre("/opt/mpi/lib/libmpi.so"));
  // An empty override is no override (`DISTRUN_MPI_LIBRARY= mpirun ...`).
  EXPECT_THAT(MpiLibraries(MakeEnv({{"DISTRUN_MPI_LIBRARY", ""}, {"OMPI_COMM_WORLD_SIZE", "4"}})),
              ElementsAre("libmpi.so.40"));
}

MpiProbeResult TwoNodes() {
  MpiProbeResult r;
  r.library = "libmpi.so.40";
  r.version = "Open MPI v4.1.4, package: Debian OpenMPI";
  r.rank = 5;
  r.size = 8;
  r.local_rank = 1;
  r.local_size = 4;
  r.node_rank = 1;
  r.num_nodes = 2;
  r.hosts = {"node001", "node002"};
  r.coordinator_port = 40001;
  r.master_port = 40002;
  r.jax_port = 40003;
  r.job_id = "0123456789ab";
  r.token = std::string(64, 'f');
  return r;
}

TEST(MpiProbeAnswer, RoundTrips) {
  MpiProbeOutcome back = DecodeMpiProbe(EncodeMpiProbe({TwoNodes(), ""}));
  ASSERT_TRUE(back.result) << back.error;
  const MpiProbeResult& r = *back.result;
  EXPECT_EQ(r.library, "libmpi.so.40");
  EXPECT_EQ(r.version, "Open MPI v4.1.4, package: Debian OpenMPI");
  EXPECT_EQ(r.rank, 5);
  EXPECT_EQ(r.size, 8);
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.local_size, 4);
  EXPECT_EQ(r.node_rank, 1);
  EXPECT_EQ(r.num_nodes, 2);
  EXPECT_THAT(r.hosts, ElementsAre("node001", "node002"));
  EXPECT_EQ(r.coordinator_port, 40001);
  EXPECT_EQ(r.master_port, 40002);
  EXPECT_EQ(r.jax_port, 40003);
  EXPECT_EQ(r.job_id, "0123456789ab");
  EXPECT_EQ(r.token, std::string(64, 'f'));
}

TEST(MpiProbeAnswer, ErrorsStayOneLine) {
  MpiProbeOutcome back = DecodeMpiProbe(EncodeMpiProbe({std::nullopt, "MPI_Init failed\nbadly"}));
  EXPECT_FALSE(back.result);
  EXPECT_EQ(back.error, "MPI_Init failed badly");
}

TEST(MpiProbeAnswer, MalformedAnswersAreErrors) {
  std::string full = EncodeMpiProbe({TwoNodes(), ""});
  EXPECT_THAT(DecodeMpiProbe(full.substr(0, full.size() - 1)).error, HasSubstr("cut short"));
  std::string no_token = full.substr(0, full.find("token "));
  EXPECT_THAT(DecodeMpiProbe(no_token).error, HasSubstr("'token'"));
  std::string bad_rank = full;
  bad_rank.replace(bad_rank.find("rank 5"), 6, "rank x");
  EXPECT_THAT(DecodeMpiProbe(bad_rank).error, HasSubstr("'rank'"));
  EXPECT_FALSE(DecodeMpiProbe("").result);
}

TEST(RunMpiProbe, NothingLoadableNamesWhatWasTriedAndTheFix) {
  MpiProbeOutcome out = RunMpiProbe({"/nonexistent/libmpi.so.40", "libdistrun-no-such-mpi.so.12"});
  ASSERT_FALSE(out.result);
  EXPECT_THAT(out.error, HasSubstr("/nonexistent/libmpi.so.40 (cannot open shared object file"));
  EXPECT_THAT(out.error, HasSubstr("libdistrun-no-such-mpi.so.12 (cannot open"));
  EXPECT_THAT(out.error, HasSubstr("DISTRUN_MPI_LIBRARY"));
  EXPECT_THAT(out.error, Not(HasSubstr("\n")));
}

TEST(RunMpiProbe, ALibraryThatIsNotMpiIsRefused) {
  // The C library loads but is neither ABI; the probe must not guess.
  MpiProbeOutcome out = RunMpiProbe({"libc.so.6"});
  ASSERT_FALSE(out.result);
  EXPECT_THAT(out.error,
              HasSubstr("libc.so.6 (no MPI_Get_library_version) is neither Open MPI nor of the MPICH"));
}

// Sets a variable of this test process for one test; the probe's child inherits the real environment.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedVariable() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// MPICH is one of the launchers distrun is tested with (scripts/install-deps.sh installs it).
constexpr const char* kMpich = "libmpich.so.12";

TEST(RunMpiProbe, RealMpichSingleton) {
  // Without a launcher's PMI variables, MPICH runs this process as a job of one.
  for (const char* name : {"PMI_FD", "PMI_PORT", "PMI_RANK", "PMI_SIZE", "PMI_ID"}) {
    ASSERT_EQ(std::getenv(name), nullptr) << name << " is set in the test's environment";
  }
  MpiProbeOutcome out = RunMpiProbe({kMpich});
  ASSERT_TRUE(out.result) << out.error << " (run scripts/install-deps.sh to install MPICH)";
  const MpiProbeResult& r = *out.result;
  EXPECT_EQ(r.library, kMpich);
  EXPECT_THAT(r.version, HasSubstr("MPICH"));
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.size, 1);
  EXPECT_EQ(r.local_rank, 0);
  EXPECT_EQ(r.local_size, 1);
  EXPECT_EQ(r.node_rank, 0);
  EXPECT_EQ(r.num_nodes, 1);
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  EXPECT_THAT(r.hosts, ElementsAre(std::string(host)));
  std::set<int> ports = {r.coordinator_port, r.master_port, r.jax_port};
  EXPECT_EQ(ports.size(), 3u);
  EXPECT_GT(*ports.begin(), 0);
  EXPECT_THAT(r.job_id, MatchesRegex("[0-9a-f]{12}"));
  EXPECT_THAT(r.token, MatchesRegex("[0-9a-f]{64}"));
  // Each run chooses afresh.
  MpiProbeOutcome again = RunMpiProbe({kMpich});
  ASSERT_TRUE(again.result) << again.error;
  EXPECT_NE(again.result->token, r.token);
  EXPECT_NE(again.result->job_id, r.job_id);
}

TEST(RunMpiProbe, AJobThatNeverAnswersTimesOut) {
  // MPICH's MPI_Init talks PMI on PMI_FD and waits for the launcher's reply; here nobody replies.
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  {
    ScopedVariable fd("PMI_FD", std::to_string(fds[1]));
    ScopedVariable rank("PMI_RANK", "0");
    ScopedVariable size("PMI_SIZE", "2");
    MpiProbeOutcome out = RunMpiProbeWithin({kMpich}, 1);
    ASSERT_FALSE(out.result);
    EXPECT_THAT(out.error, HasSubstr("did not answer within 1 s"));
    EXPECT_THAT(out.error, HasSubstr("every rank of the job must run distrun"));
  }
  ::close(fds[0]);
  ::close(fds[1]);
}

}  // namespace
}  // namespace distrun
