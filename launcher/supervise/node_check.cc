#include "launcher/supervise/node_check.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "launcher/config/options.h"
#include "launcher/process/spawn.h"

namespace distrun {
NodeCheckResult RunNodeCheck(const std::string& command, const std::vector<std::string>& env,
                             double timeout_s) {
  std::vector<std::string> argv_text = {"/bin/sh", "-c", command};
  std::vector<char*> argv, envp;
  for (std::string& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_copy = env;
  for (std::string& e : env_copy) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawnattr_t attr;
  ::posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  // distrun blocks the signals it reads from its signalfd; the check must get them as any program does.
  ::posix_spawnattr_setsigmask(&attr, &none);
  ::posix_spawnattr_setsigdefault(&attr, &all);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  ::posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, "/bin/sh", nullptr, &attr, argv.data(), envp.data());
  ::posix_spawnattr_destroy(&attr);
  if (rc != 0) return {false, std::string("cannot start /bin/sh: ") + std::strerror(rc)};

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  while (true) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) return {false, std::string("waitpid: ") + std::strerror(errno)};
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(-pid, SIGKILL);  // its own process group: the check and whatever it started
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return {false, "ran past " + FormatSeconds(timeout_s) + " (--node-check-timeout)"};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(-pid, SIGKILL);  // what the check left running in the background goes with it
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  return {false, DescribeWaitStatus(status)};
}

}  // namespace distrun
