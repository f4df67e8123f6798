#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

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

// A file-system root per test, holding the LSF host file at /lsf/hostfile.
class LsfDetectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = std::filesystem::path(::testing::TempDir()) / (std::string("lsf_") + info->name());
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "lsf");
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  void WriteHostfile(const std::string& text) { std::ofstream(root_ / "lsf" / "hostfile") << text; }

  // Summit-like: the launch node, then two compute nodes with 42 slots each.
  static std::string SummitHostfile(int compute_nodes = 2) {
    std::string text = "batch3\n";
    for (int n = 0; n < compute_nodes; ++n) {
      for (int i = 0; i < 42; ++i) text += "a01n0" + std::to_string(6 + n) + "\n";
    }
    return text;
  }

  // jsrun: 12 ranks, 6 per node; this is rank 7 (node 1, local 1).
  Environment JsrunEnv() {
    Environment env = MakeEnv({{"JSM_NAMESPACE_RANK", "7"},
                               {"JSM_NAMESPACE_SIZE", "12"},
                               {"JSM_NAMESPACE_LOCAL_RANK", "1"},
                               {"JSM_NAMESPACE_LOCAL_SIZE", "6"},
                               {"LSB_JOBID", "12345"},
                               {"LSB_DJOB_HOSTFILE", "/lsf/hostfile"}});
    env.root = root_;
    env.hostname = "a01n07";
    return env;
  }

  std::string DetectError(const Environment& env) { return testing::DetectorError(LsfDetector(), env); }

  std::filesystem::path root_;
};

TEST_F(LsfDetectorTest, AbsentOutsideJsrun) {
  EXPECT_THAT(LsfDetector().missing(MakeEnv({})),
              ElementsAre("JSM_NAMESPACE_RANK", "JSM_NAMESPACE_SIZE", "JSM_NAMESPACE_LOCAL_RANK",
                          "JSM_NAMESPACE_LOCAL_SIZE", "LSB_JOBID"));
  // A batch script (LSB_* only) is not a jsrun task.
  EXPECT_THAT(LsfDetector().missing(MakeEnv({{"LSB_JOBID", "1"}, {"LSB_HOSTS", "a b"}})),
              ElementsAre("JSM_NAMESPACE_RANK", "JSM_NAMESPACE_SIZE", "JSM_NAMESPACE_LOCAL_RANK",
                          "JSM_NAMESPACE_LOCAL_SIZE"));
}

TEST_F(LsfDetectorTest, SummitHostfileSkipsTheLaunchNode) {
  WriteHostfile(SummitHostfile());
  Environment env = JsrunEnv();
  ASSERT_THAT(LsfDetector().missing(env), IsEmpty());
  Topology t = LsfDetector().detect(env);
  EXPECT_EQ(t.method, "lsf");
  EXPECT_THAT(t.hosts, ElementsAre("a01n06", "a01n07"));
  EXPECT_EQ(t.coordinator_host, "a01n06");
  EXPECT_EQ(t.coordinator_port, HashedCoordinatorPort("12345"));
  EXPECT_EQ(t.job_id, "12345");
  EXPECT_EQ(t.num_nodes, 2);
  EXPECT_EQ(t.node_rank, 1);
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerTask);
  EXPECT_EQ(t.num_tasks, 12);
  EXPECT_EQ(t.task_id, 7);
  EXPECT_EQ(t.local_task, 1);
  EXPECT_EQ(t.local_tasks, 6);
  EXPECT_TRUE(t.visible_devices.empty());
  EXPECT_THAT(t.warnings, IsEmpty());
}

TEST_F(LsfDetectorTest, FullyQualifiedHostnameFindsItsNode) {
  WriteHostfile(SummitHostfile());
  Environment env = JsrunEnv();
  env.hostname = "a01n07.summit.olcf.ornl.gov";
  EXPECT_EQ(LsfDetector().detect(env).node_rank, 1);
  env.hostname = "elsewhere";
  Topology t = LsfDetector().detect(env);
  EXPECT_EQ(t.node_rank, 0);
  EXPECT_THAT(t.warnings, ElementsAre(HasSubstr("not among the hosts")));
}

TEST_F(LsfDetectorTest, PmixNamespaceSeparatesConcurrentJsruns) {
  WriteHostfile(SummitHostfile());
  Environment env = JsrunEnv();
  env.vars["PMIX_NAMESPACE"] = "jsm.2";
  EXPECT_EQ(LsfDetector().detect(env).coordinator_port, HashedCoordinatorPort("12345/jsm.2"));
}

TEST_F(LsfDetectorTest, FewerRanksThanHostsUseTheFirstHosts) {
  WriteHostfile(SummitHostfile(3));
  Environment env = JsrunEnv();
  Topology t = LsfDetector().detect(env);
  EXPECT_THAT(t.hosts, ElementsAre("a01n06", "a01n07"));
  EXPECT_EQ(t.num_nodes, 2);
  EXPECT_THAT(t.warnings, ElementsAre(HasSubstr("assuming jsrun uses the first 2")));
}

TEST_F(LsfDetectorTest, OneRankPerNodeIsPerNode) {
  WriteHostfile(SummitHostfile());
  Environment env = JsrunEnv();
  env.vars["JSM_NAMESPACE_SIZE"] = "2";
  env.vars["JSM_NAMESPACE_RANK"] = "1";
  env.vars["JSM_NAMESPACE_LOCAL_RANK"] = "0";
  env.vars["JSM_NAMESPACE_LOCAL_SIZE"] = "1";
  env.hostname = "unknown-name";
  Topology t = LsfDetector().detect(env);
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerNode);
  EXPECT_EQ(t.node_rank, 1);  // one rank per node: the rank numbers the node
  EXPECT_THAT(t.warnings, IsEmpty());
}

TEST_F(LsfDetectorTest, FullMachineHostfile) {
  // 4608 nodes with 42 slots each, as on all of Summit: about 190,000 lines.
  std::string text = "batch1\n";
  for (int n = 0; n < 4608; ++n) {
    std::string line = "n" + std::to_string(n) + "\n";
    for (int i = 0; i < 42; ++i) text += line;
  }
  WriteHostfile(text);
  Environment env = JsrunEnv();
  env.vars["JSM_NAMESPACE_SIZE"] = std::to_string(4608 * 6);
  env.hostname = "n4607";
  Topology t = LsfDetector().detect(env);
  EXPECT_EQ(t.num_nodes, 4608);
  EXPECT_EQ(t.coordinator_host, "n0");
  EXPECT_EQ(t.node_rank, 4607);
}

TEST_F(LsfDetectorTest, SingleNodeUsesLoopback) {
  WriteHostfile(SummitHostfile(1));
  Environment env = JsrunEnv();
  env.vars["JSM_NAMESPACE_SIZE"] = "6";
  env.vars["JSM_NAMESPACE_RANK"] = "3";
  Topology t = LsfDetector().detect(env);
  EXPECT_EQ(t.coordinator_host, "127.0.0.1");
  EXPECT_EQ(t.num_nodes, 1);
  EXPECT_THAT(t.hosts, ElementsAre("a01n06"));
}

TEST_F(LsfDetectorTest, McpuHostsAndLsbHosts) {
  Environment env = JsrunEnv();
  env.vars.erase("LSB_DJOB_HOSTFILE");
  env.vars["LSB_MCPU_HOSTS"] = "batch02 1 a09n03 42 a10n04 42";
  env.hostname = "a10n04";
  Topology t = LsfDetector().detect(env);
  EXPECT_THAT(t.hosts, ElementsAre("a09n03", "a10n04"));
  EXPECT_EQ(t.node_rank, 1);

  env.vars.erase("LSB_MCPU_HOSTS");
  env.vars["LSB_HOSTS"] = "hostA hostA hostB hostB";  // plain LSF: no launch node to drop
  env.hostname = "hostA";
  t = LsfDetector().detect(env);
  EXPECT_THAT(t.hosts, ElementsAre("hostA", "hostB"));
  EXPECT_EQ(t.coordinator_host, "hostA");
  EXPECT_EQ(t.node_rank, 0);

  env.vars["LSB_HOSTS"] = "hostA hostB";  // one slot each: nothing marks a launch node
  EXPECT_THAT(LsfDetector().detect(env).hosts, ElementsAre("hostA", "hostB"));
}

TEST_F(LsfDetectorTest, UnreadableHostfile) {
  Environment env = JsrunEnv();  // no file written
  EXPECT_THAT(DetectError(env),
              HasSubstr("LSB_DJOB_HOSTFILE='/lsf/hostfile' names a file that cannot be read"));
  env.vars["LSB_MCPU_HOSTS"] = "batch02 1 a01n06 42 a01n07 42";
  Topology t = LsfDetector().detect(env);
  EXPECT_THAT(t.hosts, ElementsAre("a01n06", "a01n07"));
  EXPECT_THAT(t.warnings, ElementsAre(HasSubstr("cannot be read; the hosts come from LSB_MCPU_HOSTS")));
}

TEST_F(LsfDetectorTest, NoHostListNeedsTheProbe) {
  Environment env = JsrunEnv();
  env.vars.erase("LSB_DJOB_HOSTFILE");
  Topology t = LsfDetector().detect(env);
  EXPECT_EQ(t.coordinator_host, "");
  EXPECT_EQ(t.num_nodes, 2);
  EXPECT_THAT(t.warnings, ElementsAre(HasSubstr("inferred")));
}

TEST_F(LsfDetectorTest, RejectsMalformedValues) {
  WriteHostfile(SummitHostfile());
  Environment env = JsrunEnv();
  env.vars["LSB_JOBID"] = "12a";
  EXPECT_THAT(DetectError(env), HasSubstr("LSB_JOBID='12a'"));
  env = JsrunEnv();
  env.vars["JSM_NAMESPACE_RANK"] = "12";
  EXPECT_THAT(DetectError(env), HasSubstr("JSM_NAMESPACE_RANK=12 is not below JSM_NAMESPACE_SIZE=12"));
  env = JsrunEnv();
  env.vars["JSM_NAMESPACE_LOCAL_SIZE"] = "x";
  EXPECT_THAT(DetectError(env), HasSubstr("JSM_NAMESPACE_LOCAL_SIZE='x'"));

  env = JsrunEnv();
  env.vars.erase("LSB_DJOB_HOSTFILE");
  for (const char* bad : {"batch02 1 a09n03", "batch02 x", ""}) {
    env.vars["LSB_MCPU_HOSTS"] = bad;
    EXPECT_THAT(DetectError(env), HasSubstr("LSB_MCPU_HOSTS")) << bad;
  }
  env.vars["LSB_MCPU_HOSTS"] = "a 0 b 1";
  EXPECT_THAT(DetectError(env), HasSubstr("LSB_MCPU_HOSTS"));
  env.vars.erase("LSB_MCPU_HOSTS");
  env.vars["LSB_HOSTS"] = "  ";
  EXPECT_THAT(DetectError(env), HasSubstr("LSB_HOSTS='  ' names no hosts"));

  WriteHostfile("\n\n");
  EXPECT_THAT(DetectError(JsrunEnv()), HasSubstr("names a file with no hosts"));
  WriteHostfile("batch3\na01n06 42\n");
  EXPECT_THAT(DetectError(JsrunEnv()), HasSubstr("'a01n06 42'"));
}

TEST_F(LsfDetectorTest, JsmVariablesInsideAFluxJobBelongToFlux) {
  Environment env = JsrunEnv();
  env.vars["FLUX_TASK_RANK"] = "0";
  env.vars["FLUX_JOB_ID"] = "f2wGgTHX";
  EXPECT_THAT(LsfDetector().missing(env), ElementsAre(HasSubstr("FLUX_TASK_RANK")));
}

}  // namespace
}  // namespace distrun
