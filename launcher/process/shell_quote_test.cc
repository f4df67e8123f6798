#include "launcher/process/shell_quote.h"

#include <gtest/gtest.h>

namespace distrun {
namespace {

TEST(ShellQuote, QuotesWhatAShellWouldChange) {
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellWord("/usr/bin/python3"), "/usr/bin/python3");
  EXPECT_EQ(ShellWord("--tag-template=[{host}:{rank}] "), "'--tag-template=[{host}:{rank}] '");
  EXPECT_EQ(ShellWord(""), "''");
  EXPECT_EQ(ShellJoin({"exec", "/opt/my dir/distrun", "--remote-node"}),
            "exec '/opt/my dir/distrun' --remote-node");
}

}  // namespace
}  // namespace distrun
