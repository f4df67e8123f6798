#include "launcher/process/cpu_set.h"

#include <gtest/gtest.h>

#include <vector>

namespace distrun {
namespace {

using Cpus = std::vector<int>;

TEST(CpuList, ParsesTheKernelsFormat) {
  EXPECT_EQ(ParseCpuList("0-3,8,10-11\n"), Cpus({0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(ParseCpuList("5"), Cpus({5}));
  EXPECT_EQ(ParseCpuList(" 2 , 0-1 "), Cpus({0, 1, 2}));
  EXPECT_EQ(ParseCpuList("3,1-2,2"), Cpus({1, 2, 3}));  // sorted, repeats once
  EXPECT_EQ(ParseCpuList("\n"), Cpus());                // an empty list: a node without CPUs
  for (const char* bad : {"a", "1-", "-1", "3-1", "1,,2", "0x3", "1 2", "0-99999999"}) {
    EXPECT_FALSE(ParseCpuList(bad).has_value()) << bad;
  }
}

TEST(CpuList, FormatsRanges) {
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(FormatCpuList({7}), "7");
  EXPECT_EQ(FormatCpuList({}), "");
  EXPECT_EQ(FormatCpuList({0, 2, 4}), "0,2,4");
  EXPECT_EQ(FormatCpuList(*ParseCpuList("0-63,128-191")), "0-63,128-191");
}

TEST(CpuMask, WordsHoldOneBitPerCpu) {
  EXPECT_TRUE(CpuMaskWords({}).empty());
  std::vector<unsigned long> words = CpuMaskWords({0, 3, 64, 65});
  ASSERT_EQ(words.size(), 64 / (8 * sizeof(unsigned long)) + 1);
  EXPECT_EQ(words.front() & 0xf, 0x9ul);
  EXPECT_EQ(words.back() >> (64 % (8 * sizeof(unsigned long))) & 0x3, 0x3ul);
}

}  // namespace
}  // namespace distrun
