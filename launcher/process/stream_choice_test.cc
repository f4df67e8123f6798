#include "launcher/process/stream_choice.h"

#include <gtest/gtest.h>

#include "detect/errors.h"

namespace distrun {
namespace {

TEST(StreamChoice, OneValueForEveryLocalRank) {
  StreamChoice c = ParseStreamChoice("-r", "3");
  EXPECT_TRUE(c.given());
  EXPECT_EQ(c.For(0), kStdoutBit | kStderrBit);
  EXPECT_EQ(c.For(7), kStdoutBit | kStderrBit);
  EXPECT_EQ(ParseStreamChoice("-t", "1").For(2), kStdoutBit);
  EXPECT_EQ(ParseStreamChoice("-t", "2").For(2), kStderrBit);
  EXPECT_EQ(ParseStreamChoice("-t", "0").For(0), 0);
  EXPECT_FALSE(StreamChoice{}.given());
  EXPECT_EQ(StreamChoice{}.For(0), 0);
}

TEST(StreamChoice, PerLocalRankTheOthersGetNone) {
  StreamChoice c = ParseStreamChoice("--tee", "0:1, 2:3");
  EXPECT_EQ(c.For(0), kStdoutBit);
  EXPECT_EQ(c.For(1), 0);
  EXPECT_EQ(c.For(2), kStdoutBit | kStderrBit);
}

TEST(StreamChoice, AnythingElseIsAnErrorNamingTheOption) {
  for (const char* bad : {"", "4", "all", "0:4", "a:1", "1:", ":1", "0:1,,1:2", "-1:2", "12"}) {
    try {
      ParseStreamChoice("--redirects", bad);
      ADD_FAILURE() << bad;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("--redirects='"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace distrun
