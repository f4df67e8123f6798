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
using testing::MakeEnv;

// `flux run -N2 -n8`: this is task 5 (node 1, local 1). ƒ2wGgTHX is job 73689403246 in F58.
Environment FluxTask() {
  return MakeEnv({{"FLUX_TASK_RANK", "5"},
                  {"FLUX_TASK_LOCAL_ID", "1"},
                  {"FLUX_JOB_SIZE", "8"},
                  {"FLUX_JOB_NNODES", "2"},
                  {"FLUX_JOB_ID",
                   "\xC6\x92"
                   "2wGgTHX"},
                  {"FLUX_URI", "local:///run/flux/local"},
                  {"PMI_RANK", "5"},
                  {"PMI_SIZE", "8"},
                  {"PMI_FD", "7"}});
}

std::string DetectError(const Environment& env) { return testing::DetectorError(FluxDetector(), env); }

TEST(FluxDetector, AbsentOutsideFlux) {
  EXPECT_THAT(
      FluxDetector().missing(MakeEnv({})),
      ElementsAre("FLUX_TASK_RANK", "FLUX_TASK_LOCAL_ID", "FLUX_JOB_SIZE", "FLUX_JOB_NNODES", "FLUX_JOB_ID"));
  EXPECT_THAT(FluxDetector().missing(MakeEnv({{"FLUX_URI", "local:///x"}})), ::testing::SizeIs(5));
}

TEST(FluxDetector, SingleNodeUsesLoopback) {
  Environment env = FluxTask();
  env.vars["FLUX_JOB_NNODES"] = "1";
  ASSERT_THAT(FluxDetector().missing(env), IsEmpty());
  Topology t = FluxDetector().detect(env);
  EXPECT_EQ(t.method, "flux");
  EXPECT_EQ(t.coordinator_host, "127.0.0.1");
  EXPECT_EQ(t.coordinator_port, HashedCoordinatorPort("73689403246"));
  EXPECT_EQ(t.job_id,
            "\xC6\x92"
            "2wGgTHX");
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerTask);
  EXPECT_EQ(t.num_nodes, 1);
  EXPECT_EQ(t.node_rank, 0);
  EXPECT_THAT(t.hosts, ElementsAre("testhost"));
  EXPECT_EQ(t.num_tasks, 8);
  EXPECT_EQ(t.task_id, 5);
  EXPECT_EQ(t.local_task, 1);
  EXPECT_EQ(t.local_tasks, 8);
  EXPECT_TRUE(t.visible_devices.empty());
  EXPECT_THAT(t.warnings, IsEmpty());
}

TEST(FluxDetector, JobIdFormsGiveOnePort) {
  // Nodes in an ASCII locale print the F58 prefix as "f".
  Environment env = FluxTask();
  int port = FluxDetector().detect(env).coordinator_port.value();
  for (const char* id : {"f2wGgTHX", "73689403246"}) {
    env.vars["FLUX_JOB_ID"] = id;
    EXPECT_EQ(FluxDetector().detect(env).coordinator_port, port) << id;
    EXPECT_EQ(FluxDetector().detect(env).job_id, id);
  }
  env.vars["FLUX_JOB_ID"] = "fjpXCZedGfVQ";  // 2^64-1
  EXPECT_EQ(FluxDetector().detect(env).coordinator_port, HashedCoordinatorPort("18446744073709551615"));
}

TEST(FluxDetector, SeveralNodesNeedTheProbe) {
  Topology t = FluxDetector().detect(FluxTask());
  EXPECT_EQ(t.coordinator_host, "");  // Flux does not export the job's hosts
  EXPECT_THAT(t.hosts, IsEmpty());
  EXPECT_EQ(t.num_nodes, 2);
  EXPECT_EQ(t.local_tasks, 4);
  EXPECT_EQ(t.node_rank, 1);  // block task map
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerTask);
  EXPECT_THAT(t.warnings, ElementsAre(HasSubstr("inferred")));
}

TEST(FluxDetector, OneTaskPerNodeIsPerNode) {
  Environment env = FluxTask();
  env.vars["FLUX_JOB_SIZE"] = "3";
  env.vars["FLUX_JOB_NNODES"] = "3";
  env.vars["FLUX_TASK_RANK"] = "2";
  env.vars["FLUX_TASK_LOCAL_ID"] = "0";
  Topology t = FluxDetector().detect(env);
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerNode);
  EXPECT_EQ(t.node_rank, 2);
  EXPECT_EQ(t.local_tasks, 1);
  EXPECT_THAT(t.warnings, IsEmpty());
}

TEST(FluxDetector, UnevenLayoutWarns) {
  Environment env = FluxTask();
  env.vars["FLUX_JOB_SIZE"] = "5";
  env.vars["FLUX_TASK_RANK"] = "4";
  Topology t = FluxDetector().detect(env);
  EXPECT_EQ(t.local_tasks, 3);
  EXPECT_THAT(t.warnings, ElementsAre(HasSubstr("tasks per node unknown")));
}

TEST(FluxDetector, PalsPluginGivesTheNodeIndex) {
  Environment env = FluxTask();
  env.vars["FLUX_JOB_SIZE"] = "5";
  env.vars["FLUX_TASK_RANK"] = "4";
  env.vars["PALS_NODEID"] = "1";
  env.vars["PALS_RANKID"] = "4";
  EXPECT_EQ(FluxDetector().detect(env).node_rank, 1);
  env.vars["PALS_NODEID"] = "2";
  EXPECT_THAT(DetectError(env), HasSubstr("PALS_NODEID=2 is not below FLUX_JOB_NNODES=2"));
}

TEST(FluxDetector, IsChosenOverPmiAndSlurmVariablesItCarries) {
  Environment env = FluxTask();
  // `srun flux start`: the broker's step variables reach every Flux job.
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, std::string>>{{"SLURM_STEP_NODELIST", "n[1-2]"},
                                                        {"SLURM_STEP_NUM_TASKS", "2"},
                                                        {"SLURM_PROCID", "0"},
                                                        {"SLURM_LOCALID", "0"},
                                                        {"SLURM_JOB_ID", "5"},
                                                        {"PMI_JOBID", "5.0"}}) {
    env.vars[name] = value;
  }
  for (const Detector& d : ClusterDetectors()) {
    if (d.missing(env).empty()) {
      EXPECT_EQ(d.name, "flux");
      break;
    }
  }
}

TEST(FluxDetector, RejectsMalformedJobIds) {
  for (const char* bad :
       {"", "f", "\xC6\x92", "f0OIl", "0x1f", "f2wG-THX", "fjpXCZedGfVR", "99999999999999999999"}) {
    Environment env = FluxTask();
    env.vars["FLUX_JOB_ID"] = bad;
    EXPECT_THAT(DetectError(env), HasSubstr("FLUX_JOB_ID='")) << bad;
  }
}

TEST(FluxDetector, RejectsMalformedCounts) {
  for (const char* name : {"FLUX_TASK_RANK", "FLUX_TASK_LOCAL_ID", "FLUX_JOB_SIZE", "FLUX_JOB_NNODES"}) {
    Environment env = FluxTask();
    env.vars[name] = "x";
    EXPECT_THAT(DetectError(env), HasSubstr(std::string(name) + "='x'")) << name;
  }
  Environment env = FluxTask();
  env.vars["FLUX_TASK_RANK"] = "8";
  EXPECT_THAT(DetectError(env), HasSubstr("FLUX_TASK_RANK=8 is not below FLUX_JOB_SIZE=8"));
  env = FluxTask();
  env.vars["FLUX_JOB_NNODES"] = "9";
  EXPECT_THAT(DetectError(env), HasSubstr("FLUX_JOB_NNODES='9' exceeds FLUX_JOB_SIZE=8"));
  env.vars["FLUX_JOB_NNODES"] = "0";
  EXPECT_THAT(DetectError(env), HasSubstr("FLUX_JOB_NNODES=0"));
  env = FluxTask();
  env.vars["FLUX_TASK_LOCAL_ID"] = "7";
  EXPECT_THAT(DetectError(env), HasSubstr("FLUX_TASK_LOCAL_ID='7' is too large"));
}

}  // namespace
}  // namespace distrun
