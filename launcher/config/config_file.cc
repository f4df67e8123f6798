#include "launcher/config/config_file.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "detect/errors.h"
#include "detect/parse.h"
#include "launcher/config/closest_name.h"

namespace distrun {
namespace {

std::string Where(const std::string& path, const YAML::Mark& mark) {
  return path + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

std::string Suggestion(const std::string& key) {
  std::vector<std::string> keys;
  for (const OptionSpec& spec : OptionTable()) keys.push_back(ConfigKeyFor(spec.name));
  std::string best = ClosestName(key, keys);
  return best.empty() ? "" : "did you mean '" + best + "'? ";
}

std::string ScalarText(const YAML::Node& node, const std::string& path, const std::string& key) {
  if (node.IsScalar()) return node.Scalar();
  if (node.IsSequence()) {
    std::string joined;
    for (const auto& item : node) {
      if (!item.IsScalar()) {
        throw UsageError(Where(path, item.Mark()) + ": '" + key + "' must be a value or a list of values");
      }
      joined += (joined.empty() ? "" : ",") + item.Scalar();
    }
    return joined;
  }
  throw UsageError(Where(path, node.Mark()) + ": '" + key +
                   "' must be a value or a list of values, not a map or null");
}

// The 1-based line of a "---" document marker that follows content, or 0 when the text is one document.
int SecondDocumentLine(const std::string& text) {
  bool content = false;
  int number = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + start, end - start);
    ++number;
    bool marker =
        line.starts_with("---") && (line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r');
    if (marker && content) return number;
    std::string_view t = Trim(line);
    if (!marker && !t.empty() && t.front() != '#' && t.front() != '%') content = true;
    start = end + 1;
  }
  return 0;
}

}  // namespace

ConfigFile ParseConfigText(const std::string& text, const std::string& path) {
  ConfigFile config;
  config.path = path;
  // yaml-cpp 0.7's LoadAll never returns on some inputs (a lone ","), so a second document is found by
  // its "---" marker instead: distrun reads one document and must not silently drop another.
  if (int line = SecondDocumentLine(text); line > 0) {
    throw UsageError(path + ":" + std::to_string(line) +
                     ":1: a second YAML document (after ---) would be ignored; keep one document");
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw UsageError(Where(path, e.mark) + ": invalid YAML: " + e.msg + "; fix the syntax");
  }
  if (!root || root.IsNull()) return config;  // an empty file sets nothing
  if (!root.IsMap()) {
    throw UsageError(Where(path, root.Mark()) +
                     ": the config must be a map of keys such as 'nproc_per_node: 4'");
  }
  std::map<std::string, std::string> seen;  // key → where it was first given
  for (const auto& entry : root) {
    const YAML::Node& key_node = entry.first;
    const YAML::Node& value = entry.second;
    std::string key = key_node.Scalar();
    std::string where = Where(path, key_node.Mark());
    if (auto [it, fresh] = seen.emplace(key, where); !fresh) {
      throw UsageError(where + ": key '" + key + "' is given twice (first at " + it->second + "); keep one");
    }
    if (key == "command") {
      if (value.IsScalar() && Trim(value.Scalar()).empty()) {
        throw UsageError(where + ": 'command' is empty; give the command to run or remove the key");
      } else if (value.IsScalar()) {
        // A string is a shell command line, as users write it in job scripts.
        config.command = {"/bin/sh", "-c", value.Scalar()};
      } else if (value.IsSequence() && value.size() > 0) {
        for (const auto& item : value) {
          if (!item.IsScalar())
            throw UsageError(Where(path, item.Mark()) + ": 'command' items must be strings");
          config.command.push_back(item.Scalar());
        }
      } else {
        throw UsageError(where + ": 'command' must be a string or a non-empty list of strings");
      }
      continue;
    }
    const OptionSpec* match = nullptr;
    for (const OptionSpec& spec : OptionTable()) {
      if (ConfigKeyFor(spec.name) == key) match = &spec;
    }
    if (match == nullptr) {
      throw UsageError(where + ": unknown key '" + key + "'; " + Suggestion(key) +
                       "see `distrun --help` for the keys (option names with underscores)");
    }
    if (value.IsNull()) throw UsageError(where + ": '" + key + "' has no value; give one or remove the key");
    config.values[match->name] =
        RawValue{ScalarText(value, path, key), Where(path, value.Mark()) + ": " + key};
  }
  return config;
}

ConfigFile LoadConfigFile(const std::optional<std::string>& explicit_path, const std::string& default_path) {
  std::string path;
  if (explicit_path) {
    path = *explicit_path;
  } else if (std::error_code ec; std::filesystem::is_regular_file(default_path, ec)) {
    path = default_path;
  } else {
    return {};
  }
  std::ifstream in(path);
  std::error_code ec;
  if (!in || std::filesystem::is_directory(path, ec)) {
    throw UsageError("--config='" + path + "' cannot be read; check the path and its permissions");
  }
  std::stringstream text;
  text << in.rdbuf();
  return ParseConfigText(text.str(), path);
}

}  // namespace distrun
