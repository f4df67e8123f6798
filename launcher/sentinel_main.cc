// distrun-sentinel FD SINCE: the sentinel (launcher/supervise/sentinel.h) as a program of its own, which
// distrun starts with posix_spawn rather than forking itself: a fork of distrun copies its page tables and
// makes distrun take copy-on-write faults while its workers start (≈1.5 ms of every launch on a 2-core
// machine).

#include <cstdio>
#include <cstdlib>
#include <string>

#include "launcher/supervise/sentinel.h"

int main(int argc, char** argv) {
  char* end = nullptr;
  long fd = argc == 3 ? std::strtol(argv[1], &end, 10) : -1;
  bool fd_ok = fd >= 0 && end != nullptr && *end == '\0';
  unsigned long long since = argc == 3 ? std::strtoull(argv[2], &end, 10) : 0;
  if (!fd_ok || end == nullptr || *end != '\0') {
    std::fprintf(stderr,
                 "distrun-sentinel: distrun starts this program itself; there is no need to run it\n");
    return 2;
  }
  distrun::RunSentinel(static_cast<int>(fd), since);
}
