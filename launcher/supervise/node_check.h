#pragma once
// --node-check CMD: a node's health check, run by `sh -c CMD` before the node joins the job and before every
// later epoch. Exit status 0: the node takes part; anything else (or no end within the timeout): the node
// leaves the job, which goes on without it (elastic) or ends, naming it.

#include <string>
#include <vector>

namespace distrun {

struct NodeCheckResult {
  bool ok = true;
  std::string problem;  // why not: "exited with code 3", "ran past 60s (--node-check-timeout)", ...
};

// Runs `command` with `env` ("NAME=value"), its output on distrun's stdout and stderr, in a process group of
// its own that is killed whole when it runs past `timeout_s`. The caller's blocked signals are not inherited.
NodeCheckResult RunNodeCheck(const std::string& command, const std::vector<std::string>& env,
                             double timeout_s);

}  // namespace distrun
