#include "runtime/transport/channel_target.h"

#include <gtest/gtest.h>

namespace distrun {
namespace {

TEST(ChannelTarget, AddressLiteralsNeedNoResolver) {
  EXPECT_EQ(ChannelTarget("127.0.0.1:61440"), "ipv4:127.0.0.1:61440");
  EXPECT_EQ(ChannelTarget("10.99.0.11:5"), "ipv4:10.99.0.11:5");
  EXPECT_EQ(ChannelTarget("[::1]:61440"), "ipv6:[::1]:61440");
  EXPECT_EQ(ChannelTarget("[fd00::2]:7"), "ipv6:[fd00::2]:7");
}

TEST(ChannelTarget, NamesAreResolvedAsTheSystemDoes) {
  // localhost is in every /etc/hosts; whichever family comes first, it is a loopback address.
  std::string t = ChannelTarget("localhost:29500");
  EXPECT_TRUE(t == "ipv4:127.0.0.1:29500" || t.starts_with("ipv6:[::1]:29500")) << t;
}

TEST(ChannelTarget, NamesThatDoNotResolveYetAreLeftToGrpc) {
  // RFC 6761: .invalid never resolves.
  EXPECT_EQ(ChannelTarget("coordinator.invalid:61440"), "dns:///coordinator.invalid:61440");
}

TEST(ChannelTarget, OtherFormsPassThrough) {
  EXPECT_EQ(ChannelTarget("no-port"), "no-port");
  EXPECT_EQ(ChannelTarget("host:"), "host:");
  EXPECT_EQ(ChannelTarget(":80"), ":80");
}

}  // namespace
}  // namespace distrun
