// Where distrun finds the files that come with it (the sentinel, the runtime module): beside the program,
// else in ../libexec/distrun; a file that cannot be used in the asked mode does not count.
#include "launcher/process/companion_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace distrun {
namespace {

namespace fs = std::filesystem;

TEST(CompanionFiles, BesideTheProgramElseInLibexecAndOnlyInTheAskedMode) {
  fs::path root = fs::temp_directory_path() / ("distrun-companion-" + std::to_string(::getpid()));
  fs::create_directories(root / "bin");
  fs::create_directories(root / "libexec" / "distrun");
  const std::string program = (root / "bin" / "distrun").string();
  EXPECT_EQ(FindCompanionFile(program, "helper", R_OK), "");
  EXPECT_EQ(FindCompanionFile("", "helper", R_OK), "");
  fs::path installed = root / "libexec" / "distrun" / "helper";
  std::ofstream(installed) << "x";
  EXPECT_EQ(FindCompanionFile(program, "helper", R_OK), installed.string());
  // Readable is not executable: a program must be both there and runnable.
  fs::permissions(installed, fs::perms::owner_read);
  EXPECT_EQ(FindCompanionFile(program, "helper", X_OK), "");  // root too: no execute bit at all
  fs::permissions(installed, fs::perms::owner_all);
  EXPECT_EQ(FindCompanionFile(program, "helper", X_OK), installed.string());
  fs::path beside = root / "bin" / "helper";
  std::ofstream(beside) << "x";
  fs::permissions(beside, fs::perms::owner_all);
  EXPECT_EQ(FindCompanionFile(program, "helper", X_OK), beside.string());
  EXPECT_EQ(FindCompanionFile(program, "other", R_OK), "");
  fs::remove_all(root);
}

}  // namespace
}  // namespace distrun
