#include "launcher/remote/local_host.h"

#include <gtest/gtest.h>

namespace distrun {
namespace {

TEST(LocalHost, LoopbackAndThisHostsNamesAreThisMachine) {
  EXPECT_TRUE(IsThisMachine("localhost", "node7.cluster"));
  EXPECT_TRUE(IsThisMachine("127.0.0.1", "node7.cluster"));
  EXPECT_TRUE(IsThisMachine("127.1.2.3", "node7.cluster"));
  EXPECT_TRUE(IsThisMachine("::1", "node7.cluster"));
  EXPECT_TRUE(IsThisMachine("node7.cluster", "node7.cluster"));
  EXPECT_TRUE(IsThisMachine("node7", "node7.cluster"));
}

TEST(LocalHost, OnlyLoopbackNamesAreLoopback) {
  EXPECT_TRUE(IsLoopback("localhost"));
  EXPECT_TRUE(IsLoopback("127.0.1.1"));
  EXPECT_FALSE(IsLoopback("node7"));
}

TEST(LocalHost, OtherNamesAreNot) {
  EXPECT_FALSE(IsThisMachine("node8", "node7.cluster"));
  EXPECT_FALSE(IsThisMachine("no-such-host.invalid", "node7"));  // does not resolve: ssh says why
  EXPECT_FALSE(IsThisMachine("192.0.2.1", "node7"));             // TEST-NET-1: no interface has it
}

}  // namespace
}  // namespace distrun
