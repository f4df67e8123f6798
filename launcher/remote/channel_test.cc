#include "launcher/remote/channel.h"

#include <gtest/gtest.h>

namespace distrun {
namespace {

TEST(Channel, AnyValueFitsOneLineAndComesBack) {
  for (std::string v : {std::string(""), std::string("plain"), std::string("a b\tc\nd\r%e"),
                        std::string("x\0y", 3), std::string("100%")}) {
    const std::string field = EscapeField(v);
    EXPECT_EQ(field.find_first_of(" \t\n\r"), std::string::npos) << field;
    EXPECT_EQ(UnescapeField(field), v);
  }
  EXPECT_FALSE(UnescapeField("%4"));
  EXPECT_FALSE(UnescapeField("%zz"));
}

TEST(Channel, HelloRoundTripsAndChatterIsNotOne) {
  Hello h;
  h.version = "0.1.0";
  h.host = "node 1";
  h.free_port = 41234;
  h.cwd_problem = "no such directory";
  std::optional<Hello> back = ParseHello(FormatHello(h));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->protocol, kChannelProtocol);
  EXPECT_EQ(back->version, "0.1.0");
  EXPECT_EQ(back->host, "node 1");
  EXPECT_EQ(back->free_port, 41234);
  EXPECT_EQ(back->cwd_problem, "no such directory");
  EXPECT_FALSE(ParseHello("Welcome to node1!\n"));
  EXPECT_FALSE(ParseHello("distrun-remote 1 0.1.0 host notaport %\n"));
}

TEST(Channel, StartMessageIsArgsThenEnvThenGo) {
  StartMessage m{{"/opt/distrun", "--num-nodes=2", ""}, {"DISTRUN_TOKEN=t0k en", "EMPTY="}};
  const std::string text = FormatStart(m);
  EXPECT_EQ(text, "arg /opt/distrun\narg --num-nodes=2\narg %\nenv DISTRUN_TOKEN=t0k%20en\nenv EMPTY=\ngo\n");
  std::optional<ChannelLine> l = ParseChannelLine("env DISTRUN_TOKEN=t0k%20en\n");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->verb, "env");
  EXPECT_EQ(l->value, "DISTRUN_TOKEN=t0k en");
  l = ParseChannelLine("arg %\n");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->value, "");
  EXPECT_EQ(ParseChannelLine("alive")->verb, "alive");
  EXPECT_FALSE(ParseChannelLine("arg a b"));
  EXPECT_FALSE(ParseChannelLine(""));
}

}  // namespace
}  // namespace distrun
