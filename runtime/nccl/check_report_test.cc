#include "runtime/nccl/check_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace distrun {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(CheckBandwidth, AlgorithmBandwidthIsBytesPerSecondInGigabytes) {
  EXPECT_DOUBLE_EQ(AlgorithmBandwidth(1'000'000'000, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(AlgorithmBandwidth(size_t{1} << 30, 0.01), 107.3741824);
  EXPECT_DOUBLE_EQ(AlgorithmBandwidth(8, 1e-5), 8e-4);
  EXPECT_EQ(AlgorithmBandwidth(8, 0), 0);  // no time measured: no figure, not infinity
}

TEST(CheckBandwidth, BusBandwidthUsesTheAllReduceFactor) {
  // nccl-tests: busbw = algbw * 2(n-1)/n for all-reduce.
  EXPECT_DOUBLE_EQ(BusBandwidth(100, 2), 100);
  EXPECT_DOUBLE_EQ(BusBandwidth(100, 4), 150);
  EXPECT_DOUBLE_EQ(BusBandwidth(100, 8), 175);
  EXPECT_DOUBLE_EQ(BusBandwidth(64, 16), 120);
  EXPECT_EQ(BusBandwidth(100, 1), 0);
}

TEST(CheckSizes, DoublingFrom8BytesTo1GiB) {
  std::vector<size_t> sizes = MessageSizes(8, size_t{1} << 30, 2);
  ASSERT_EQ(sizes.size(), 28u);  // 2^3 .. 2^30
  EXPECT_EQ(sizes.front(), 8u);
  EXPECT_EQ(sizes[1], 16u);
  EXPECT_EQ(sizes.back(), size_t{1} << 30);
}

TEST(CheckSizes, FactorAndRounding) {
  EXPECT_THAT(MessageSizes(8, 1024, 4), ElementsAre(8, 32, 128, 512));
  // Floats: the smallest size is at least one element, and every size a whole number of them.
  EXPECT_THAT(MessageSizes(1, 16, 2), ElementsAre(4, 8, 16));
  EXPECT_THAT(MessageSizes(6, 40, 2), ElementsAre(8, 16, 32));
  EXPECT_TRUE(MessageSizes(64, 32, 2).empty());
  EXPECT_THAT(MessageSizes(8, 8, 2), ElementsAre(8));
}

TEST(CheckSizes, FormatBytes) {
  EXPECT_EQ(FormatBytes(8), "8 B");
  EXPECT_EQ(FormatBytes(1024), "1 KiB");
  EXPECT_EQ(FormatBytes(32 * 1024), "32 KiB");
  EXPECT_EQ(FormatBytes(size_t{256} << 20), "256 MiB");
  EXPECT_EQ(FormatBytes(size_t{1} << 30), "1 GiB");
  EXPECT_EQ(FormatBytes(1536), "1536 B");  // not a whole number of KiB
  EXPECT_EQ(FormatBytes(0), "0 B");
}

TEST(CheckSizes, ParseByteSize) {
  EXPECT_EQ(ParseByteSize("8"), 8u);
  EXPECT_EQ(ParseByteSize("8B"), 8u);
  EXPECT_EQ(ParseByteSize("64K"), 64u * 1024);
  EXPECT_EQ(ParseByteSize("64KiB"), 64u * 1024);
  EXPECT_EQ(ParseByteSize("1g"), size_t{1} << 30);
  EXPECT_EQ(ParseByteSize("2M"), size_t{2} << 20);
  for (const char* bad : {"", "G", "1T", "-1", "1.5G", "1 G", "0x10", "99999999999999999999"}) {
    EXPECT_FALSE(ParseByteSize(bad).has_value()) << bad;
  }
}

std::vector<AllReduceResult> Sweep() {
  // 8 B in 20 us; 1 MiB in 50 us; 1 GiB in 10 ms.
  return {{8, 20e-6, true}, {size_t{1} << 20, 50e-6, true}, {size_t{1} << 30, 10e-3, true}};
}

TEST(CheckTable, OneLinePerSizeWithTimeAndBothBandwidths) {
  std::vector<std::string> lines = Lines(FormatCheckTable(Sweep(), 8));
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "      size     time (us)   algbw (GB/s)   busbw (GB/s)");
  EXPECT_EQ(lines[1], "       8 B         20.00           0.00           0.00");
  // 1 MiB / 50 us = 20.97 GB/s; busbw x 1.75 = 36.70.
  EXPECT_EQ(lines[2], "     1 MiB         50.00          20.97          36.70");
  // 1 GiB / 10 ms = 107.37 GB/s; busbw 187.90.
  EXPECT_EQ(lines[3], "     1 GiB      10000.00         107.37         187.90");
  // The columns line up under their headers.
  for (const std::string& line : lines) EXPECT_EQ(line.size(), lines[0].size()) << line;
}

TEST(CheckTable, WrongResultsAreMarked) {
  std::vector<AllReduceResult> results = Sweep();
  results[1].correct = false;
  std::vector<std::string> lines = Lines(FormatCheckTable(results, 2));
  EXPECT_THAT(lines[2], HasSubstr("wrong result"));
  EXPECT_THAT(lines[1], ::testing::Not(HasSubstr("wrong")));
}

TEST(CheckVerdict, PassedNamesGpusAndPeakBusBandwidth) {
  EXPECT_EQ(CheckVerdict(Sweep(), 8, 0), "check: passed: 8 GPUs, peak busbw 187.90 GB/s at 1 GiB");
  EXPECT_TRUE(CheckPassed(Sweep(), 8, 0));
  // The peak is the best size, wherever it is in the sweep.
  std::vector<AllReduceResult> results = {{size_t{1} << 20, 10e-6, true}, {size_t{1} << 30, 100e-3, true}};
  EXPECT_EQ(CheckVerdict(results, 2, 0), "check: passed: 2 GPUs, peak busbw 104.86 GB/s at 1 MiB");
}

TEST(CheckVerdict, AWrongSumFails) {
  std::vector<AllReduceResult> results = Sweep();
  results[0].correct = false;
  results[2].correct = false;
  std::string verdict = CheckVerdict(results, 4, 0);
  EXPECT_THAT(verdict,
              ::testing::StartsWith("check: failed: 4 GPUs, the all-reduce sum was wrong at 8 B, 1 GiB"));
  EXPECT_FALSE(CheckPassed(results, 4, 0));
}

TEST(CheckVerdict, BelowTheAskedBandwidthFails) {
  EXPECT_THAT(
      CheckVerdict(Sweep(), 8, 200),
      ::testing::StartsWith("check: failed: 8 GPUs, peak busbw 187.90 GB/s at 1 GiB is below the 200.00"));
  EXPECT_FALSE(CheckPassed(Sweep(), 8, 200));
  EXPECT_TRUE(CheckPassed(Sweep(), 8, 150));
  EXPECT_THAT(CheckVerdict(Sweep(), 8, 150), ::testing::StartsWith("check: passed"));
}

TEST(CheckVerdict, OneGpuReportsAlgorithmBandwidth) {
  std::string verdict = CheckVerdict(Sweep(), 1, 0);
  EXPECT_THAT(verdict, ::testing::StartsWith("check: passed: 1 GPU, peak algbw 107.37 GB/s at 1 GiB"));
  EXPECT_TRUE(CheckPassed(Sweep(), 1, 0));
}

TEST(CheckVerdict, NothingMeasuredFails) {
  EXPECT_EQ(CheckVerdict({}, 2, 0), "check: failed: 2 GPUs, no message size was measured");
  EXPECT_FALSE(CheckPassed({}, 2, 0));
}

}  // namespace
}  // namespace distrun
