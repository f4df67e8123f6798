#pragma once
// Times whole processes: spawn, wait, wall-clock seconds. Benchmarks compare commands with it.

#include <string>
#include <vector>

namespace distrun::bench {

// Runs argv with exactly `env` (NAME=value), stdout/stderr to /dev/null; returns wall seconds.
// Throws std::runtime_error when the command cannot start or exits non-zero.
double TimeProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env);

// Runs each command `warm` times, then every command in turn, `runs` rounds: alternated, so that the
// machine's changes of speed fall on every command alike and their ratio compares like with like. Returns
// each command's wall seconds, in the commands' order.
std::vector<std::vector<double>> TimeAlternated(const std::vector<std::vector<std::string>>& commands,
                                                const std::vector<std::string>& env, int runs, int warm);

struct Summary {
  double median = 0, p10 = 0, p90 = 0, min = 0;
};
Summary Summarize(std::vector<double> samples);

}  // namespace distrun::bench
