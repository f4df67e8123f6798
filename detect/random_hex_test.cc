#include "detect/random_hex.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace distrun {
namespace {

TEST(RandomHex, GivesTheDigitsAskedForEachAHexDigit) {
  for (size_t digits : {size_t{0}, size_t{1}, size_t{12}, size_t{31}, size_t{32}}) {
    std::string hex = RandomHex(digits);
    EXPECT_EQ(hex.size(), digits);
    EXPECT_EQ(hex.find_first_not_of("0123456789abcdef"), std::string::npos) << hex;
  }
}

TEST(RandomHex, EveryDigitOccursAndNoTwoTokensAreAlike) {
  std::set<std::string> tokens;
  std::set<char> seen;
  for (int i = 0; i < 100; ++i) {
    std::string hex = RandomHex(32);
    tokens.insert(hex);
    seen.insert(hex.begin(), hex.end());
  }
  EXPECT_EQ(tokens.size(), 100u);
  EXPECT_EQ(seen.size(), 16u);  // 3,200 digits: a digit missing would be a broken source, not chance
}

}  // namespace
}  // namespace distrun
