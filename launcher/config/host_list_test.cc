#include "launcher/config/host_list.h"

#include <gtest/gtest.h>

#include "detect/errors.h"

namespace distrun {
namespace {

std::string ErrorOf(auto&& parse) {
  try {
    parse();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(HostList, DashHTakesHostsSlotsAndUsers) {
  auto hosts = ParseHostList("-H", "a:2, b ,root@c:4,10.0.0.5:1,[fe80::1]:3");
  ASSERT_EQ(hosts.size(), 5u);
  EXPECT_EQ(hosts[0].host, "a");
  EXPECT_EQ(hosts[0].slots, 2);
  EXPECT_EQ(hosts[1].host, "b");
  EXPECT_FALSE(hosts[1].slots);  // --nproc-per-node decides on b
  EXPECT_EQ(hosts[2].user, "root");
  EXPECT_EQ(hosts[2].Destination(), "root@c");
  EXPECT_EQ(hosts[2].slots, 4);
  EXPECT_EQ(hosts[3].host, "10.0.0.5");
  EXPECT_EQ(hosts[4].host, "fe80::1");
  EXPECT_EQ(hosts[4].slots, 3);
}

TEST(HostList, EveryHostfileFormatReadsTheSame) {
  const char* text =
      "# Open MPI, DeepSpeed, Horovod\n"
      "node1 slots=2 max_slots=8\n"
      "\n"
      "node2:4   # MPICH\n"
      "ubuntu@node3\n"
      "   node4 cpu=1\n";
  auto hosts = ParseHostfile("hosts.txt", text);
  ASSERT_EQ(hosts.size(), 4u);
  EXPECT_EQ(hosts[0].host, "node1");
  EXPECT_EQ(hosts[0].slots, 2);
  EXPECT_EQ(hosts[0].where, "hosts.txt:2");
  EXPECT_EQ(hosts[1].slots, 4);
  EXPECT_EQ(hosts[2].user, "ubuntu");
  EXPECT_FALSE(hosts[2].slots);
  EXPECT_EQ(hosts[3].slots, 1);
}

TEST(HostList, ALineAProcessAddsUpAsPbsNodefileMeansIt) {
  auto hosts = ParseHostfile("PBS_NODEFILE", "n1\nn1\nn1\nn2\nn2\n");
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts[0].slots, 3);
  EXPECT_EQ(hosts[1].slots, 2);
  auto listed = ParseHostList("-H", "a:2,a:3,b");
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].slots, 5);
}

TEST(HostList, BadItemsNameWhereAndWhat) {
  EXPECT_EQ(ErrorOf([] { ParseHostList("-H", "a:x"); }),
            "-H: 'a:x' has no valid slot count (a number from 1 to 4096)");
  EXPECT_EQ(ErrorOf([] { ParseHostList("-H", "a:0"); }),
            "-H: 'a:0' has no valid slot count (a number from 1 to 4096)");
  EXPECT_NE(ErrorOf([] { ParseHostList("-H", "a,,b"); }).find("empty item"), std::string::npos);
  EXPECT_NE(ErrorOf([] { ParseHostList("-H", "a b"); }).find("not a host name"), std::string::npos);
  EXPECT_NE(ErrorOf([] { ParseHostList("-H", "fe80::1"); }).find("[ADDRESS]:SLOTS"), std::string::npos);
  EXPECT_EQ(ErrorOf([] { ParseHostfile("h", "a slots=2\nb slots\n"); }),
            "h:2: 'slots' is not KEY=VALUE; write `host slots=N` (or host:N) on each line");
  EXPECT_NE(ErrorOf([] { ParseHostfile("h", "# nothing\n\n"); }).find("lists no host"), std::string::npos);
  EXPECT_NE(ErrorOf([] { ReadHostfile("--hostfile", "/nonexistent/hosts"); }).find("cannot read"),
            std::string::npos);
}

}  // namespace
}  // namespace distrun
