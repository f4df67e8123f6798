#include "launcher/commands/check_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "detect/errors.h"
#include "detect/test_temp_root.h"
#include "test_support.h"

namespace distrun {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Args = std::vector<std::string>;

// A host named "gpu07" whose file-system root is `root`, without a CUDA driver.
Environment Host(const testing::TempRoot& root,
                 std::initializer_list<std::pair<std::string, std::string>> vars = {}) {
  Environment env = testing::MakeEnv(vars);
  env.hostname = "gpu07";
  env.root = root.path();
  return env;
}

// Two GPUs as the driver reports them.
Environment HostWithGpus(const testing::TempRoot& root,
                         std::initializer_list<std::pair<std::string, std::string>> vars = {}) {
  Environment env = Host(root, vars);
  env.cuda_query = [] {
    return std::optional<std::vector<GpuInfo>>(
        std::vector<GpuInfo>{{0, "GPU-a", "0000:1b:00.0", "H100"}, {1, "GPU-b", "0000:9c:00.0", "H100"}});
  };
  return env;
}

// distrun at <root>/bin/distrun, with the check worker beside it when `with_worker`.
std::string Install(const testing::TempRoot& root, bool with_worker) {
  root.Write("bin/distrun", "");
  if (with_worker) {
    root.Write("bin/distrun-check-worker", "#!/bin/sh\n");
    ::chmod((root.path() / "bin/distrun-check-worker").c_str(), 0755);
  }
  return (root.path() / "bin/distrun").string();
}

TEST(CheckCommand, NoGpuSaysWhatWasLookedAtAndExits1) {
  testing::TempRoot root;
  CheckPlan plan = PlanCheck(Host(root), Install(root, true), {});
  EXPECT_TRUE(plan.argv.empty());
  EXPECT_EQ(plan.exit_code, 1);
  EXPECT_EQ(
      plan.message,
      "distrun: check: no GPU found on gpu07 (/proc/driver/nvidia/gpus: no GPU; /dev/nvidia[0-9]*: none; "
      "/dev/kfd: absent); nothing to check");
}

TEST(CheckCommand, EveryGpuHiddenByTheVariable) {
  testing::TempRoot root;
  CheckPlan plan = PlanCheck(HostWithGpus(root, {{"CUDA_VISIBLE_DEVICES", ""}}), Install(root, true), {});
  EXPECT_EQ(plan.exit_code, 1);
  EXPECT_EQ(
      plan.message,
      "distrun: check: no GPU found on gpu07 (CUDA_VISIBLE_DEVICES='' hides every GPU); nothing to check");
  plan = PlanCheck(Host(root, {{"CUDA_VISIBLE_DEVICES", "-1"}}), Install(root, true), {});
  EXPECT_EQ(plan.exit_code, 1);
  EXPECT_THAT(plan.message, HasSubstr("(CUDA_VISIBLE_DEVICES='-1' hides every GPU)"));
  // Indices in the variable but no GPU behind them.
  plan = PlanCheck(Host(root, {{"CUDA_VISIBLE_DEVICES", "0,1"}}), Install(root, true), {});
  EXPECT_EQ(plan.exit_code, 1);
  EXPECT_THAT(plan.message,
              HasSubstr("no GPU found on gpu07 (CUDA_VISIBLE_DEVICES='0,1'; /proc/driver/nvidia/gpus"));
}

TEST(CheckCommand, AMalformedVariableIsAUsageError) {
  testing::TempRoot root;
  EXPECT_THROW(PlanCheck(Host(root, {{"CUDA_VISIBLE_DEVICES", "0,,1"}}), Install(root, true), {}),
               UsageError);
}

TEST(CheckCommand, GpusWithoutTheWorkerSayHowToGetIt) {
  testing::TempRoot root;
  CheckPlan plan = PlanCheck(HostWithGpus(root), Install(root, false), {});
  EXPECT_TRUE(plan.argv.empty());
  EXPECT_EQ(plan.exit_code, 1);
  EXPECT_THAT(plan.message, HasSubstr("gpu07 has 2 GPUs, but this distrun was built without NCCL: "));
  EXPECT_THAT(plan.message, HasSubstr("bin/distrun-check-worker is missing"));
  EXPECT_THAT(plan.message, HasSubstr("-DDISTRUN_WITH_NCCL=ON"));
}

TEST(CheckCommand, GpusFoundInProcfsCountToo) {
  testing::TempRoot root;
  root.Write("proc/driver/nvidia/gpus/0000:1b:00.0/information", "Bus Location: 0000:1b:00.0\n");
  CheckPlan plan = PlanCheck(Host(root), Install(root, false), {});
  EXPECT_THAT(plan.message, HasSubstr("gpu07 has 1 GPU, but"));
}

TEST(CheckCommand, GpusAndTheWorkerRunDistrunOverIt) {
  testing::TempRoot root;
  const std::string self = Install(root, true);
  const std::string worker = (root.path() / "bin/distrun-check-worker").string();
  CheckPlan plan = PlanCheck(HostWithGpus(root), self, {});
  EXPECT_THAT(plan.argv, ElementsAre(self, "--nproc-per-node", "gpu", "--tag-output", "off", "--", worker));
  EXPECT_EQ(plan.message, "");

  // distrun's options before "--", the worker's after; the user's choices replace the defaults.
  plan = PlanCheck(HostWithGpus(root), self,
                   {"--nproc-per-node=1", "--log-dir", "logs", "--", "--max-bytes", "64M", "--iters", "5"});
  EXPECT_THAT(plan.argv, ElementsAre(self, "--tag-output", "off", "--nproc-per-node=1", "--log-dir", "logs",
                                     "--", worker, "--max-bytes", "64M", "--iters", "5"));
  plan = PlanCheck(HostWithGpus(root), self, {"--tag-output", "on"});
  EXPECT_THAT(plan.argv, ElementsAre(self, "--nproc-per-node", "gpu", "--tag-output", "on", "--", worker));
}

TEST(CheckCommand, NarrowedGpusAreCountedByTheVariable) {
  testing::TempRoot root;
  Environment env = HostWithGpus(root, {{"CUDA_VISIBLE_DEVICES", "1"}});
  CheckPlan plan = PlanCheck(env, Install(root, false), {});
  EXPECT_THAT(plan.message, HasSubstr("gpu07 has 1 GPU, but"));
}

TEST(CheckCommand, HelpIsPrintedWithExit0) {
  testing::TempRoot root;
  for (const char* flag : {"--help", "-h"}) {
    CheckPlan plan = PlanCheck(Host(root), Install(root, false), {flag});
    EXPECT_TRUE(plan.argv.empty());
    EXPECT_EQ(plan.exit_code, 0);
    EXPECT_THAT(plan.message, HasSubstr("usage: distrun check"));
    EXPECT_THAT(plan.message, HasSubstr("busbw = algbw * 2(n-1)/n"));
  }
}

}  // namespace
}  // namespace distrun
