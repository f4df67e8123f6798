#include "launcher/remote/forwarded_env.h"

#include <gtest/gtest.h>

#include "detect/errors.h"

namespace distrun {
namespace {

TEST(ForwardedEnv, TheDefaultSetCarriesWhatTrainingNeedsAndNotEachHostsOwn) {
  std::map<std::string, std::string, std::less<>> vars = {
      {"PATH", "/venv/bin:/usr/bin"},  {"VIRTUAL_ENV", "/venv"},
      {"NCCL_DEBUG", "INFO"},          {"CUDA_VISIBLE_DEVICES", "0,1"},
      {"OMP_NUM_THREADS", "4"},        {"HOME", "/root"},
      {"SSH_AUTH_SOCK", "/tmp/agent"}, {"DISTRUN_NPROC_PER_NODE", "2"},
      {"PYTHONPATH", "/src"},          {"TERM", "xterm"}};
  EXPECT_EQ(ForwardedVariables(vars, {}),
            (std::vector<std::string>{"NCCL_DEBUG=INFO", "OMP_NUM_THREADS=4", "PATH=/venv/bin:/usr/bin",
                                      "PYTHONPATH=/src", "VIRTUAL_ENV=/venv"}));
}

TEST(ForwardedEnv, DashXAddsANameAValueOrAFamily) {
  std::map<std::string, std::string, std::less<>> vars = {{"WANDB_API_KEY", "k"},
                                                          {"WANDB_PROJECT", "p"},
                                                          {"WANDBX", "no"},
                                                          {"MY_FLAG", "1"},
                                                          {"CUDA_VISIBLE_DEVICES", "0"}};
  EXPECT_EQ(ForwardedVariables(vars, {"WANDB_*", "MY_FLAG", "SEED=7,8", "CUDA_VISIBLE_DEVICES"}),
            (std::vector<std::string>{"CUDA_VISIBLE_DEVICES=0", "MY_FLAG=1", "SEED=7,8", "WANDB_API_KEY=k",
                                      "WANDB_PROJECT=p"}));
  try {
    ForwardedVariables(vars, {"UNSET_ONE"});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "-x UNSET_ONE: UNSET_ONE is not set here; set it, or give -x UNSET_ONE=VALUE");
  }
}

}  // namespace
}  // namespace distrun
