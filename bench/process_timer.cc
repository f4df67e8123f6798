#include "process_timer.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace distrun::bench {

double TimeProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  auto start = std::chrono::steady_clock::now();
  pid_t pid = 0;
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + argv[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  auto end = std::chrono::steady_clock::now();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error(argv[0] + " failed");
  return std::chrono::duration<double>(end - start).count();
}

std::vector<std::vector<double>> TimeAlternated(const std::vector<std::vector<std::string>>& commands,
                                                const std::vector<std::string>& env, int runs, int warm,
                                                int retries, int* retried) {
  auto time = [&](const std::vector<std::string>& argv) {
    for (int attempt = 0;; ++attempt) {
      try {
        return TimeProcess(argv, env);
      } catch (const std::runtime_error&) {
        if (attempt >= retries) throw;
        if (retried != nullptr) ++*retried;
      }
    }
  };
  for (const auto& argv : commands) {
    for (int i = 0; i < warm; ++i) time(argv);  // page cache, daemons
  }
  std::vector<std::vector<double>> samples(commands.size());
  for (int i = 0; i < runs; ++i) {
    for (size_t c = 0; c < commands.size(); ++c) samples[c].push_back(time(commands[c]));
  }
  return samples;
}

Summary Summarize(std::vector<double> samples) {
  Summary s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  auto at = [&](double q) {
    return samples[static_cast<size_t>(q * static_cast<double>(samples.size() - 1))];
  };
  s.median = at(0.5);
  s.p10 = at(0.1);
  s.p90 = at(0.9);
  s.min = samples.front();
  return s;
}

}  // namespace distrun::bench
