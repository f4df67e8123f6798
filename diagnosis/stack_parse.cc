#include "diagnosis/stack_parse.h"

#include <algorithm>
#include <cctype>

namespace distrun {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Calls `fn` with each line of `text`, without its end of line.
template <typename Fn>
void ForEachLine(std::string_view text, Fn fn) {
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    fn(line);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
}

std::string Label(std::string_view func, std::string_view where) {
  std::string out;
  out.reserve(func.size() + where.size() + 3);
  out.append(func);
  if (!where.empty()) {
    out.append(" (");
    out.append(where);
    out.push_back(')');
  }
  return out;
}

// Threads are collected innermost first, as both dumps print them, and turned around at the end.
struct Collector {
  std::vector<ThreadStack> threads;
  std::vector<bool> truncated;

  ThreadStack& Start(std::string name, bool current) {
    threads.push_back({std::move(name), current, {}});
    truncated.push_back(false);
    return threads.back();
  }
  // The thread a frame line belongs to: the last one, or an unnamed current one when no header came first.
  ThreadStack& Last() { return threads.empty() ? Start("", true) : threads.back(); }

  std::vector<ThreadStack> Finish() {
    for (size_t i = 0; i < threads.size(); ++i) {
      auto& frames = threads[i].frames;
      if (truncated[i]) frames.emplace_back(kTruncatedFrame);
      std::reverse(frames.begin(), frames.end());
    }
    // A dump whose header came but no frame line (it was cut off) still says the thread exists; text with
    // no frame at all is not a dump.
    bool any =
        std::any_of(threads.begin(), threads.end(), [](const ThreadStack& t) { return !t.frames.empty(); });
    if (!any) threads.clear();
    return std::move(threads);
  }
};

// Where the argument list "(...)" that ends `s` opens, or npos. Backwards, so that a C++ name's own
// parentheses ("wait(std::unique_lock<std::mutex>&) ()") stay in the name; quoted strings are skipped.
size_t ArgumentsStart(std::string_view s) {
  if (s.empty() || s.back() != ')') return std::string_view::npos;
  int depth = 0;
  bool quoted = false;
  for (size_t i = s.size(); i-- > 0;) {
    char c = s[i];
    if (c == '"' && (i == 0 || s[i - 1] != '\\')) quoted = !quoted;
    if (quoted) continue;
    if (c == ')') ++depth;
    if (c == '(' && --depth == 0) return i;
  }
  return std::string_view::npos;
}

}  // namespace

std::optional<std::string> FaulthandlerFrameLabel(std::string_view line) {
  std::string_view s = Trim(line);
  constexpr std::string_view kFile = "File \"";
  if (!s.starts_with(kFile)) return std::nullopt;
  s.remove_prefix(kFile.size());
  constexpr std::string_view kLine = "\", line ";
  size_t q = s.rfind(kLine);
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view path = s.substr(0, q);
  std::string_view rest = s.substr(q + kLine.size());
  size_t in = rest.find(" in ");
  std::string_view number = Trim(rest.substr(0, in));
  std::string_view func = in == std::string_view::npos ? "???" : Trim(rest.substr(in + 4));
  std::string where;
  where.reserve(path.size() + number.size() + 1);
  where.append(path).append(":").append(number);
  return Label(func, where);
}

std::vector<ThreadStack> ParseFaulthandler(std::string_view text) {
  Collector c;
  bool skipping = false;  // inside a section that is not a Python thread (3.14's C stack trace)
  ForEachLine(text, [&](std::string_view raw) {
    std::string_view line = Trim(raw);
    constexpr std::string_view kHeaderEnd = "(most recent call first):";
    if (line.ends_with(kHeaderEnd)) {
      std::string_view head = Trim(line.substr(0, line.size() - kHeaderEnd.size()));
      skipping = false;
      if (head.starts_with("Current thread ")) {
        c.Start(std::string(Trim(head.substr(15))), true);
      } else if (head.starts_with("Thread ")) {
        c.Start(std::string(Trim(head.substr(7))), false);
      } else if (head == "Stack") {
        c.Start("", true);
      } else {
        skipping = true;
      }
      return;
    }
    if (skipping) return;
    if (auto label = FaulthandlerFrameLabel(line)) {
      c.Last().frames.push_back(std::move(*label));
    } else if (line == kNoPythonFrame) {
      c.Last().frames.emplace_back(kNoPythonFrame);
    } else if (line == "..." && !c.threads.empty()) {
      c.truncated.back() = true;
    }
  });
  return c.Finish();
}

std::optional<std::string> GdbFrameLabel(std::string_view line) {
  std::string_view s = Trim(line);
  if (s.size() < 2 || s[0] != '#' || !std::isdigit(static_cast<unsigned char>(s[1]))) return std::nullopt;
  size_t i = 1;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  s = Trim(s.substr(i));
  if (s.starts_with("0x")) {
    size_t space = s.find(' ');
    s = space == std::string_view::npos ? std::string_view() : Trim(s.substr(space));
    if (s.starts_with("in ")) s = Trim(s.substr(3));
  }
  if (s.empty()) return "??";
  if (s.front() == '<' && s.back() == '>') return std::string(s);  // <signal handler called>
  // The location after the arguments: " at file:line" or " from /path/lib.so".
  std::string where;
  size_t at = s.rfind(" at "), from = s.rfind(" from ");
  size_t cut = std::string_view::npos;
  if (at != std::string_view::npos && (from == std::string_view::npos || at > from)) {
    if (Trim(s.substr(0, at)).ends_with(')')) {
      cut = at;
      where = Trim(s.substr(at + 4));
    }
  } else if (from != std::string_view::npos && Trim(s.substr(0, from)).ends_with(')')) {
    cut = from;
    std::string_view lib = Trim(s.substr(from + 6));
    size_t slash = lib.rfind('/');
    where = slash == std::string_view::npos ? lib : lib.substr(slash + 1);
  }
  std::string_view call = Trim(s.substr(0, cut));
  size_t args = ArgumentsStart(call);
  std::string_view func = Trim(args == std::string_view::npos ? call : call.substr(0, args));
  return Label(func.empty() ? "??" : func, where);
}

std::vector<ThreadStack> ParseGdbBacktrace(std::string_view text) {
  Collector c;
  ForEachLine(text, [&](std::string_view raw) {
    std::string_view line = Trim(raw);
    if (line.starts_with("Thread ") && line.ends_with("):") && line.find(" (") != std::string_view::npos) {
      std::string_view number = line.substr(7, line.find(' ', 7) - 7);
      std::string name(number);
      size_t q1 = line.find('"'), q2 = line.rfind('"');
      if (q1 != std::string_view::npos && q2 > q1) name.append(" ").append(line.substr(q1, q2 - q1 + 1));
      // gdb numbers the main thread (the one whose LWP is the process id) 1, or N.1 with several inferiors.
      bool main = number == "1" || number.ends_with(".1");
      c.Start(std::move(name), main);
      return;
    }
    if (auto label = GdbFrameLabel(line)) {
      c.Last().frames.push_back(std::move(*label));
    } else if (line.starts_with("(More stack frames follow") && !c.threads.empty()) {
      c.truncated.back() = true;
    }
  });
  return c.Finish();
}

}  // namespace distrun
