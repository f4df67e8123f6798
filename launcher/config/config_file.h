#pragma once
// distrun.yaml: option table keys (underscores) and `command:`. Unknown keys and bad values are errors
// that name the file, line and column.

#include <optional>
#include <string>
#include <vector>

#include "launcher/config/options.h"

namespace distrun {

struct ConfigFile {
  std::string path;                  // empty: no config file
  RawValues values;                  // by option name, with "FILE:LINE:COL: key" as `where`
  std::vector<std::string> command;  // from `command:`; empty if absent
};

// Loads `explicit_path` (an error if it cannot be read), else `default_path` if that file exists.
ConfigFile LoadConfigFile(const std::optional<std::string>& explicit_path, const std::string& default_path);

// Parses YAML text; `path` only names it in messages.
ConfigFile ParseConfigText(const std::string& text, const std::string& path);

}  // namespace distrun
