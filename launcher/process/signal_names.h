#pragma once
// Signal names as users write them ("TERM", "SIGTERM", "15") and as distrun prints them ("SIGTERM").

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace distrun {

// "SIGSEGV" for 11; "SIG42" for numbers without a name (real-time signals: "SIGRTMIN+8").
std::string SignalName(int signal);

// Accepts "USR1", "SIGUSR1", "usr1" and decimal numbers; nullopt when it names no signal.
std::optional<int> ParseSignal(std::string_view text);

// Parses a --forward-signals list ("USR1,USR2", "none"). Only signals that can be caught and forwarded
// without changing what a crash means are accepted; errors name `where` (a UsageError).
std::vector<int> ParseForwardSignals(const std::string& where, const std::string& value);

}  // namespace distrun
