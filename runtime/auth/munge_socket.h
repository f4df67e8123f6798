#pragma once
// Which munged socket distrun talks to (DESIGN §4.4): the one the user named (--munge-socket,
// DISTRUN_MUNGE_SOCKET), else the one Slurm's configuration names (runtime/auth/slurm_conf.h), else
// libmunge's default. Agents, node 0's checks, the users' commands and the Python module's client choose
// alike.

#include <filesystem>
#include <optional>
#include <string>

namespace distrun {

// Where libmunge looks for munged when no socket is named.
inline constexpr char kDefaultMungeSocket[] = "/run/munge/munge.socket.2";

// The socket libmunge uses when given `path` ("": its default).
inline std::string EffectiveMungeSocket(const std::string& path) {
  return path.empty() ? kDefaultMungeSocket : path;
}

struct MungeSocket {
  std::string path;     // "": libmunge's default
  std::string source;   // where it came from: "--munge-socket", "AuthInfo in /etc/slurm/slurm.conf", ...
  std::string warning;  // one line: a Slurm configuration that could not be read (distrun goes on)

  // "PATH (SOURCE)", or "libmunge's default socket".
  std::string Describe() const;
  std::string Effective() const { return EffectiveMungeSocket(path); }
};

// `given`: the user's choice, and `given_source` where it came from; unset or empty: Slurm's configuration
// decides (`slurm_conf`: SLURM_CONF's value, "" when unset; files under `root`).
MungeSocket ChooseMungeSocket(const std::optional<std::string>& given, const std::string& given_source,
                              const std::string& slurm_conf, const std::filesystem::path& root = "/");

}  // namespace distrun
