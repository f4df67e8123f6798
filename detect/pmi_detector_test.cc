#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "detect/coordinator_port.h"
#include "detect/detector.h"
#include "detect/errors.h"
#include "test_support.h"

namespace distrun {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::LoadFixtureEnv;
using testing::MakeEnv;

Environment Merged(Environment base, const Environment& extra) {
  for (const auto& [name, value] : extra.vars) base.vars[name] = value;
  return base;
}

// `srun --mpi=pmi2` with one task: the recorded PMI variables beside a recorded step's SLURM_* variables.
Environment SlurmPmi2() {
  Environment env = Merged(LoadFixtureEnv("slurm-single/srun-gpu-task-env.txt"),
                           LoadFixtureEnv("slurm-single/pmi2-env.txt", "vm: "));
  env.vars["SLURM_JOB_ID"] = "10";  // the two captures come from different jobs
  return env;
}

// Cray PALS mpiexec: 8 ranks, 4 per node; this is rank 5 on node 1.
Environment Pals() {
  return MakeEnv({{"PALS_RANKID", "5"},
                  {"PALS_LOCAL_RANKID", "1"},
                  {"PALS_NODEID", "1"},
                  {"PALS_APID", "6f0c2b5e-apid"},
                  {"PMI_RANK", "5"},
                  {"PMI_SIZE", "8"},
                  {"PMI_LOCAL_RANK", "1"},
                  {"PMI_LOCAL_SIZE", "4"}});
}

std::string DetectError(const Environment& env) { return testing::DetectorError(PmiDetector(), env); }

TEST(PmiDetector, AbsentWithoutPmiVariables) {
  EXPECT_THAT(PmiDetector().missing(MakeEnv({})), ElementsAre(HasSubstr("PMI_RANK and PMI_SIZE")));
  EXPECT_THAT(PmiDetector().missing(MakeEnv({{"PMI_RANK", "0"}})),
              ElementsAre("PMI_SIZE", HasSubstr("MPI_LOCALRANKID")));
  EXPECT_THAT(PmiDetector().missing(MakeEnv({{"MV2_COMM_WORLD_RANK", "0"}})),
              ElementsAre("MV2_COMM_WORLD_SIZE"));
  EXPECT_THAT(PmiDetector().missing(MakeEnv({{"MVP_COMM_WORLD_RANK", "0"}})),
              ElementsAre("MVP_COMM_WORLD_SIZE"));
  // The PMI-2 capture alone has no local rank: without the step's SLURM_* variables it is not enough.
  EXPECT_THAT(PmiDetector().missing(LoadFixtureEnv("slurm-single/pmi2-env.txt", "vm: ")),
              ElementsAre(HasSubstr("PMI_JOBID with SLURM_STEP_NODELIST")));
}

TEST(PmiDetector, MpichFixtureSingleNode) {
  for (int rank : {0, 2}) {
    Environment env = LoadFixtureEnv("mpi-standalone/mpich-env-rank" + std::to_string(rank) + ".txt");
    ASSERT_THAT(PmiDetector().missing(env), IsEmpty());
    Topology t = PmiDetector().detect(env);
    EXPECT_EQ(t.method, "pmi");
    EXPECT_EQ(t.coordinator_host, "127.0.0.1");
    EXPECT_FALSE(t.coordinator_port.has_value());  // Hydra exports no job identity, and no parent is known
    EXPECT_EQ(t.job_id, "");
    EXPECT_EQ(t.launch_mode, LaunchMode::kPerTask);
    EXPECT_EQ(t.num_nodes, 1);
    EXPECT_THAT(t.hosts, ElementsAre("testhost"));
    EXPECT_EQ(t.num_tasks, 4);
    EXPECT_EQ(t.task_id, rank);
    EXPECT_EQ(t.local_task, rank);
    EXPECT_EQ(t.local_tasks, 4);
    EXPECT_TRUE(t.visible_devices.empty());
    EXPECT_THAT(t.warnings, IsEmpty());
  }
}

TEST(PmiDetector, HydraRanksOnOneHostShareTheirProxysIdentity) {
  std::optional<int> port;
  for (int rank : {0, 2}) {
    Environment env = LoadFixtureEnv("mpi-standalone/mpich-env-rank" + std::to_string(rank) + ".txt");
    env.parent_pid = 4242;  // hydra_pmi_proxy, the parent of every rank on the host
    Topology t = PmiDetector().detect(env);
    EXPECT_EQ(t.job_id, "hydra-testhost-4242");
    ASSERT_TRUE(t.coordinator_port.has_value());
    if (port) {
      EXPECT_EQ(*t.coordinator_port, *port);
    }
    port = t.coordinator_port;
  }
  Environment other = LoadFixtureEnv("mpi-standalone/mpich-env-rank0.txt");
  other.parent_pid = 4243;
  EXPECT_NE(PmiDetector().detect(other).coordinator_port, port);
}

TEST(PmiDetector, MpichSeveralNodesNeedsTheProbe) {
  Environment env = LoadFixtureEnv("mpi-standalone/mpich-env-rank2.txt");
  env.vars["PMI_SIZE"] = "8";
  Topology t = PmiDetector().detect(env);
  EXPECT_EQ(t.coordinator_host, "");
  EXPECT_EQ(t.num_nodes, 2);
  EXPECT_THAT(t.hosts, IsEmpty());
  EXPECT_THAT(t.warnings, ElementsAre(HasSubstr("inferred")));
}

TEST(PmiDetector, MpiexecInsideASlurmStepIgnoresTheLeakedStep) {
  // mpiexec run from an srun task: its ranks carry Hydra's variables and the step's stale SLURM_* ones.
  Environment env = Merged(LoadFixtureEnv("slurm-single/srun-gpu-task-env.txt"),
                           LoadFixtureEnv("mpi-standalone/mpich-env-rank2.txt"));
  ASSERT_THAT(PmiDetector().missing(env), IsEmpty());
  Topology t = PmiDetector().detect(env);
  EXPECT_EQ(t.num_tasks, 4);
  EXPECT_EQ(t.task_id, 2);
  EXPECT_TRUE(t.visible_devices.empty());
  for (const Detector& d : ClusterDetectors()) {
    if (d.missing(env).empty()) {
      EXPECT_EQ(d.name, "pmi");
      break;
    }
  }
}

TEST(PmiDetector, SlurmPmi2ReadsTheStep) {
  Environment env = SlurmPmi2();
  ASSERT_THAT(PmiDetector().missing(env), IsEmpty());
  Topology t = PmiDetector().detect(env);
  EXPECT_EQ(t.method, "pmi");
  EXPECT_EQ(t.coordinator_host, "vm");  // the step's first host
  EXPECT_EQ(t.coordinator_port, SlurmCoordinatorPort(10, 0));
  EXPECT_EQ(t.job_id, "10.0");
  EXPECT_THAT(t.hosts, ElementsAre("vm"));
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerNode);
  EXPECT_EQ(t.num_tasks, 1);
  EXPECT_THAT(t.visible_devices, ElementsAre("0"));
  for (const Detector& d : ClusterDetectors()) {
    if (d.missing(env).empty()) {
      EXPECT_EQ(d.name, "pmi");
      break;
    }
  }
}

TEST(PmiDetector, SlurmPmi2SeveralNodes) {
  Environment env = MakeEnv({{"PMI_FD", "11"},
                             {"PMI_JOBID", "77.1"},
                             {"PMI_RANK", "3"},
                             {"PMI_SIZE", "4"},
                             {"SLURM_STEP_NODELIST", "n[1-2]"},
                             {"SLURM_STEP_NUM_NODES", "2"},
                             {"SLURM_STEP_NUM_TASKS", "4"},
                             {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
                             {"SLURM_PROCID", "3"},
                             {"SLURM_LOCALID", "1"},
                             {"SLURM_NODEID", "1"},
                             {"SLURM_JOB_ID", "77"},
                             {"SLURM_STEP_ID", "1"}});
  Topology t = PmiDetector().detect(env);
  EXPECT_EQ(t.coordinator_host, "n1");
  EXPECT_EQ(t.node_rank, 1);
  EXPECT_EQ(t.local_task, 1);  // from SLURM_LOCALID
  EXPECT_EQ(t.local_tasks, 2);
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerTask);

  env.vars["PMI_RANK"] = "2";
  EXPECT_THAT(DetectError(env), HasSubstr("PMI_RANK='2' differs from SLURM_PROCID=3"));
  env.vars["PMI_RANK"] = "3";
  env.vars["PMI_SIZE"] = "5";
  EXPECT_THAT(DetectError(env), HasSubstr("PMI_SIZE='5' differs from SLURM_STEP_NUM_TASKS=4"));
  env.vars["PMI_SIZE"] = "4";
  env.vars["SLURM_LOCALID"] = "2";
  EXPECT_THAT(DetectError(env), HasSubstr("SLURM_LOCALID='2'"));
}

TEST(PmiDetector, PalsSeveralNodes) {
  ASSERT_THAT(PmiDetector().missing(Pals()), IsEmpty());
  Topology t = PmiDetector().detect(Pals());
  EXPECT_EQ(t.coordinator_host, "");
  EXPECT_EQ(t.node_rank, 1);  // PALS_NODEID
  EXPECT_EQ(t.num_nodes, 2);
  EXPECT_EQ(t.task_id, 5);
  EXPECT_EQ(t.local_task, 1);
  EXPECT_EQ(t.local_tasks, 4);
  EXPECT_EQ(t.job_id, "6f0c2b5e-apid");
  EXPECT_EQ(t.coordinator_port, HashedCoordinatorPort("6f0c2b5e-apid"));
}

TEST(PmiDetector, PalsSizesFromPalsVariables) {
  Environment env = MakeEnv({{"PALS_RANKID", "1"},
                             {"PALS_LOCAL_RANKID", "1"},
                             {"PALS_SIZE", "2"},
                             {"PALS_LOCAL_SIZE", "2"},
                             {"PALS_NODEID", "0"}});
  Topology t = PmiDetector().detect(env);
  EXPECT_EQ(t.coordinator_host, "127.0.0.1");
  EXPECT_EQ(t.num_tasks, 2);
  EXPECT_FALSE(t.coordinator_port.has_value());
  env.vars.erase("PALS_LOCAL_SIZE");
  EXPECT_THAT(DetectError(env), HasSubstr("PMI_LOCAL_SIZE or PALS_LOCAL_SIZE is not set"));
}

TEST(PmiDetector, RejectsInconsistentPals) {
  Environment env = Pals();
  env.vars["PMI_RANK"] = "4";
  EXPECT_THAT(DetectError(env), HasSubstr("PMI_RANK='4' differs from PALS_RANKID=5"));
  env = Pals();
  env.vars["PMI_LOCAL_RANK"] = "0";
  EXPECT_THAT(DetectError(env), HasSubstr("PMI_LOCAL_RANK='0' differs from PALS_LOCAL_RANKID=1"));
  env = Pals();
  env.vars["PMI_LOCAL_SIZE"] = "8";
  EXPECT_THAT(DetectError(env), HasSubstr("PALS_NODEID='1' names another node"));
  env = Pals();
  env.vars["PALS_NODEID"] = "one";
  EXPECT_THAT(DetectError(env), HasSubstr("PALS_NODEID='one'"));
}

TEST(PmiDetector, SlurmCrayPluginIsSlurms) {
  // Slurm's mpi/cray_shasta sets PALS_RANKID and PALS_NODEID but no local rank.
  Environment env = LoadFixtureEnv("slurm-single/srun-gpu-task-env.txt");
  env.vars["PALS_RANKID"] = "0";
  env.vars["PALS_NODEID"] = "0";
  env.vars["PALS_APID"] = "4.0";
  EXPECT_THAT(PmiDetector().missing(env), ElementsAre(HasSubstr("PALS_LOCAL_RANKID")));
  EXPECT_THAT(SlurmDetector().missing(env), IsEmpty());
}

TEST(PmiDetector, MvapichAndMvapich3) {
  for (std::string p : {"MV2_COMM_WORLD_", "MVP_COMM_WORLD_"}) {
    Environment env =
        MakeEnv({{p + "RANK", "3"}, {p + "SIZE", "4"}, {p + "LOCAL_RANK", "1"}, {p + "LOCAL_SIZE", "2"}});
    ASSERT_THAT(PmiDetector().missing(env), IsEmpty()) << p;
    Topology t = PmiDetector().detect(env);
    EXPECT_EQ(t.task_id, 3) << p;
    EXPECT_EQ(t.local_task, 1) << p;
    EXPECT_EQ(t.num_nodes, 2) << p;
    EXPECT_EQ(t.coordinator_host, "") << p;
    env.vars.erase(p + "LOCAL_SIZE");
    EXPECT_THAT(DetectError(env), HasSubstr(p + "LOCAL_SIZE is not set")) << p;
    env.vars[p + "LOCAL_SIZE"] = "2";
    env.vars["PMI_RANK"] = "0";
    EXPECT_THAT(DetectError(env), HasSubstr("PMI_RANK='0' differs from " + p + "RANK=3")) << p;
  }
}

TEST(PmiDetector, CrayPmi) {
  Environment env =
      MakeEnv({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"PMI_LOCAL_RANK", "0"}, {"PMI_LOCAL_SIZE", "1"}});
  ASSERT_THAT(PmiDetector().missing(env), IsEmpty());
  Topology t = PmiDetector().detect(env);
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerNode);
  EXPECT_EQ(t.num_nodes, 2);
  EXPECT_EQ(t.node_rank, 0);
  EXPECT_EQ(t.coordinator_host, "");
}

TEST(PmiDetector, FluxsOwnPmiIsLeftToFlux) {
  Environment flux = MakeEnv({{"FLUX_TASK_RANK", "2"},
                              {"FLUX_TASK_LOCAL_ID", "0"},
                              {"FLUX_JOB_SIZE", "4"},
                              {"FLUX_JOB_NNODES", "4"},
                              {"FLUX_JOB_ID", "f2wGgTHX"},
                              {"PMI_RANK", "2"},
                              {"PMI_SIZE", "4"},
                              {"PMI_FD", "5"}});
  EXPECT_THAT(PmiDetector().missing(flux), ElementsAre(HasSubstr("FLUX_TASK_RANK")));
  // Flux's Cray plugin: PALS_RANKID and PALS_NODEID without a local rank.
  flux.vars["PALS_RANKID"] = "2";
  flux.vars["PALS_NODEID"] = "2";
  EXPECT_FALSE(PmiDetector().missing(flux).empty());
  // A PALS-style plugin that also sets a local rank still matches Flux's own numbers.
  flux.vars["PALS_LOCAL_RANKID"] = "0";
  EXPECT_THAT(PmiDetector().missing(flux), ElementsAre(HasSubstr("FLUX_TASK_RANK")));
}

TEST(PmiDetector, MpiexecInsideAFluxBatchJobIsPmis) {
  // The batch script is task 0 of a 1-task Flux job; mpiexec's ranks inherit that.
  Environment env = LoadFixtureEnv("mpi-standalone/mpich-env-rank2.txt");
  env.vars["FLUX_TASK_RANK"] = "0";
  env.vars["FLUX_JOB_SIZE"] = "1";
  env.vars["FLUX_JOB_ID"] = "f2wGgTHX";
  ASSERT_THAT(PmiDetector().missing(env), IsEmpty());
  EXPECT_EQ(PmiDetector().detect(env).num_tasks, 4);
}

TEST(PmiDetector, RejectsMalformedValues) {
  Environment env = LoadFixtureEnv("mpi-standalone/mpich-env-rank2.txt");
  env.vars["MPI_LOCALRANKID"] = "two";
  EXPECT_THAT(DetectError(env), HasSubstr("MPI_LOCALRANKID='two'"));
  env = LoadFixtureEnv("mpi-standalone/mpich-env-rank2.txt");
  env.vars.erase("MPI_LOCALNRANKS");
  EXPECT_THAT(DetectError(env), HasSubstr("MPI_LOCALNRANKS is not set"));
  env = LoadFixtureEnv("mpi-standalone/mpich-env-rank2.txt");
  env.vars["PMI_RANK"] = "4";
  EXPECT_THAT(DetectError(env), HasSubstr("PMI_RANK=4 is not below PMI_SIZE=4"));
  env = LoadFixtureEnv("mpi-standalone/mpich-env-rank2.txt");
  env.vars["MPI_LOCALNRANKS"] = "5";
  EXPECT_THAT(DetectError(env), HasSubstr("MPI_LOCALNRANKS=5 exceeds PMI_SIZE=4"));
  env = LoadFixtureEnv("mpi-standalone/mpich-env-rank2.txt");
  env.vars["PMI_SIZE"] = "";
  EXPECT_THAT(DetectError(env), HasSubstr("PMI_SIZE=''"));
}

}  // namespace
}  // namespace distrun
