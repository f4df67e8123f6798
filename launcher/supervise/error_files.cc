#include "launcher/supervise/error_files.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <system_error>
#include <vector>

namespace distrun {
namespace {

namespace fs = std::filesystem;

// An error file is a few KB; a worker that wrote megabytes there wrote something else.
constexpr std::streamsize kMaxErrorFileBytes = 1 << 20;
// Enough for a deep stack's last frames; the full traceback is in the file (with --log-dir) and on stderr.
constexpr size_t kTracebackLines = 40;

std::optional<std::string> StringAt(const YAML::Node& node) {
  if (!node || !node.IsScalar()) return std::nullopt;
  return node.as<std::string>();
}

}  // namespace

std::optional<TorchError> ParseTorchErrorFile(std::string_view json, std::string* problem) {
  // JSON is YAML's flow style: yaml-cpp reads torch's json.dump output, escapes included.
  YAML::Node root;
  try {
    root = YAML::Load(std::string(json));
  } catch (const YAML::Exception& e) {
    *problem = std::string("it is not JSON (") + e.msg + ")";
    return std::nullopt;
  }
  const YAML::Node& file = root;  // const: looking a key up must not add it
  const YAML::Node message = file.IsMap() ? file["message"] : YAML::Node(YAML::NodeType::Undefined);
  if (!message.IsDefined()) {
    *problem = "it has no \"message\" field";
    return std::nullopt;
  }
  TorchError error;
  if (std::optional<std::string> text = StringAt(message)) {
    error.message = *text;
    return error;
  }
  std::optional<std::string> text = message.IsMap() ? StringAt(message["message"]) : std::nullopt;
  if (!text) {
    *problem = "its \"message\" holds neither text nor a \"message\" field";
    return std::nullopt;
  }
  error.message = *text;
  const YAML::Node extra = message["extraInfo"];
  if (extra && extra.IsMap()) {
    if (std::optional<std::string> stack = StringAt(extra["py_callstack"])) error.traceback = *stack;
  }
  return error;
}

std::string FormatTorchError(int rank, const TorchError& error) {
  auto lines_of = [](std::string_view text) {
    std::vector<std::string_view> lines;
    while (!text.empty()) {
      size_t end = text.find('\n');
      lines.push_back(text.substr(0, end));
      text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    }
    return lines;
  };
  std::string out = "\n  rank " + std::to_string(rank) + " raised (torch's error file):";
  for (std::string_view line : lines_of(error.message)) out += "\n    " + std::string(line);
  std::vector<std::string_view> stack = lines_of(error.traceback);
  if (stack.empty()) return out;
  const size_t shown = std::min(stack.size(), kTracebackLines);
  out += "\n  traceback";
  if (shown < stack.size())
    out += " (last " + std::to_string(shown) + " of " + std::to_string(stack.size()) + " lines)";
  out += ":";
  for (size_t i = stack.size() - shown; i < stack.size(); ++i) out += "\n    " + std::string(stack[i]);
  return out;
}

ErrorFiles::ErrorFiles(const std::optional<fs::path>& log_dir, const fs::path& temp_dir) {
  if (log_dir) {
    dir_ = *log_dir;
    return;
  }
  std::string pattern = (temp_dir / "distrun-errors-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    problem_ = "cannot make a directory for torch's error files under " + temp_dir.string() + " (" +
               std::strerror(errno) + "); set TMPDIR to a writable directory or give --log-dir";
    return;
  }
  dir_ = pattern;
  owned_ = true;
}

ErrorFiles::~ErrorFiles() {
  if (!owned_) return;
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

fs::path ErrorFiles::PathFor(int rank) const {
  if (!enabled()) return {};
  return dir_ / ("rank-" + std::to_string(rank) + ".error.json");
}

void ErrorFiles::Clear(int rank) const {
  if (!enabled()) return;
  std::error_code ec;
  fs::remove(PathFor(rank), ec);
}

std::optional<TorchError> ErrorFiles::Read(int rank, std::string* problem) const {
  if (!enabled()) return std::nullopt;
  const fs::path path = PathFor(rank);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;  // the worker wrote none: it did not use @record, or died before
  std::string content(static_cast<size_t>(kMaxErrorFileBytes) + 1, '\0');
  in.read(content.data(), kMaxErrorFileBytes + 1);
  content.resize(static_cast<size_t>(in.gcount()));
  std::string why;
  if (content.size() > static_cast<size_t>(kMaxErrorFileBytes)) {
    why = "it is over 1 MiB";
  } else if (std::optional<TorchError> error = ParseTorchErrorFile(content, &why)) {
    return error;
  }
  *problem = "rank " + std::to_string(rank) + "'s error file " + path.string() + " is not torch's: " + why;
  return std::nullopt;
}

}  // namespace distrun
