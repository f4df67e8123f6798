#include "launcher/process/close_from.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>

namespace distrun {
namespace {

bool IsOpen(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

// Runs `close` in a child (closing the test process's own descriptors would break it) after placing
// descriptors at 40, 41, 45 and 300, and returns what the child found open: bit 0 for 40, 1 for 41, ...
int OpenAfter(const std::function<void()>& close) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int null = ::open("/dev/null", O_RDONLY);
    for (int fd : {40, 41, 45, 300}) {
      if (::dup2(null, fd) != fd) ::_exit(100);
    }
    ::fcntl(41, F_SETFD, FD_CLOEXEC);  // a flag does not matter
    close();
    int open = 0;
    int bit = 0;
    for (int fd : {40, 41, 45, 300}) open |= (IsOpen(fd) ? 1 : 0) << bit++;
    ::_exit(open);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(CloseFrom, ClosesEveryDescriptorFromTheLowestUpAndNoneBelow) {
  EXPECT_EQ(OpenAfter([] { CloseFrom(41); }), 0b0001);
  EXPECT_EQ(OpenAfter([] { CloseFrom(301); }), 0b1111);
  // stdio stays: the sentinel writes its messages to stderr.
  EXPECT_EQ(OpenAfter([] {
              CloseFrom(3);
              if (!IsOpen(2)) ::_exit(101);
            }),
            0);
}

TEST(CloseFrom, TheWayForKernelsWithoutCloseRangeClosesTheSame) {
  EXPECT_EQ(OpenAfter([] {
              if (!CloseListedFrom(41)) ::_exit(102);
            }),
            0b0001);
  EXPECT_EQ(OpenAfter([] {
              if (!CloseListedFrom(3)) ::_exit(102);
            }),
            0);
}

}  // namespace
}  // namespace distrun
