#include "detect/mpi_detector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "detect/detection.h"
#include "detect/detector.h"
#include "detect/errors.h"
#include "test_support.h"

namespace distrun {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::MakeEnv;
using ::testing::Not;

// What a probe was asked: the libraries of every call.
struct ProbeCalls {
  std::vector<std::vector<std::string>> libraries;
};

// An environment whose MPI probe answers `outcome` and records each call.
Environment WithProbe(Environment env, MpiProbeOutcome outcome, const std::shared_ptr<ProbeCalls>& calls) {
  env.root = "/nonexistent-distrun-mpi-detector-test-root";
  env.mpi_probe = [outcome, calls](const std::vector<std::string>& libraries) {
    calls->libraries.push_back(libraries);
    return outcome;
  };
  return env;
}

// What the probe says for rank 5 of 8, four ranks on each of two nodes.
MpiProbeResult RankFiveOfEight() {
  MpiProbeResult r;
  r.library = "libmpi.so.40";
  r.version = "Open MPI v4.1.4";
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
  r.token = "secret-token";
  return r;
}

// The same job on one node.
MpiProbeResult RankFiveOfEightOnOneNode() {
  MpiProbeResult r = RankFiveOfEight();
  r.local_rank = 5;
  r.local_size = 8;
  r.node_rank = 0;
  r.num_nodes = 1;
  r.hosts = {"node001"};
  return r;
}

// Open MPI 4's variables for rank 5 of 8 with four ranks per node.
Environment OmpiAcrossHosts() {
  return MakeEnv({{"OMPI_COMM_WORLD_SIZE", "8"},
                  {"OMPI_COMM_WORLD_RANK", "5"},
                  {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                  {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                  {"OMPI_MCA_orte_hnp_uri", "1234.0;tcp://10.0.0.1:5000"}});
}

// MPICH's Hydra for the same rank.
Environment HydraAcrossHosts() {
  return MakeEnv({{"PMI_RANK", "5"},
                  {"PMI_SIZE", "8"},
                  {"PMI_FD", "6"},
                  {"MPI_LOCALRANKID", "1"},
                  {"MPI_LOCALNRANKS", "4"}});
}

ExplicitTopology Method(const std::string& method) {
  ExplicitTopology ex;
  ex.method = method;
  return ex;
}

std::string ErrorOf(const Environment& env, const ExplicitTopology& ex) {
  try {
    DetectTopology(env, ex);
  } catch (const UsageError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no UsageError";
  return "";
}

TEST(MpiDetector, NamedOnlyNeverAutomatic) {
  std::vector<std::string> names = DetectionMethodNames();
  EXPECT_NE(std::find(names.begin(), names.end(), "mpi"), names.end());
  for (const Detector& d : ClusterDetectors()) EXPECT_NE(d.name, "mpi");
}

TEST(MpiDetector, NeedsAnMpiLaunchersRankVariable) {
  EXPECT_THAT(MpiDetector().missing(MakeEnv({})), ElementsAre(HasSubstr("OMPI_COMM_WORLD_RANK")));
  // Naming the library does not make a job.
  EXPECT_THAT(MpiDetector().missing(MakeEnv({{"DISTRUN_MPI_LIBRARY", "/opt/libmpi.so"}})), Not(IsEmpty()));
  for (const char* variable : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK",
                               "MVP_COMM_WORLD_RANK", "PALS_RANKID"}) {
    EXPECT_THAT(MpiDetector().missing(MakeEnv({{variable, "0"}})), IsEmpty()) << variable;
  }
  auto calls = std::make_shared<ProbeCalls>();
  std::string message = ErrorOf(WithProbe(MakeEnv({}), {RankFiveOfEight(), ""}, calls), Method("mpi"));
  EXPECT_THAT(message, HasSubstr("--cluster-detection-method=mpi was named but its environment is absent"));
  EXPECT_THAT(calls->libraries, IsEmpty());
}

TEST(MpiDetector, TheProbesAnswerIsTheTopology) {
  auto calls = std::make_shared<ProbeCalls>();
  Topology t = DetectTopology(WithProbe(OmpiAcrossHosts(), {RankFiveOfEight(), ""}, calls), Method("mpi"));
  EXPECT_THAT(calls->libraries, ElementsAre(ElementsAre("libmpi.so.40")));
  EXPECT_EQ(t.method, "mpi");
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerTask);
  EXPECT_EQ(t.num_tasks, 8);
  EXPECT_EQ(t.task_id, 5);
  EXPECT_EQ(t.local_task, 1);
  EXPECT_EQ(t.local_tasks, 4);
  EXPECT_EQ(t.num_nodes, 2);
  EXPECT_EQ(t.node_rank, 1);
  EXPECT_THAT(t.hosts, ElementsAre("node001", "node002"));
  EXPECT_EQ(t.coordinator_host, "node001");  // rank 0's host
  EXPECT_EQ(t.coordinator_port, 40001);
  EXPECT_EQ(t.master_port, 40002);
  EXPECT_EQ(t.jax_port, 40003);
  EXPECT_EQ(t.job_id, "0123456789ab");
  EXPECT_EQ(t.job_token, "secret-token");
  EXPECT_THAT(t.warnings, IsEmpty());
}

TEST(MpiDetector, OneNodeUsesLoopback) {
  auto calls = std::make_shared<ProbeCalls>();
  Environment env = OmpiAcrossHosts();
  env.vars["OMPI_COMM_WORLD_LOCAL_RANK"] = "5";
  env.vars["OMPI_COMM_WORLD_LOCAL_SIZE"] = "8";
  Topology t = DetectTopology(WithProbe(env, {RankFiveOfEightOnOneNode(), ""}, calls), Method("mpi"));
  EXPECT_EQ(t.coordinator_host, "127.0.0.1");
  EXPECT_EQ(t.num_nodes, 1);
  EXPECT_THAT(t.hosts, ElementsAre("node001"));
  EXPECT_EQ(t.local_tasks, 8);
}

TEST(MpiDetector, OneRankPerNodeIsPerNode) {
  MpiProbeResult r;
  r.library = "libmpich.so.12";
  r.rank = 2;
  r.size = 3;
  r.local_rank = 0;
  r.local_size = 1;
  r.node_rank = 2;
  r.num_nodes = 3;
  r.hosts = {"a", "b", "c"};
  r.coordinator_port = 1;
  r.master_port = 2;
  r.jax_port = 3;
  r.job_id = "id";
  r.token = "t";
  auto calls = std::make_shared<ProbeCalls>();
  Topology t = DetectTopology(WithProbe(MakeEnv({{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}}), {r, ""}, calls),
                              Method("mpi"));
  EXPECT_THAT(calls->libraries, ElementsAre(ElementsAre("libmpich.so.12", "libmpi.so.12")));
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerNode);
  EXPECT_EQ(t.node_rank, 2);
  EXPECT_EQ(t.coordinator_host, "a");
}

TEST(MpiDetector, ExplicitValuesStillWin) {
  auto calls = std::make_shared<ProbeCalls>();
  ExplicitTopology ex = Method("mpi");
  ex.coordinator_port = 7000;
  ex.coordinator_address = "head";
  Topology t = DetectTopology(WithProbe(OmpiAcrossHosts(), {RankFiveOfEight(), ""}, calls), ex);
  EXPECT_EQ(t.coordinator_host, "head");
  EXPECT_EQ(t.coordinator_port, 7000);
  EXPECT_EQ(t.master_port, 40002);
}

TEST(MpiDetector, ProbeFailureIsOneLineWithTheProbesReason) {
  auto calls = std::make_shared<ProbeCalls>();
  MpiProbeOutcome failed{std::nullopt, "no MPI library could be loaded: tried libmpi.so.40 (cannot open)"};
  std::string message = ErrorOf(WithProbe(OmpiAcrossHosts(), failed, calls), Method("mpi"));
  EXPECT_THAT(message, HasSubstr("--cluster-detection-method=mpi: no MPI library could be loaded"));
  EXPECT_THAT(message, Not(HasSubstr("DISTRUN_MPI_LIBRARY='")));
  EXPECT_THAT(message, Not(HasSubstr("\n")));

  Environment chosen = OmpiAcrossHosts();
  chosen.vars["DISTRUN_MPI_LIBRARY"] = "/nowhere/libmpi.so";
  message = ErrorOf(WithProbe(chosen, failed, calls), Method("mpi"));
  EXPECT_THAT(message, HasSubstr("with DISTRUN_MPI_LIBRARY='/nowhere/libmpi.so': no MPI library"));
  EXPECT_THAT(calls->libraries.back(), ElementsAre("/nowhere/libmpi.so"));
}

TEST(MpiDetector, WithoutAProbeNamesTheProblem) {
  Environment env = OmpiAcrossHosts();  // MakeEnv has no MPI probe
  std::string message = ErrorOf(env, Method("mpi"));
  EXPECT_THAT(message, HasSubstr("MPI cannot be used in this process"));
}

TEST(MpiDetector, AForeignLibrarysSingletonIsRefused) {
  // MPICH loaded under Open MPI's mpirun runs every rank as a job of one.
  MpiProbeResult singleton = RankFiveOfEightOnOneNode();
  singleton.library = "libmpich.so.12";
  singleton.version = "MPICH Version: 4.0.2";
  singleton.rank = 0;
  singleton.size = 1;
  singleton.local_rank = 0;
  singleton.local_size = 1;
  auto calls = std::make_shared<ProbeCalls>();
  std::string message = ErrorOf(WithProbe(OmpiAcrossHosts(), {singleton, ""}, calls), Method("mpi"));
  EXPECT_THAT(message, HasSubstr("libmpich.so.12 (MPICH Version: 4.0.2) says this is rank 0 of 1 but "
                                 "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE say 5 of 8"));
  EXPECT_THAT(message, HasSubstr("set DISTRUN_MPI_LIBRARY"));
}

TEST(MpiDetector, AnImpossibleAnswerIsRefused) {
  auto calls = std::make_shared<ProbeCalls>();
  MpiProbeResult broken = RankFiveOfEight();
  broken.hosts = {"node001"};  // two nodes, one name
  EXPECT_THAT(ErrorOf(WithProbe(OmpiAcrossHosts(), {broken, ""}, calls), Method("mpi")),
              HasSubstr("is inconsistent"));
  broken = RankFiveOfEight();
  broken.local_rank = 4;
  EXPECT_THAT(ErrorOf(WithProbe(OmpiAcrossHosts(), {broken, ""}, calls), Method("mpi")),
              HasSubstr("local rank 4 of 4"));
  broken = RankFiveOfEight();
  broken.master_port = 0;
  EXPECT_THAT(ErrorOf(WithProbe(OmpiAcrossHosts(), {broken, ""}, calls), Method("mpi")),
              HasSubstr("is inconsistent"));
}

// ---- The fallback: launchers whose variables do not name rank 0's host ----

TEST(MpiFallback, OpenMpiAcrossHostsAsksTheProbe) {
  auto calls = std::make_shared<ProbeCalls>();
  Topology t =
      DetectTopology(WithProbe(OmpiAcrossHosts(), {RankFiveOfEight(), ""}, calls), ExplicitTopology{});
  EXPECT_THAT(calls->libraries, ElementsAre(ElementsAre("libmpi.so.40")));
  EXPECT_EQ(t.method, "ompi");  // the launcher, completed by its MPI
  EXPECT_EQ(t.coordinator_host, "node001");
  EXPECT_EQ(t.coordinator_port, 40001);
  EXPECT_EQ(t.master_port, 40002);
  EXPECT_EQ(t.jax_port, 40003);
  EXPECT_EQ(t.num_nodes, 2);
  EXPECT_EQ(t.node_rank, 1);
  EXPECT_THAT(t.hosts, ElementsAre("node001", "node002"));
  EXPECT_EQ(t.job_id, "1234");  // mpirun's job id stays the run id
  EXPECT_EQ(t.job_token, "secret-token");
  EXPECT_EQ(t.task_id, 5);
  EXPECT_EQ(t.local_task, 1);
  // The node count is known now, not inferred from an even layout.
  EXPECT_THAT(t.warnings, IsEmpty());
}

TEST(MpiFallback, HydraAcrossHostsTakesTheProbesJobId) {
  auto calls = std::make_shared<ProbeCalls>();
  MpiProbeResult r = RankFiveOfEight();
  r.library = "libmpich.so.12";
  Topology t = DetectTopology(WithProbe(HydraAcrossHosts(), {r, ""}, calls), ExplicitTopology{});
  EXPECT_THAT(calls->libraries, ElementsAre(ElementsAre("libmpich.so.12", "libmpi.so.12")));
  EXPECT_EQ(t.method, "pmi");
  EXPECT_EQ(t.coordinator_host, "node001");
  EXPECT_EQ(t.job_id, "0123456789ab");  // Hydra exports none
}

TEST(MpiFallback, NamedLauncherMethodFallsBackToo) {
  auto calls = std::make_shared<ProbeCalls>();
  Topology t = DetectTopology(WithProbe(OmpiAcrossHosts(), {RankFiveOfEight(), ""}, calls), Method("ompi"));
  EXPECT_EQ(t.method, "ompi");
  EXPECT_EQ(t.coordinator_host, "node001");
}

TEST(MpiFallback, NotOnOneHost) {
  auto calls = std::make_shared<ProbeCalls>();
  Environment one_host = OmpiAcrossHosts();
  one_host.vars["OMPI_COMM_WORLD_LOCAL_RANK"] = "5";
  one_host.vars["OMPI_COMM_WORLD_LOCAL_SIZE"] = "8";
  Topology t =
      DetectTopology(WithProbe(one_host, {RankFiveOfEightOnOneNode(), ""}, calls), ExplicitTopology{});
  EXPECT_THAT(calls->libraries, IsEmpty());
  EXPECT_EQ(t.method, "ompi");
  EXPECT_EQ(t.coordinator_host, "127.0.0.1");
  EXPECT_FALSE(t.job_token);
  EXPECT_FALSE(t.master_port);
}

TEST(MpiFallback, NotWithAnExplicitCoordinator) {
  auto calls = std::make_shared<ProbeCalls>();
  ExplicitTopology ex;
  ex.coordinator_address = "head";
  Topology t = DetectTopology(WithProbe(OmpiAcrossHosts(), {RankFiveOfEight(), ""}, calls), ex);
  EXPECT_THAT(calls->libraries, IsEmpty());
  EXPECT_EQ(t.coordinator_host, "head");
}

TEST(MpiFallback, NotForOtherLaunchersOrNone) {
  auto calls = std::make_shared<ProbeCalls>();
  Topology local = DetectTopology(WithProbe(MakeEnv({}), {RankFiveOfEight(), ""}, calls), ExplicitTopology{});
  EXPECT_EQ(local.method, "local");
  Topology torch = DetectTopology(
      WithProbe(
          MakeEnv({{"MASTER_ADDR", "head"}, {"MASTER_PORT", "29500"}, {"WORLD_SIZE", "2"}, {"RANK", "1"}}),
          {RankFiveOfEight(), ""}, calls),
      ExplicitTopology{});
  EXPECT_EQ(torch.method, "torchelastic");
  EXPECT_THAT(calls->libraries, IsEmpty());
}

// A failed fallback is no detection error: the topology keeps what the variables said, with the coordinator
// unknown and the probe's problem as a warning; the launch stops with it (launcher/main.cc).
TEST(MpiFallback, FailureKeepsTheVariablesAndNamesBothFixes) {
  auto calls = std::make_shared<ProbeCalls>();
  MpiProbeOutcome failed{std::nullopt, "no MPI library could be loaded: tried libmpi.so.40 (cannot open)"};
  Topology t = DetectTopology(WithProbe(OmpiAcrossHosts(), failed, calls), ExplicitTopology{});
  const std::string& message = t.coordinator_problem;
  EXPECT_THAT(message, HasSubstr("the ompi ranks span 2+ hosts"));
  EXPECT_THAT(message, HasSubstr("the MPI probe that would find it failed: no MPI library could be loaded"));
  EXPECT_THAT(message, HasSubstr("--coordinator-address HOST (or DISTRUN_COORDINATOR_ADDRESS)"));
  EXPECT_THAT(message, Not(HasSubstr("\n")));
  EXPECT_THAT(t.warnings, Contains(message));
  EXPECT_EQ(t.method, "ompi");
  EXPECT_EQ(t.coordinator_host, "");
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerTask);
  EXPECT_EQ(t.num_tasks, 8);
  EXPECT_EQ(t.task_id, 5);
  EXPECT_EQ(t.local_task, 1);
}

TEST(MpiFallback, AForeignLibraryIsRefused) {
  auto calls = std::make_shared<ProbeCalls>();
  MpiProbeResult other = RankFiveOfEight();
  other.rank = 3;
  Topology t = DetectTopology(WithProbe(OmpiAcrossHosts(), {other, ""}, calls), ExplicitTopology{});
  EXPECT_THAT(t.coordinator_problem,
              HasSubstr("says this is rank 3 of 8 but the ompi launcher's variables say 5 of 8"));
  EXPECT_EQ(t.coordinator_host, "");
  EXPECT_EQ(t.task_id, 5);
}

}  // namespace
}  // namespace distrun
