#include "runtime/auth/slurm_conf.h"

#include <fnmatch.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace distrun {
namespace {

namespace fs = std::filesystem;

constexpr char kStandardConfig[] = "/etc/slurm/slurm.conf";
constexpr int kMaxIncludeDepth = 16;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// `path` (absolute) under `root`.
fs::path Under(const fs::path& root, const std::string& path) {
  return root == "/" ? fs::path(path) : root / fs::path(path).relative_path();
}

// The files an Include names: one path, or those matching its last component's wildcards, sorted.
std::vector<std::string> Expand(const fs::path& root, const std::string& pattern) {
  const fs::path p(pattern);
  const std::string leaf = p.filename().string();
  if (leaf.find_first_of("*?[") == std::string::npos) return {pattern};
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(Under(root, p.parent_path().string()), ec)) {
    const std::string name = entry.path().filename().string();
    if (::fnmatch(leaf.c_str(), name.c_str(), 0) == 0) found.push_back((p.parent_path() / name).string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

// AuthInfo's socket=PATH; "" when it names none.
std::string AuthInfoSocket(const std::string& value) {
  std::string socket;
  std::istringstream options(value);
  for (std::string option; std::getline(options, option, ',');) {
    if (Lower(option.substr(0, 7)) == "socket=") socket = option.substr(7);
  }
  return socket;
}

class Reader {
 public:
  explicit Reader(fs::path root) : root_(std::move(root)) {}

  // Throws std::runtime_error with the line's message.
  void Read(const std::string& path, int depth) {
    if (depth > kMaxIncludeDepth || !open_.insert(path).second) {
      throw std::runtime_error(path + " includes itself (Include lines loop)");
    }
    std::ifstream in(Under(root_, path));
    if (!in) throw std::runtime_error("cannot read " + path);
    std::ostringstream text;
    text << in.rdbuf();
    for (const SlurmConfItem& item : ParseSlurmConfText(text.str())) {
      if (item.kind == SlurmConfItem::Kind::kAuthInfo) {
        // A later AuthInfo replaces an earlier one, with or without a socket.
        result.socket = item.value;
        result.file = item.value.empty() ? "" : path;
        continue;
      }
      std::string target = item.value;
      if (target.empty()) throw std::runtime_error(path + " has an Include line without a file");
      if (target.front() != '/') target = (fs::path(path).parent_path() / target).string();
      for (const std::string& file : Expand(root_, target)) Read(file, depth + 1);
    }
    open_.erase(path);
  }

  SlurmConfMunge result;

 private:
  fs::path root_;
  std::set<std::string> open_;
};

}  // namespace

SlurmConfMunge ReadSlurmConfMunge(const std::string& slurm_conf, const fs::path& root) {
  SlurmConfMunge none;
  std::string config = slurm_conf;
  if (config.empty()) {
    std::error_code ec;
    if (!fs::exists(Under(root, kStandardConfig), ec)) return none;
    config = kStandardConfig;
  }
  Reader reader(root);
  try {
    reader.Read(config, 0);
  } catch (const std::runtime_error& e) {
    none.config = config;
    none.problem = std::string("the munge socket in Slurm's configuration is unknown: ") + e.what();
    return none;
  }
  reader.result.config = config;
  return reader.result;
}

std::vector<SlurmConfItem> ParseSlurmConfText(std::string_view text) {
  std::vector<SlurmConfItem> items;
  std::istringstream lines{std::string(text)};
  for (std::string line; std::getline(lines, line);) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string word;
    if (!(words >> word)) continue;
    if (Lower(word) == "include") {
      std::string target;
      std::getline(words >> std::ws, target);
      while (!target.empty() && std::isspace(static_cast<unsigned char>(target.back()))) target.pop_back();
      items.push_back({SlurmConfItem::Kind::kInclude, target});
      continue;
    }
    // Key=value pairs, several to a line; only AuthInfo matters here.
    do {
      const size_t eq = word.find('=');
      if (eq != std::string::npos && Lower(word.substr(0, eq)) == "authinfo") {
        items.push_back({SlurmConfItem::Kind::kAuthInfo, AuthInfoSocket(word.substr(eq + 1))});
      }
    } while (words >> word);
  }
  return items;
}

}  // namespace distrun
