#pragma once
// Times whole processes: spawn, wait, wall-clock seconds. Benchmarks compare commands with it.

#include <string>
#include <vector>

namespace distrun::bench {

// Runs argv with exactly `env` (NAME=value), stdin, stdout and stderr on /dev/null; returns wall seconds.
// Throws std::runtime_error when the command cannot start or exits non-zero.
double TimeProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env);

// Runs each command `warm` times, then every command in turn, `runs` rounds: alternated, so that the
// machine's changes of speed fall on every command alike and their ratio compares like with like. Returns
// each command's wall seconds, in the commands' order. A run that fails is run again up to `retries` times
// (counted in *retried): MPICH's mpiexec sometimes dies of SIGPIPE when /bin/true exits before its proxy
// has written to it.
std::vector<std::vector<double>> TimeAlternated(const std::vector<std::vector<std::string>>& commands,
                                                const std::vector<std::string>& env, int runs, int warm,
                                                int retries = 0, int* retried = nullptr);

struct Summary {
  double median = 0, p10 = 0, p90 = 0, min = 0;
};
Summary Summarize(std::vector<double> samples);

}  // namespace distrun::bench
