#include "launcher/process/signal_names.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <csignal>

#include "detect/errors.h"
#include "detect/parse.h"

namespace distrun {
namespace {

struct NamedSignal {
  const char* name;  // without "SIG"
  int number;
};

// The standard Linux signals; real-time ones are SIGRTMIN+n.
constexpr NamedSignal kSignals[] = {
    {"HUP", SIGHUP},       {"INT", SIGINT},   {"QUIT", SIGQUIT},   {"ILL", SIGILL},   {"TRAP", SIGTRAP},
    {"ABRT", SIGABRT},     {"BUS", SIGBUS},   {"FPE", SIGFPE},     {"KILL", SIGKILL}, {"USR1", SIGUSR1},
    {"SEGV", SIGSEGV},     {"USR2", SIGUSR2}, {"PIPE", SIGPIPE},   {"ALRM", SIGALRM}, {"TERM", SIGTERM},
    {"STKFLT", SIGSTKFLT}, {"CHLD", SIGCHLD}, {"CONT", SIGCONT},   {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},
    {"TTIN", SIGTTIN},     {"TTOU", SIGTTOU}, {"URG", SIGURG},     {"XCPU", SIGXCPU}, {"XFSZ", SIGXFSZ},
    {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"IO", SIGIO},     {"PWR", SIGPWR},
    {"SYS", SIGSYS},
};

// Signals that must not be forwarded-only: they cannot be caught (KILL, STOP), are distrun's own business
// (CHLD, PIPE), or report a fault of the process that gets them (SEGV and friends).
bool Forwardable(int signal) {
  switch (signal) {
    case SIGKILL:
    case SIGSTOP:
    case SIGCHLD:
    case SIGPIPE:
    case SIGSEGV:
    case SIGBUS:
    case SIGFPE:
    case SIGILL:
    case SIGTRAP:
    case SIGSYS:
    case SIGTTIN:
    case SIGTTOU:
    case SIGTSTP:
      return false;
    default:
      return true;
  }
}

}  // namespace

std::string SignalName(int signal) {
  for (const NamedSignal& s : kSignals) {
    if (s.number == signal) return std::string("SIG") + s.name;
  }
  if (signal >= SIGRTMIN && signal <= SIGRTMAX) {
    return signal == SIGRTMIN ? "SIGRTMIN" : "SIGRTMIN+" + std::to_string(signal - SIGRTMIN);
  }
  return "SIG" + std::to_string(signal);
}

std::optional<int> ParseSignal(std::string_view text) {
  std::string upper;
  for (char c : text) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper.empty()) return std::nullopt;
  if (std::isdigit(static_cast<unsigned char>(upper[0]))) {
    int n = 0;
    auto [end, ec] = std::from_chars(upper.data(), upper.data() + upper.size(), n);
    if (ec != std::errc() || end != upper.data() + upper.size() || n < 1 || n > SIGRTMAX) return std::nullopt;
    return n;
  }
  std::string_view name = upper;
  if (name.starts_with("SIG")) name.remove_prefix(3);
  for (const NamedSignal& s : kSignals) {
    if (name == s.name) return s.number;
  }
  if (name == "RTMIN") return SIGRTMIN;
  if (name.starts_with("RTMIN+")) {
    int n = 0;
    std::string_view offset = name.substr(6);
    auto [end, ec] = std::from_chars(offset.data(), offset.data() + offset.size(), n);
    if (ec == std::errc() && end == offset.data() + offset.size() && SIGRTMIN + n <= SIGRTMAX) {
      return SIGRTMIN + n;
    }
  }
  return std::nullopt;
}

std::vector<int> ParseForwardSignals(const std::string& where, const std::string& value) {
  std::vector<int> out;
  if (Trim(value) == "none" || Trim(value).empty()) return out;
  for (const std::string& item : Split(value, ',')) {
    std::string_view name = Trim(item);
    std::optional<int> signal = ParseSignal(name);
    if (!signal) {
      throw UsageError(where + "='" + value + "' is not valid; '" + std::string(name) +
                       "' is not a signal; use names like USR1,USR2,TERM, or none");
    }
    if (!Forwardable(*signal)) {
      throw UsageError(where + "='" + value + "' is not valid; " + SignalName(*signal) +
                       " cannot be forwarded; use signals such as USR1, USR2, TERM, INT, HUP, CONT, WINCH, "
                       "or none");
    }
    if (std::find(out.begin(), out.end(), *signal) == out.end()) out.push_back(*signal);
  }
  return out;
}

}  // namespace distrun
