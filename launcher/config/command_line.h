#pragma once
// The command line: actions (--detect, --help, ...), option flags from the option table, and the worker
// command after "--".

#include <optional>
#include <string>
#include <vector>

#include "launcher/config/options.h"

namespace distrun {

enum class Action { kLaunch, kDetect, kDryRun, kHelp, kVersion };

struct CommandLine {
  Action action = Action::kLaunch;
  RawValues flags;                         // option table values given as flags
  std::optional<std::string> config_path;  // --config FILE
  std::vector<std::string> command;        // after "--" (or from the first non-option word)
  std::string help_text;                   // filled for Action::kHelp
};

// Throws UsageError with a one-line message for unknown flags, missing values and the like.
CommandLine ParseCommandLine(int argc, const char* const* argv);

// The full --help text (also what the man page must agree with).
std::string HelpText();

}  // namespace distrun
