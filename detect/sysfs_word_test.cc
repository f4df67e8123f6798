#include "detect/sysfs_word.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace distrun {
namespace {

namespace fs = std::filesystem;

class SysfsWordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "distrun-sysfs-word-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path Write(const std::string& name, const std::string& text) {
    fs::path file = dir_ / name;
    std::ofstream(file) << text;
    return file;
  }
  fs::path dir_;
};

TEST_F(SysfsWordTest, TheFirstWordWithoutItsNewline) {
  EXPECT_EQ(ReadFirstWord(Write("vendor", "0x10de\n")), "0x10de");
  EXPECT_EQ(ReadFirstWord(Write("padded", "  0x1ae0 0x0063\n")), "0x1ae0");
  EXPECT_EQ(ReadFirstWord(Write("bare", "0x8086")), "0x8086");
}

TEST_F(SysfsWordTest, NothingToReadIsEmpty) {
  EXPECT_EQ(ReadFirstWord(dir_ / "missing"), "");
  EXPECT_EQ(ReadFirstWord(Write("empty", "")), "");
  EXPECT_EQ(ReadFirstWord(Write("blank", " \n")), "");
  EXPECT_EQ(ReadFirstWord(dir_), "");  // a directory cannot be read
}

}  // namespace
}  // namespace distrun
