#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "detect/coordinator_port.h"
#include "detect/detector.h"
#include "detect/errors.h"
#include "test_support.h"

namespace distrun {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::LoadFixtureEnv;
using testing::MakeEnv;
using testing::ReadFixtureLines;

// srun-n4-env.txt holds the sorted lines of 4 tasks: task i takes the i-th value of every variable.
Environment SrunN4Task(int task) {
  std::map<std::string, std::vector<std::string>> values;
  for (const auto& [name, value] : ReadFixtureLines("slurm-single/srun-n4-env.txt"))
    values[name].push_back(value);
  Environment env = MakeEnv({});
  env.hostname = "vm";
  for (const auto& [name, list] : values) {
    EXPECT_EQ(list.size(), 4u) << name;
    env.vars[name] = list[static_cast<size_t>(task)];
  }
  return env;
}

// A two-node step: 8 tasks, 4 per node; this is task 5 (node 1, local 1).
Environment TwoNodeStep() {
  return MakeEnv({{"SLURM_STEP_NODELIST", "gpu[01-02]-ib"},
                  {"SLURM_STEP_NUM_NODES", "2"},
                  {"SLURM_STEP_NUM_TASKS", "8"},
                  {"SLURM_STEP_TASKS_PER_NODE", "4(x2)"},
                  {"SLURM_PROCID", "5"},
                  {"SLURM_LOCALID", "1"},
                  {"SLURM_NODEID", "1"},
                  {"SLURM_GTIDS", "4,5,6,7"},
                  {"SLURM_JOB_ID", "1234"},
                  {"SLURM_STEP_ID", "3"},
                  {"SLURMD_NODENAME", "gpu02-ib"},
                  {"SLURM_NTASKS", "99"}});  // the allocation's count: must be ignored
}

std::string DetectError(const Environment& env) { return testing::DetectorError(SlurmDetector(), env); }

TEST(SlurmDetector, AbsentOutsideSlurm) {
  EXPECT_THAT(SlurmDetector().missing(MakeEnv({})),
              ElementsAre("SLURM_STEP_NODELIST", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "SLURM_LOCALID",
                          "SLURM_JOB_ID"));
}

TEST(SlurmDetector, BatchScriptIsNotAStep) {
  Environment batch = LoadFixtureEnv("slurm-single/job-5.out", "BATCH: ");
  ASSERT_EQ(batch.GetOr("SLURM_PROCID", ""), "0");
  EXPECT_THAT(SlurmDetector().missing(batch), ElementsAre("SLURM_STEP_NODELIST", "SLURM_STEP_NUM_TASKS"));
}

TEST(SlurmDetector, SrunN4FixtureEveryTask) {
  for (int task = 0; task < 4; ++task) {
    Environment env = SrunN4Task(task);
    ASSERT_TRUE(SlurmDetector().missing(env).empty());
    Topology t = SlurmDetector().detect(env);
    EXPECT_EQ(t.method, "slurm");
    EXPECT_EQ(t.coordinator_host, "vm");
    EXPECT_EQ(t.coordinator_port, SlurmCoordinatorPort(2, 0));
    EXPECT_EQ(t.launch_mode, LaunchMode::kPerTask);
    EXPECT_EQ(t.num_nodes, 1);
    EXPECT_EQ(t.node_rank, 0);
    EXPECT_THAT(t.hosts, ElementsAre("vm"));
    EXPECT_EQ(t.num_tasks, 4);
    EXPECT_EQ(t.task_id, task);
    EXPECT_EQ(t.local_task, task);
    EXPECT_EQ(t.local_tasks, 4);
    EXPECT_EQ(t.job_id, "2.0");
    EXPECT_TRUE(t.visible_devices.empty());
    EXPECT_TRUE(t.warnings.empty());
  }
}

TEST(SlurmDetector, GpuTaskFixtureIsPerNodeWithStepGpus) {
  Environment env = LoadFixtureEnv("slurm-single/srun-gpu-task-env.txt");
  ASSERT_TRUE(SlurmDetector().missing(env).empty());
  Topology t = SlurmDetector().detect(env);
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerNode);  // 1 task on 1 node
  EXPECT_EQ(t.num_tasks, 1);
  EXPECT_THAT(t.visible_devices, ElementsAre("0"));
  EXPECT_EQ(t.device_variable, "SLURM_STEP_GPUS");
  EXPECT_EQ(t.coordinator_port, SlurmCoordinatorPort(4, 0));
}

TEST(SlurmDetector, JobGpusWhenNoStepGpus) {
  Environment env = LoadFixtureEnv("slurm-single/srun-gpu-task-env.txt");
  env.vars.erase("SLURM_STEP_GPUS");
  env.vars["SLURM_JOB_GPUS"] = "2,3";
  Topology t = SlurmDetector().detect(env);
  EXPECT_THAT(t.visible_devices, ElementsAre("2", "3"));
  EXPECT_EQ(t.device_variable, "SLURM_JOB_GPUS");
}

TEST(SlurmDetector, TwoNodesPerTask) {
  Topology t = SlurmDetector().detect(TwoNodeStep());
  EXPECT_EQ(t.coordinator_host, "gpu01-ib");  // node 0 of the step, text after the bracket kept
  EXPECT_EQ(t.coordinator_port, SlurmCoordinatorPort(1234, 3));
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerTask);
  EXPECT_THAT(t.hosts, ElementsAre("gpu01-ib", "gpu02-ib"));
  EXPECT_EQ(t.num_nodes, 2);
  EXPECT_EQ(t.node_rank, 1);
  EXPECT_EQ(t.num_tasks, 8);  // SLURM_STEP_NUM_TASKS, not SLURM_NTASKS
  EXPECT_EQ(t.task_id, 5);
  EXPECT_EQ(t.local_task, 1);
  EXPECT_EQ(t.local_tasks, 4);
  EXPECT_EQ(t.job_id, "1234.3");
  EXPECT_TRUE(t.warnings.empty());
}

TEST(SlurmDetector, OneTaskPerNodeIsPerNode) {
  Environment env = MakeEnv({{"SLURM_STEP_NODELIST", "n[1-3]"},
                             {"SLURM_STEP_NUM_TASKS", "3"},
                             {"SLURM_STEP_TASKS_PER_NODE", "1(x3)"},
                             {"SLURM_PROCID", "2"},
                             {"SLURM_LOCALID", "0"},
                             {"SLURM_NODEID", "2"},
                             {"SLURM_JOB_ID", "7"}});
  Topology t = SlurmDetector().detect(env);
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerNode);
  EXPECT_EQ(t.node_rank, 2);
  EXPECT_EQ(t.local_tasks, 1);
  EXPECT_EQ(t.coordinator_port, SlurmCoordinatorPort(7, 0));  // no step id: step 0
  EXPECT_EQ(t.job_id, "7");
}

TEST(SlurmDetector, UnevenLayoutUsesThisNodesCount) {
  // Process 0 need not be on node 0: with arbitrary distribution the coordinator stays on node 0.
  Environment env = MakeEnv({{"SLURM_STEP_NODELIST", "b,a"},
                             {"SLURM_STEP_NUM_TASKS", "3"},
                             {"SLURM_STEP_TASKS_PER_NODE", "2,1"},
                             {"SLURM_PROCID", "0"},
                             {"SLURM_LOCALID", "0"},
                             {"SLURM_NODEID", "1"},
                             {"SLURM_JOB_ID", "7"},
                             {"SLURM_STEP_ID", "0"}});
  Topology t = SlurmDetector().detect(env);
  EXPECT_EQ(t.coordinator_host, "b");
  EXPECT_EQ(t.local_tasks, 1);
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerTask);
}

TEST(SlurmDetector, FederatedJobIdAboveInt) {
  Environment env = TwoNodeStep();
  env.vars["SLURM_JOB_ID"] = "4294967295";
  EXPECT_EQ(SlurmDetector().detect(env).coordinator_port, SlurmCoordinatorPort(4294967295LL, 3));
}

TEST(SlurmDetector, NodeAliasesGiveTheCoordinatorAddress) {
  Environment env = TwoNodeStep();
  env.vars["SLURM_NODE_ALIASES"] = "gpu02-ib:10.0.0.2:h2,gpu01-ib:[fd00::1]:h1";
  Topology t = SlurmDetector().detect(env);
  EXPECT_EQ(t.coordinator_host, "fd00::1");
  EXPECT_THAT(t.hosts, ElementsAre("gpu01-ib", "gpu02-ib"));
  env.vars["SLURM_NODE_ALIASES"] = "(null)";
  EXPECT_EQ(SlurmDetector().detect(env).coordinator_host, "gpu01-ib");
  env.vars["SLURM_NODE_ALIASES"] = "gpu01-ib:10.0.0.1";
  EXPECT_THAT(DetectError(env), HasSubstr("SLURM_NODE_ALIASES='gpu01-ib:10.0.0.1'"));
}

TEST(SlurmDetector, WarnsAboutInteractiveStepAndOtherNodeName) {
  Environment env = LoadFixtureEnv("slurm-single/srun-gpu-task-env.txt");
  env.vars["SLURM_STEP_ID"] = "4294967290";
  Topology t = SlurmDetector().detect(env);
  ASSERT_EQ(t.warnings.size(), 1u);
  EXPECT_THAT(t.warnings[0], HasSubstr("interactive step"));
  env.vars["SLURM_STEP_ID"] = "-6";  // how Slurm >= 26.05 prints it
  EXPECT_THAT(SlurmDetector().detect(env).warnings, ElementsAre(HasSubstr("interactive step")));

  Environment other = TwoNodeStep();
  other.vars["SLURMD_NODENAME"] = "gpu01-ib";
  EXPECT_THAT(SlurmDetector().detect(other).warnings, ElementsAre(HasSubstr("SLURMD_NODENAME=gpu01-ib")));
}

TEST(SlurmDetector, PmixStepIsSlurmsNotOpenMpisOrPmis) {
  // srun --mpi=pmix sets PMIX_* but no OMPI_COMM_WORLD_* or PMI_RANK: the step is read as Slurm's.
  Environment env = LoadFixtureEnv("slurm-single/srun-gpu-task-env.txt");
  for (const auto& [name, value] : LoadFixtureEnv("slurm-single/pmix-env.txt", "vm: ").vars)
    env.vars[name] = value;
  ASSERT_EQ(env.GetOr("PMIX_NAMESPACE", ""), "slurm.pmix.9.0");
  EXPECT_FALSE(OmpiDetector().missing(env).empty());
  EXPECT_FALSE(PmiDetector().missing(env).empty());
  ASSERT_TRUE(SlurmDetector().missing(env).empty());
  EXPECT_EQ(SlurmDetector().detect(env).num_tasks, 1);
  for (const Detector& d : ClusterDetectors()) {
    if (d.missing(env).empty()) {
      EXPECT_EQ(d.name, "slurm");
      break;
    }
  }
}

TEST(SlurmDetector, StepVariablesInsideAFluxJobBelongToFlux) {
  // `srun flux start`: the Flux job's tasks inherit the broker's step variables.
  Environment env = SrunN4Task(0);
  env.vars["FLUX_TASK_RANK"] = "3";
  env.vars["FLUX_JOB_ID"] = "f2wGgTHX";
  std::vector<std::string> missing = SlurmDetector().missing(env);
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_THAT(missing[0], HasSubstr("FLUX_TASK_RANK"));
}

TEST(SlurmDetector, RejectsNonNumericIds) {
  for (const char* name : {"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_STEP_NUM_TASKS",
                           "SLURM_STEP_NUM_NODES", "SLURM_JOB_ID", "SLURM_STEP_ID"}) {
    Environment env = TwoNodeStep();
    env.vars[name] = "1x";
    EXPECT_THAT(DetectError(env), HasSubstr(std::string(name) + "='1x'")) << name;
  }
  Environment env = TwoNodeStep();
  env.vars["SLURM_JOB_ID"] = "4294967296";
  EXPECT_THAT(DetectError(env), HasSubstr("SLURM_JOB_ID='4294967296'"));
  for (const char* bad : {"-", "-0", "-17", "--5", "+1", ""}) {
    env = TwoNodeStep();
    env.vars["SLURM_STEP_ID"] = bad;
    EXPECT_THAT(DetectError(env), HasSubstr("SLURM_STEP_ID='" + std::string(bad) + "'")) << bad;
  }
  env = TwoNodeStep();
  env.vars["SLURM_GTIDS"] = "4,x";
  EXPECT_THAT(DetectError(env), HasSubstr("SLURM_GTIDS='x'"));
}

TEST(SlurmDetector, RejectsProcidBeyondStepTasks) {
  Environment env = TwoNodeStep();
  env.vars["SLURM_PROCID"] = "8";
  std::string message = DetectError(env);
  EXPECT_THAT(message, HasSubstr("SLURM_PROCID=8"));
  EXPECT_THAT(message, HasSubstr("SLURM_STEP_NUM_TASKS=8"));
}

TEST(SlurmDetector, RejectsLocalidBeyondNodeTasks) {
  Environment env = TwoNodeStep();
  env.vars["SLURM_STEP_TASKS_PER_NODE"] = "6,2";
  env.vars["SLURM_GTIDS"] = "6,7";
  env.vars["SLURM_PROCID"] = "7";
  env.vars["SLURM_LOCALID"] = "2";
  EXPECT_THAT(DetectError(env), HasSubstr("SLURM_LOCALID='2' is not below the 2 tasks of node 1"));
}

TEST(SlurmDetector, RejectsNodeidBeyondHosts) {
  Environment env = TwoNodeStep();
  env.vars["SLURM_NODEID"] = "2";
  EXPECT_THAT(DetectError(env), HasSubstr("SLURM_NODEID='2'"));
}

TEST(SlurmDetector, RejectsNodeCountThatDisagreesWithNodelist) {
  Environment env = TwoNodeStep();
  env.vars["SLURM_STEP_NUM_NODES"] = "3";
  std::string message = DetectError(env);
  EXPECT_THAT(message, HasSubstr("SLURM_STEP_NUM_NODES='3'"));
  EXPECT_THAT(message, HasSubstr("SLURM_STEP_NODELIST='gpu[01-02]-ib' (2 hosts)"));
}

TEST(SlurmDetector, RejectsTasksPerNodeThatDisagree) {
  Environment env = TwoNodeStep();
  env.vars["SLURM_STEP_TASKS_PER_NODE"] = "4,3";
  EXPECT_THAT(DetectError(env), HasSubstr("adds up to 7 tasks but SLURM_STEP_NUM_TASKS=8"));
  env.vars["SLURM_STEP_TASKS_PER_NODE"] = "8";
  EXPECT_THAT(DetectError(env), HasSubstr("gives 1 per-node counts"));
  env.vars["SLURM_STEP_TASKS_PER_NODE"] = "4(x";
  EXPECT_THAT(DetectError(env), HasSubstr("SLURM_STEP_TASKS_PER_NODE"));
  env.vars.erase("SLURM_STEP_TASKS_PER_NODE");
  EXPECT_THAT(DetectError(env), HasSubstr("SLURM_STEP_TASKS_PER_NODE is not set"));
}

TEST(SlurmDetector, RejectsGtidsWithoutThisTask) {
  Environment env = TwoNodeStep();
  env.vars["SLURM_GTIDS"] = "0,1,2,3";
  EXPECT_THAT(DetectError(env), HasSubstr("SLURM_GTIDS='0,1,2,3'"));
}

TEST(SlurmDetector, RejectsMissingNodeidOnSeveralHosts) {
  Environment env = TwoNodeStep();
  env.vars.erase("SLURM_NODEID");
  EXPECT_THAT(DetectError(env), HasSubstr("SLURM_NODEID is not set"));
}

TEST(SlurmDetector, RejectsBadNodelist) {
  Environment env = TwoNodeStep();
  env.vars["SLURM_STEP_NODELIST"] = "gpu[02-01]";
  EXPECT_THAT(DetectError(env), HasSubstr("SLURM_STEP_NODELIST"));
  env.vars["SLURM_STEP_NODELIST"] = ",";
  EXPECT_THAT(DetectError(env), HasSubstr("names no hosts"));
}

TEST(SlurmDetector, RejectsBadGpuList) {
  Environment env = TwoNodeStep();
  env.vars["SLURM_STEP_GPUS"] = "0,,1";
  EXPECT_THAT(DetectError(env), HasSubstr("SLURM_STEP_GPUS='0,,1'"));
}

TEST(SlurmDetector, RejectsHeterogeneousJobs) {
  for (const char* name : {"SLURM_HET_SIZE", "SLURM_JOB_NODELIST_HET_GROUP_1", "SLURM_PACK_SIZE"}) {
    Environment env = TwoNodeStep();
    env.vars[name] = "2";
    std::string message = DetectError(env);
    EXPECT_THAT(message, HasSubstr(std::string(name) + "='2'"));
    EXPECT_THAT(message, HasSubstr("heterogeneous"));
    EXPECT_THAT(message, HasSubstr("--cluster-detection-method deactivate"));
  }
}

// Seen in every srun step inside an sbatch job under Slurm 22.05 (Debian 12), heterogeneous or not.
TEST(SlurmDetector, GroupZeroCopiesAloneAreNotAHeterogeneousJob) {
  Environment env = TwoNodeStep();
  env.vars["SLURM_JOB_CPUS_PER_NODE_PACK_GROUP_0"] = "2(x2)";
  env.vars["SLURM_JOB_NODELIST_HET_GROUP_0"] = "gpu[01-02]";
  EXPECT_EQ(SlurmDetector().detect(env).num_tasks, 8);
  env.vars["SLURM_JOB_NODELIST_HET_GROUP_1"] = "gpu03";
  EXPECT_THAT(DetectError(env), HasSubstr("heterogeneous"));
}

TEST(SlurmDetector, EscapesControlCharactersInMessages) {
  Environment env = TwoNodeStep();
  env.vars["SLURM_STEP_NUM_NODES"] = "3";
  env.vars["SLURM_STEP_NODELIST"] = "gpu01-ib\ngpu02-ib";  // newline is a separator since Slurm 23.02
  EXPECT_THAT(DetectError(env), HasSubstr("gpu01-ib\\ngpu02-ib"));
}

}  // namespace
}  // namespace distrun

namespace distrun {
namespace {

// Found by environment_fuzz: a long non-numeric job id overflowed before it was rejected.
TEST(SlurmDetector, LongNonNumericJobIdIsAnErrorNotAnOverflow) {
  for (const char* id : {"\xea\xea\xea\xea\xea\xea\xea\xea\xea\xea\xea\xea"
                         "12",
                         "99999999999999999999", "-777777777777"}) {
    Environment env = TwoNodeStep();
    env.vars["SLURM_JOB_ID"] = id;
    EXPECT_NE(DetectError(env).find("SLURM_JOB_ID="), std::string::npos) << id;
  }
}

}  // namespace
}  // namespace distrun
