#include "detect/parse.h"

#include <gtest/gtest.h>

#include "detect/errors.h"

namespace distrun {
namespace {

TEST(ParseCount, AcceptsDecimal) {
  EXPECT_EQ(ParseCount("X", "0"), 0);
  EXPECT_EQ(ParseCount("X", "007"), 7);
  EXPECT_EQ(ParseCount("X", "2147483647"), 2147483647);
}

TEST(ParseCount, RejectsEverythingElse) {
  for (const char* bad :
       {"", "-1", "+1", " 3", "3 ", "3x", "1e3", "0x10", "2147483648", "99999999999999999999"}) {
    EXPECT_THROW(ParseCount("SLURM_PROCID", bad), UsageError) << bad;
  }
}

TEST(ParseCount, MessageNamesVariableAndValue) {
  try {
    ParseCount("SLURM_PROCID", "abc");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("SLURM_PROCID='abc'"), std::string::npos) << e.what();
  }
}

TEST(ParsePort, Range) {
  EXPECT_EQ(ParsePort("P", "1"), 1);
  EXPECT_EQ(ParsePort("P", "65535"), 65535);
  EXPECT_THROW(ParsePort("P", "0"), UsageError);
  EXPECT_THROW(ParsePort("P", "65536"), UsageError);
  EXPECT_EQ(ParsePort("P", "0", PortZero::kAllowed), 0);  // where a socket is bound: the OS picks
  EXPECT_THROW(ParsePort("P", "65536", PortZero::kAllowed), UsageError);
  EXPECT_THROW(ParsePort("P", "-1", PortZero::kAllowed), UsageError);
  EXPECT_THROW(ParsePort("P", "", PortZero::kAllowed), UsageError);
  EXPECT_THROW(ParsePort("P", "0000080"), UsageError);
}

TEST(ParseHostPort, Forms) {
  auto a = ParseHostPort("A", "node1:1234");
  EXPECT_EQ(a.host, "node1");
  EXPECT_EQ(a.port, 1234);
  auto b = ParseHostPort("A", "node1");
  EXPECT_EQ(b.host, "node1");
  EXPECT_FALSE(b.port.has_value());
  auto c = ParseHostPort("A", "[fd00::2]:99");
  EXPECT_EQ(c.host, "fd00::2");
  EXPECT_EQ(c.port, 99);
  auto d = ParseHostPort("A", "[::1]");
  EXPECT_EQ(d.host, "::1");
  for (const char* bad : {"", ":80", "fd00::2", "[::1", "[]:1", "[::1]x", "host:", "host:x", "a b:1"}) {
    EXPECT_THROW(ParseHostPort("A", bad), UsageError) << bad;
  }
}

TEST(FormatHostPort, BracketsIpv6) {
  EXPECT_EQ(FormatHostPort("node1", 5), "node1:5");
  EXPECT_EQ(FormatHostPort("fd00::2", 5), "[fd00::2]:5");
}

TEST(Split, KeepsEmptyFields) {
  EXPECT_EQ(Split("a,,b", ','), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(Split("", ','), (std::vector<std::string>{""}));
}

TEST(ParseSeconds, ReadsFractionsAndUnits) {
  EXPECT_EQ(ParseSeconds("--t", "0.5"), 0.5);
  EXPECT_EQ(ParseSeconds("--t", " 30 "), 30);
  EXPECT_EQ(ParseSeconds("--t", "90s"), 90);
  EXPECT_EQ(ParseSeconds("--t", "10m"), 600);
  EXPECT_EQ(ParseSeconds("--t", "2h"), 7200);
  EXPECT_EQ(ParseSeconds("--t", "1000000000"), 1e9);
  for (const char* bad : {"", "s", "-1", "1e3", "1x", "1.2.3", "ten", "1 s", "1000000001", "0.5d"}) {
    EXPECT_THROW(ParseSeconds("--t", bad), UsageError) << bad;
  }
  try {
    ParseSeconds("--heartbeat-timeout", "ten");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(),
                 "--heartbeat-timeout='ten' is not valid; use seconds (0.5, 30) or a number with s, m or h "
                 "(90s, 10m, 2h)");
  }
}

TEST(FormatSeconds, WritesWhatParseSecondsReadsBack) {
  EXPECT_EQ(FormatSeconds(30.0), "30s");
  EXPECT_EQ(FormatSeconds(0.25), "0.25s");
  EXPECT_EQ(FormatSeconds(0.0), "0s");
  EXPECT_EQ(FormatSeconds(1e9), "1000000000s");  // "%g" would say 1e+09s
  EXPECT_EQ(FormatSeconds(std::chrono::milliseconds(250)), "0.25s");
  EXPECT_EQ(FormatSeconds(std::chrono::milliseconds(3000)), "3s");
  for (double s : {0.0, 0.001, 0.5, 2.5, 30.0, 86400.0, 123456.789, 1e9}) {
    EXPECT_DOUBLE_EQ(ParseSeconds("x", FormatSeconds(s)), s) << s;
  }
}

}  // namespace
}  // namespace distrun
