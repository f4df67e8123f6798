#include "launcher/job/runtime_module.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "detect/errors.h"

namespace distrun {
namespace {

namespace fs = std::filesystem;

std::string ErrorOfLoad(const std::string& path) {
  try {
    RuntimeModule::LoadFile(path);
  } catch (const RuntimeModuleError& e) {
    return e.what();
  }
  return "";
}

TEST(RuntimeModule, TheBuiltModuleLoadsAndRunsOnlyItsVerbs) {
  RuntimeModule module = RuntimeModule::LoadFile(DISTRUN_RUNTIME_MODULE);
  const char* launch[] = {"distrun", "python", "train.py"};
  int exit_code = -1;
  EXPECT_FALSE(module.RunVerb(3, launch, {}, exit_code));
  EXPECT_EQ(exit_code, -1);
  // A verb outside a job says so (one line on stderr) and exits 2, as it did inside distrun.
  const char* get[] = {"distrun", "kv", "get", "some-key"};
  EXPECT_TRUE(module.RunVerb(4, get, {}, exit_code));
  EXPECT_EQ(exit_code, 2);
}

TEST(RuntimeModule, AMissingOrForeignFileIsRefusedWithItsPath) {
  std::string missing = ErrorOfLoad("/nonexistent/distrun-runtime.so");
  EXPECT_NE(missing.find("cannot load the runtime module /nonexistent/distrun-runtime.so"), std::string::npos)
      << missing;
  // A shared library that is not the module: no entry.
  std::string foreign = ErrorOfLoad(DISTRUN_FAKE_CUDA_LIBRARY);
  EXPECT_NE(foreign.find("is not distrun's runtime module"), std::string::npos) << foreign;
}

// Where it is looked for: launcher/process/companion_files_test.cc.
TEST(RuntimeModule, AMissingModuleSaysWhereItWasLookedFor) {
  fs::path root = fs::temp_directory_path() / ("distrun-module-find-" + std::to_string(::getpid()));
  fs::create_directories(root / "bin");
  fs::create_directories(root / "libexec" / "distrun");
  std::string program = (root / "bin" / "distrun").string();
  try {
    RuntimeModule::Load(program);
    ADD_FAILURE() << "loaded a module that is not there";
  } catch (const RuntimeModuleError& e) {
    EXPECT_NE(std::string(e.what()).find("is neither beside " + program + " nor in ../libexec/distrun"),
              std::string::npos)
        << e.what();
  }
  fs::remove_all(root);
}

TEST(RuntimeModule, ErrorsAreThrownAgainAsWhatTheModuleCaught) {
  EXPECT_NO_THROW(ThrowModuleError({}));
  EXPECT_THROW(ThrowModuleError({ModuleError::Kind::kUsage, 2, "bad"}), UsageError);
  try {
    ThrowModuleError({ModuleError::Kind::kJobLink, 75, "fenced"});
    ADD_FAILURE();
  } catch (const JobLinkError& e) {
    EXPECT_EQ(e.exit_code(), 75);
    EXPECT_STREQ(e.what(), "fenced");
  }
  EXPECT_THROW(ThrowModuleError({ModuleError::Kind::kInternal, 1, "oops"}), std::runtime_error);
}

}  // namespace
}  // namespace distrun
