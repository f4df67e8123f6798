// `distrun-spawn-floor N [THREADS]`: starts N /bin/true with posix_spawn from THREADS threads (default 2),
// reaps them and exits. The least any launcher can take to run N processes on this machine: the guard
// prints its time beside mpiexec's, so that a launch ratio is read against what the machine allows. Only
// libc: no runtime, no C++ library, nothing of distrun's.

#include <pthread.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>

extern char** environ;

namespace {

struct Share {
  int count = 0;
  int failed = 0;
};

void* SpawnShare(void* arg) {
  auto* share = static_cast<Share*>(arg);
  char program[] = "/bin/true";
  char* argv[] = {program, nullptr};
  for (int i = 0; i < share->count; ++i) {
    pid_t pid = 0;
    if (::posix_spawn(&pid, program, nullptr, nullptr, argv, environ) != 0) ++share->failed;
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 0;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  if (n <= 0 || threads <= 0 || threads > 64) {
    std::fprintf(stderr, "usage: distrun-spawn-floor N [THREADS 1..64]\n");
    return 2;
  }
  Share shares[64];
  pthread_t ids[64];
  for (int t = 0; t < threads; ++t) {
    shares[t].count = n / threads + (t < n % threads ? 1 : 0);
    ::pthread_create(&ids[t], nullptr, SpawnShare, &shares[t]);
  }
  int failed = 0;
  for (int t = 0; t < threads; ++t) {
    ::pthread_join(ids[t], nullptr);
    failed += shares[t].failed;
  }
  int status = 0;
  int bad = 0;
  while (::wait(&status) > 0) bad += WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
  return failed + bad == 0 ? 0 : 1;
}
