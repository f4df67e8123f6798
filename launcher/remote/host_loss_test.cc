#include "launcher/remote/host_loss.h"

#include <gtest/gtest.h>
#include <signal.h>

namespace distrun {
namespace {

TEST(HostLoss, NodeZerosExitIsTheJobsUnlessItWasLostOrLeftAnElasticJob) {
  EXPECT_TRUE(NodeZeroEndedTheJob(0, false));
  EXPECT_TRUE(NodeZeroEndedTheJob(3, true));
  EXPECT_TRUE(NodeZeroEndedTheJob(75, false));  // a fixed job has no standby: node 0's end is the job's
  EXPECT_FALSE(NodeZeroEndedTheJob(75, true));  // fenced: the standby goes on with the others
  EXPECT_FALSE(NodeZeroEndedTheJob(255, false));
  EXPECT_FALSE(NodeZeroEndedTheJob(255, true));
  EXPECT_FALSE(NodeZeroEndedTheJob(-1, true));  // not known (killed)
}

TEST(HostLoss, AHostThatLostTheLauncherLeftTheJob) {
  EXPECT_EQ(RemoteNodeExitCode(128 + SIGTERM, true), 75);
  EXPECT_EQ(RemoteNodeExitCode(128 + SIGTERM, false), 128 + SIGTERM);  // the launcher's own stop (Ctrl-C)
  EXPECT_EQ(RemoteNodeExitCode(3, true), 3);  // the job had ended with its code: that is still its word
  EXPECT_EQ(RemoteNodeExitCode(0, true), 0);
}

TEST(HostLoss, ALostNodeZeroOfAnElasticJobIsNamedWithItsStandby) {
  EXPECT_EQ(
      DescribeLostHost("host1", 0, 255, true),
      "the ssh connection to host1 (node 0, which hosts the job's coordinator) ended (code 255): the host "
      "or the link to it is lost; its standby takes the job over and the job goes on without it, if "
      "enough nodes remain");
  EXPECT_EQ(
      DescribeLostHost("host1", 0, 75, true),
      "node 0 on host1, which hosted the job's coordinator, left the job (exit code 75: fenced, or cut off "
      "from the launcher); its standby takes the job over and the job goes on without it, if enough "
      "nodes remain");
  EXPECT_EQ(
      DescribeLostHost("host1", 0, 255, false),
      "the ssh connection to host1 (node 0, which hosts the job's coordinator) ended (code 255): the host "
      "or the link to it is lost");
  EXPECT_EQ(DescribeLostHost("u@host3", 2, 255, true),
            "the ssh connection to u@host3 ended (code 255): the host or the link to it is lost");
}

TEST(HostLoss, AnEndThatIsNoLossSaysNothing) {
  EXPECT_EQ(DescribeLostHost("host1", 0, 0, true), "");
  EXPECT_EQ(DescribeLostHost("host1", 0, 75, false),
            "");  // a fixed job's node 0 ended the job: its own log says why
  EXPECT_EQ(DescribeLostHost("host2", 1, 75, true), "");  // the job's own log names a fenced node
  EXPECT_EQ(DescribeLostHost("host2", 1, 1, true), "");
}

}  // namespace
}  // namespace distrun
