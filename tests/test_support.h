#pragma once
// Helpers shared by unit tests: build Environments from literals and from recorded fixture files.

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "detect/detector.h"
#include "detect/environment.h"
#include "launcher/config/command_line.h"

namespace distrun::testing {

// An environment with exactly these variables, hostname "testhost", no network and no CUDA driver.
Environment MakeEnv(std::initializer_list<std::pair<std::string, std::string>> vars);

// Reads "NAME=value" lines of a fixture under tests/fixtures (e.g. "mpi-standalone/ompi-env-rank0.txt").
// `prefix` strips a line prefix such as "BATCH: "; lines without it are skipped when it is non-empty.
Environment LoadFixtureEnv(const std::string& relative_path, const std::string& prefix = "");

// For fixtures that interleave several tasks' sorted lines (srun-n4-env.txt): every value of each
// variable, in file order.
std::vector<std::pair<std::string, std::string>> ReadFixtureLines(const std::string& relative_path);

std::string FixturePath(const std::string& relative_path);

// The UsageError message `detector` throws for `env`; records a test failure when it throws none or when the
// message is not one line.
std::string DetectorError(const Detector& detector, const Environment& env);

// distrun's command line for `args` (without the program name), and the UsageError message it gives ("" for
// none).
CommandLine ParseArgs(const std::vector<std::string>& args);
std::string ParseArgsError(const std::vector<std::string>& args);

}  // namespace distrun::testing
