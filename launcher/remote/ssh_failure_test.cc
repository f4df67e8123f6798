#include "launcher/remote/ssh_failure.h"

#include <gtest/gtest.h>

namespace distrun {
namespace {

// What OpenSSH 9.2 and dash print for each failure (seen in tests/ssh/lab.sh's hosts).
TEST(SshFailure, EachOfSshsMessagesGetsItsReason) {
  const std::string path = "/opt/distrun/bin/distrun";
  auto says = [&](int code, const char* text) { return DescribeSshFailure(code, text, path); };
  EXPECT_EQ(says(255, "ssh: Could not resolve hostname hostnowhere: Name or service not known\r\n"),
            "the name does not resolve (check it, or /etc/hosts and DNS)");
  EXPECT_EQ(says(255, "ssh: connect to host hostclosed port 22: Connection refused\r\n"),
            "connection refused (no sshd listening on its port)");
  EXPECT_EQ(says(255, "ssh: connect to host hostsilent port 22: Connection timed out\r\n"),
            "connection timed out (the host or the network does not answer)");
  EXPECT_NE(says(255, "root@hostnokey: Permission denied (publickey).\r\n").find("authentication failed"),
            std::string::npos);
  EXPECT_NE(says(255,
                 "@@@@@@\r\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\r\n"
                 "Host key verification failed.\r\n")
                .find("host key"),
            std::string::npos);
  EXPECT_NE(
      says(255, "kex_exchange_identification: Connection closed by remote host\r\n").find("MaxStartups"),
      std::string::npos);
  EXPECT_EQ(says(127, "sh: 1: exec: /opt/distrun/bin/distrun: not found\n"),
            "no distrun at /opt/distrun/bin/distrun there (install the same distrun there, or give "
            "--remote-distrun)");
  EXPECT_EQ(says(126, "sh: 1: exec: /opt/distrun/bin/distrun: Permission denied\n").substr(0, 10),
            "cannot run");
  EXPECT_EQ(says(3, ""), "ssh exited with code 3 before distrun answered");
  EXPECT_EQ(says(-1, ""), "ssh was killed");
}

TEST(SshFailure, TheTableNamesEveryHostAndMarksTheFailed) {
  const std::string table =
      FormatCheckTable({{"host1", "ok", true}, {"hostclosed", "connection refused", false}});
  EXPECT_EQ(table,
            "  host        check\n"
            "  host1       ok\n"
            "! hostclosed  connection refused\n");
}

}  // namespace
}  // namespace distrun
