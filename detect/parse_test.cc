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
  for (const char* bad : {"", "-1", "+1", " 3", "3 ", "3x", "1e3", "0x10", "2147483648", "99999999999999999999"}) {
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

}  // namespace
}  // namespace distrun
