#pragma once
// The launcher's channel to each host's distrun over ssh (or a pipe, for this machine): lines of text on the
// connection's stdin from the launcher, and one hello line on its stdout from the host. Nothing secret is on
// a command line: the job token and the variables travel here.
//
//   launcher → host   cwd DIR                  at once: the directory the job runs in
//   host → launcher   distrun-remote 1 VERSION HOST PORT CWD-PROBLEM
//   launcher → host   arg A ... env NAME=VALUE ... go     (or: abort)
//   launcher → host   alive | term | kill      keep-alive each second; Ctrl-C; a second Ctrl-C
// Fields are %-escaped ('%', blanks and line ends), so that any value fits on one line.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace distrun {

inline constexpr int kChannelProtocol = 1;
// What the launcher sends every second; a host that hears nothing for --heartbeat-timeout has lost it.
inline constexpr double kChannelAliveIntervalS = 1.0;

std::string EscapeField(std::string_view value);
// nullopt: a malformed escape.
std::optional<std::string> UnescapeField(std::string_view field);

struct Hello {
  int protocol = kChannelProtocol;
  std::string version;      // the host's distrun
  std::string host;         // its host name
  int free_port = 0;        // a port free there just now (node 0's service, unless --coordinator-port)
  std::string cwd_problem;  // empty: the launcher's working directory exists there
};
std::string FormatHello(const Hello& hello);
// nullopt: not a hello (a login script's chatter before it, which the launcher keeps for its messages).
std::optional<Hello> ParseHello(std::string_view line);

// One line from the launcher: its verb and its (unescaped) value.
struct ChannelLine {
  std::string verb;
  std::string value;
};
std::string FormatChannelLine(std::string_view verb);
std::string FormatChannelLine(std::string_view verb, std::string_view value);
std::optional<ChannelLine> ParseChannelLine(std::string_view line);

// What a host is to run: `arg` lines (argv, the program first), `env` lines, then `go`.
struct StartMessage {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // NAME=VALUE, over the host's own environment
};
std::string FormatStart(const StartMessage& start);

}  // namespace distrun
