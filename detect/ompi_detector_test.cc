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

// Open MPI 5 (PRRTE) on two nodes, 4 ranks each; this is rank 6.
Environment OpenMpi5TwoNodes() {
  return MakeEnv({{"OMPI_COMM_WORLD_SIZE", "8"},
                  {"OMPI_COMM_WORLD_RANK", "6"},
                  {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                  {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                  {"OMPI_COMM_WORLD_NODE_RANK", "2"},
                  {"PRTE_LAUNCHED", "1"},
                  {"PMIX_NAMESPACE", "prterun-login1-12345@1"},
                  {"PMIX_RANK", "6"}});
}

std::string DetectError(const Environment& env) { return testing::DetectorError(OmpiDetector(), env); }

TEST(OmpiDetector, AbsentWithoutOpenMpi) {
  EXPECT_THAT(OmpiDetector().missing(MakeEnv({})),
              ElementsAre("OMPI_COMM_WORLD_SIZE", HasSubstr("OMPI_MCA_orte_hnp_uri")));
  // A rank count alone (or PRTE_LAUNCHED without a PMIx namespace) does not prove mpirun.
  EXPECT_THAT(OmpiDetector().missing(MakeEnv({{"OMPI_COMM_WORLD_SIZE", "2"}, {"PRTE_LAUNCHED", "1"}})),
              ElementsAre(HasSubstr("PRTE_LAUNCHED=1 with PMIX_NAMESPACE")));
  EXPECT_THAT(OmpiDetector().missing(
                  MakeEnv({{"OMPI_COMM_WORLD_SIZE", "2"}, {"PRTE_LAUNCHED", "0"}, {"PMIX_NAMESPACE", "x"}})),
              ElementsAre(HasSubstr("OMPI_MCA_orte_hnp_uri")));
}

TEST(OmpiDetector, OpenMpi4FixtureSingleNode) {
  for (int rank : {0, 1}) {
    Environment env = LoadFixtureEnv("mpi-standalone/ompi-env-rank" + std::to_string(rank) + ".txt");
    ASSERT_THAT(OmpiDetector().missing(env), IsEmpty());
    Topology t = OmpiDetector().detect(env);
    EXPECT_EQ(t.method, "ompi");
    EXPECT_EQ(t.coordinator_host, "127.0.0.1");  // all 4 ranks on this node
    EXPECT_EQ(t.coordinator_port, HashedCoordinatorPort("695795713"));
    EXPECT_EQ(t.job_id, "695795713");
    EXPECT_EQ(t.launch_mode, LaunchMode::kPerTask);
    EXPECT_EQ(t.num_nodes, 1);
    EXPECT_EQ(t.node_rank, 0);
    EXPECT_THAT(t.hosts, ElementsAre("testhost"));
    EXPECT_EQ(t.num_tasks, 4);
    EXPECT_EQ(t.task_id, rank);
    EXPECT_EQ(t.local_task, rank);
    EXPECT_EQ(t.local_tasks, 4);
    EXPECT_TRUE(t.visible_devices.empty());
    EXPECT_THAT(t.warnings, IsEmpty());
  }
}

TEST(OmpiDetector, OpenMpi4WithoutNamespaceUsesHnpJobId) {
  Environment env = LoadFixtureEnv("mpi-standalone/ompi-env-rank0.txt");
  env.vars.erase("PMIX_NAMESPACE");
  Topology t = OmpiDetector().detect(env);
  EXPECT_EQ(t.job_id, "695795712");
  EXPECT_EQ(t.coordinator_port, HashedCoordinatorPort("695795712"));
}

TEST(OmpiDetector, OpenMpi4SeveralNodesNeedsTheProbe) {
  Environment env = LoadFixtureEnv("mpi-standalone/ompi-env-rank1.txt");
  env.vars["OMPI_COMM_WORLD_SIZE"] = "10";
  env.vars["OMPI_MCA_orte_num_nodes"] = "3";
  Topology t = OmpiDetector().detect(env);
  EXPECT_EQ(t.coordinator_host, "");  // mpirun's address is not rank 0's host
  EXPECT_EQ(t.num_nodes, 3);
  EXPECT_THAT(t.hosts, IsEmpty());
  EXPECT_THAT(t.warnings, IsEmpty());
}

TEST(OmpiDetector, OpenMpi5InfersNodeCountFromAnEvenLayout) {
  ASSERT_THAT(OmpiDetector().missing(OpenMpi5TwoNodes()), IsEmpty());
  Topology t = OmpiDetector().detect(OpenMpi5TwoNodes());
  EXPECT_EQ(t.coordinator_host, "");
  EXPECT_EQ(t.coordinator_port, HashedCoordinatorPort("prterun-login1-12345@1"));
  EXPECT_EQ(t.job_id, "prterun-login1-12345@1");
  EXPECT_EQ(t.num_nodes, 2);
  EXPECT_EQ(t.node_rank, 0);  // NODE_RANK=2 is a local rank, not the node index
  EXPECT_EQ(t.task_id, 6);
  EXPECT_EQ(t.local_task, 2);
  EXPECT_EQ(t.local_tasks, 4);
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerTask);
  EXPECT_THAT(t.warnings, ElementsAre(HasSubstr("node count 2 is inferred")));
}

TEST(OmpiDetector, OpenMpi5UnevenLayoutLeavesNodeCountUnknown) {
  Environment env = OpenMpi5TwoNodes();
  env.vars["OMPI_COMM_WORLD_SIZE"] = "7";
  Topology t = OmpiDetector().detect(env);
  EXPECT_EQ(t.num_nodes, 0);
  EXPECT_THAT(t.warnings, ElementsAre(HasSubstr("node count unknown")));
}

TEST(OmpiDetector, OneRankPerNodeIsPerNodeAndRanksNumberNodes) {
  Environment env = OpenMpi5TwoNodes();
  env.vars["OMPI_COMM_WORLD_SIZE"] = "4";
  env.vars["OMPI_COMM_WORLD_RANK"] = "3";
  env.vars["PMIX_RANK"] = "3";
  env.vars["OMPI_COMM_WORLD_LOCAL_RANK"] = "0";
  env.vars["OMPI_COMM_WORLD_LOCAL_SIZE"] = "1";
  Topology t = OmpiDetector().detect(env);
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerNode);
  EXPECT_EQ(t.num_nodes, 4);
  EXPECT_EQ(t.node_rank, 3);
}

TEST(OmpiDetector, SingleRankIsLocal) {
  Environment env = OpenMpi5TwoNodes();
  env.vars["OMPI_COMM_WORLD_SIZE"] = "1";
  env.vars["OMPI_COMM_WORLD_RANK"] = "0";
  env.vars["PMIX_RANK"] = "0";
  env.vars["OMPI_COMM_WORLD_LOCAL_RANK"] = "0";
  env.vars["OMPI_COMM_WORLD_LOCAL_SIZE"] = "1";
  Topology t = OmpiDetector().detect(env);
  EXPECT_EQ(t.coordinator_host, "127.0.0.1");
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerNode);
}

TEST(OmpiDetector, RejectsMalformedHnpUri) {
  for (const char* bad :
       {"", "695795712.0", "695795712;tcp://192.0.2.2:51593", "x.0;tcp://192.0.2.2:51593",
        "1.0;tcp://192.0.2.2", "1.0;tcp://192.0.2.2:0", "1.0;tcp://192.0.2.256:5", "1.0;tcp://host:5",
        "1.0;tcp6://fd00::2:5", "1.0;tcp6://[fd00::2]:x", "1.0;nonsense", "1.0;tcp://192.0.2.2:5;"}) {
    Environment env = LoadFixtureEnv("mpi-standalone/ompi-env-rank0.txt");
    env.vars["OMPI_MCA_orte_hnp_uri"] = bad;
    EXPECT_THAT(DetectError(env), HasSubstr("OMPI_MCA_orte_hnp_uri='" + std::string(bad) + "'")) << bad;
  }
  Environment env = LoadFixtureEnv("mpi-standalone/ompi-env-rank0.txt");
  env.vars["OMPI_MCA_orte_hnp_uri"] =
      "1.0;tcp://10.0.0.1,192.0.2.2:5;tcp6://[fd00::2,fe80::1%eth0]:6;usock://x";
  EXPECT_NO_THROW(OmpiDetector().detect(env));
}

TEST(OmpiDetector, RejectsMalformedIds) {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                           "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_orte_num_nodes"}) {
    Environment env = LoadFixtureEnv("mpi-standalone/ompi-env-rank0.txt");
    env.vars[name] = "-1";
    EXPECT_THAT(DetectError(env), HasSubstr(std::string(name) + "='-1'")) << name;
  }
  Environment env = OpenMpi5TwoNodes();
  env.vars.erase("OMPI_COMM_WORLD_LOCAL_RANK");
  EXPECT_THAT(DetectError(env), HasSubstr("OMPI_COMM_WORLD_LOCAL_RANK is not set"));
}

TEST(OmpiDetector, RejectsInconsistentIds) {
  Environment env = OpenMpi5TwoNodes();
  env.vars["OMPI_COMM_WORLD_RANK"] = "8";
  EXPECT_THAT(DetectError(env), HasSubstr("OMPI_COMM_WORLD_RANK=8 is not below OMPI_COMM_WORLD_SIZE=8"));
  env = OpenMpi5TwoNodes();
  env.vars["OMPI_COMM_WORLD_LOCAL_RANK"] = "4";
  EXPECT_THAT(DetectError(env), HasSubstr("OMPI_COMM_WORLD_LOCAL_RANK=4 is not below"));
  env = OpenMpi5TwoNodes();
  env.vars["OMPI_COMM_WORLD_LOCAL_SIZE"] = "9";
  env.vars["OMPI_COMM_WORLD_SIZE"] = "8";
  EXPECT_THAT(DetectError(env), HasSubstr("OMPI_COMM_WORLD_LOCAL_SIZE=9 exceeds OMPI_COMM_WORLD_SIZE=8"));
  env = OpenMpi5TwoNodes();
  env.vars["PMIX_RANK"] = "5";
  EXPECT_THAT(DetectError(env), HasSubstr("PMIX_RANK='5' differs from OMPI_COMM_WORLD_RANK=6"));
  env = OpenMpi5TwoNodes();
  env.vars["OMPI_COMM_WORLD_SIZE"] = "0";
  EXPECT_THAT(DetectError(env), HasSubstr("OMPI_COMM_WORLD_SIZE=0"));
}

TEST(OmpiDetector, RejectsNodeCountThatDisagreesWithLayout) {
  Environment env = LoadFixtureEnv("mpi-standalone/ompi-env-rank0.txt");
  env.vars["OMPI_MCA_orte_num_nodes"] = "2";  // but all 4 ranks are local
  EXPECT_THAT(DetectError(env), HasSubstr("OMPI_MCA_orte_num_nodes=2 is more nodes than"));
  env.vars["OMPI_COMM_WORLD_SIZE"] = "8";
  env.vars["OMPI_MCA_orte_num_nodes"] = "1";
  EXPECT_THAT(DetectError(env), HasSubstr("OMPI_MCA_orte_num_nodes=1 but only OMPI_COMM_WORLD_LOCAL_SIZE=4"));
  env.vars["OMPI_MCA_orte_num_nodes"] = "0";
  EXPECT_THAT(DetectError(env), HasSubstr("OMPI_MCA_orte_num_nodes=0"));
}

}  // namespace
}  // namespace distrun
