#pragma once
// The command line: actions (--detect, --help, ...), option flags from the option table (and torchrun's),
// and the worker command after "--" or from the first word that is not an option.

#include <optional>
#include <string>
#include <vector>

#include "launcher/config/options.h"
#include "launcher/config/torchrun_dialect.h"

namespace distrun {

enum class Action { kLaunch, kDetect, kDryRun, kHelp, kVersion };

struct CommandLine {
  Action action = Action::kLaunch;
  RawValues flags;                         // option table values given as flags (torchrun's translated)
  std::optional<std::string> config_path;  // --config FILE
  std::vector<std::string> command;        // after "--" (or from the first non-option word)
  bool command_after_dashes = false;       // the command came after "--": it runs as given
  RawValues defaults;                      // torchrun's (ResolveOptions' defaults): c10d's --node-rank auto
  std::optional<ScriptForm> form;          // torchrun's -m or --no-python
  std::string help_text;                   // filled for Action::kHelp
};

// Options may be spelt with dashes or underscores (--nproc-per-node, --nproc_per_node), and torchrun's own
// options (torchrun_dialect.h) are understood. Throws UsageError with a one-line message for unknown flags
// (naming the nearest known one), missing values and the like.
CommandLine ParseCommandLine(int argc, const char* const* argv);

// The full --help text (also what the man page must agree with).
std::string HelpText();

}  // namespace distrun
