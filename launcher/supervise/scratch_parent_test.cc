#include "launcher/supervise/scratch_parent.h"

#include <gtest/gtest.h>

#include "detect/test_temp_root.h"

namespace distrun {
namespace {

using testing::TempRoot;

TEST(ScratchParent, TmpdirWhenSet) {
  TempRoot root;
  std::filesystem::create_directories(root.path() / "dev/shm");
  Environment env;
  env.root = root.path();
  env.vars["TMPDIR"] = "/scratch/job7";
  EXPECT_EQ(ScratchParent(env), std::filesystem::path("/scratch/job7"));
}

TEST(ScratchParent, SharedMemoryWhenTmpdirIsUnsetOrEmpty) {
  TempRoot root;
  std::filesystem::create_directories(root.path() / "dev/shm");
  Environment env;
  env.root = root.path();
  EXPECT_EQ(ScratchParent(env), root.path() / "dev/shm");
  env.vars["TMPDIR"] = "";  // an empty TMPDIR names no directory
  EXPECT_EQ(ScratchParent(env), root.path() / "dev/shm");
}

TEST(ScratchParent, TmpWithoutSharedMemory) {
  TempRoot root;
  Environment env;
  env.root = root.path();
  EXPECT_EQ(ScratchParent(env), std::filesystem::path("/tmp"));
  root.Write("dev/shm", "a file, not a directory");
  EXPECT_EQ(ScratchParent(env), std::filesystem::path("/tmp"));
}

}  // namespace
}  // namespace distrun
