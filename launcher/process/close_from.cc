#include "launcher/process/close_from.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace distrun {
namespace {

// One pass over /proc/self/fd; how many descriptors it closed, or -1 when the directory cannot be read.
int CloseListed(int lowest) {
  int dir = ::open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return -1;
  int closed = 0;
  alignas(8) char buffer[4096];
  for (;;) {
    long n = ::syscall(SYS_getdents64, dir, buffer, sizeof buffer);
    if (n <= 0) break;
    for (long at = 0; at < n;) {
      const auto* entry = reinterpret_cast<const dirent64*>(buffer + at);  // the kernel's linux_dirent64
      at += entry->d_reclen;
      const char* c = entry->d_name;
      if (*c < '0' || *c > '9') continue;  // "." and ".."
      int fd = 0;
      for (; *c >= '0' && *c <= '9'; ++c) fd = fd * 10 + (*c - '0');
      if (fd >= lowest && fd != dir && ::close(fd) == 0) ++closed;
    }
  }
  ::close(dir);
  return closed;
}

}  // namespace

bool CloseListedFrom(int lowest) {
  // Closing while the directory is read may hide entries from the same read; read again until a pass
  // finds nothing left.
  int closed = 0;
  while ((closed = CloseListed(lowest)) > 0) {
  }
  return closed == 0;
}

void CloseFrom(int lowest) {
  if (lowest < 0) lowest = 0;
  if (::syscall(SYS_close_range, static_cast<unsigned>(lowest), ~0U, 0U) == 0) return;
  if (CloseListedFrom(lowest)) return;
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) limit.rlim_cur = 1 << 20;
  for (rlim_t fd = static_cast<rlim_t>(lowest); fd < limit.rlim_cur; ++fd) ::close(static_cast<int>(fd));
}

}  // namespace distrun
