#include "launcher/remote/ssh_failure.h"

#include <algorithm>

namespace distrun {
namespace {

bool Says(std::string_view said, std::string_view what) { return said.find(what) != std::string_view::npos; }

std::string LastLine(std::string_view said) {
  while (!said.empty() && (said.back() == '\n' || said.back() == '\r' || said.back() == ' '))
    said.remove_suffix(1);
  const size_t nl = said.rfind('\n');
  return std::string(nl == std::string_view::npos ? said : said.substr(nl + 1));
}

}  // namespace

std::string DescribeSshFailure(int exit_code, std::string_view said, const std::string& remote_path) {
  // The remote shell's (ssh's own failures exit 255): distrun is not at the path, or cannot run there.
  if (exit_code == 127)
    return "no distrun at " + remote_path +
           " there (install the same distrun there, or give --remote-distrun)";
  if (exit_code == 126) return "cannot run " + remote_path + " there: " + LastLine(said);
  // ssh's own messages (OpenSSH 7-9), most specific first.
  if (Says(said, "Could not resolve hostname") || Says(said, "Name or service not known"))
    return "the name does not resolve (check it, or /etc/hosts and DNS)";
  if (Says(said, "Host key verification failed") || Says(said, "IDENTIFICATION HAS CHANGED") ||
      Says(said, "host key is known") || Says(said, "No matching host key"))
    return "its host key is unknown or changed (check ~/.ssh/known_hosts: ssh to it once, or ssh-keyscan)";
  if (Says(said, "Permission denied") || Says(said, "Too many authentication failures"))
    return "authentication failed (ssh runs with BatchMode=yes and never prompts: set up a key or an agent)";
  if (Says(said, "Connection refused")) return "connection refused (no sshd listening on its port)";
  if (Says(said, "timed out") || Says(said, "Connection timed out"))
    return "connection timed out (the host or the network does not answer)";
  if (Says(said, "No route to host")) return "no route to host";
  if (Says(said, "Network is unreachable")) return "network unreachable";
  if (Says(said, "kex_exchange_identification") || Says(said, "Connection closed by") ||
      Says(said, "Connection reset"))
    return "sshd closed the connection (its MaxStartups limit, or a firewall): " + LastLine(said);
  std::string last = LastLine(said);
  if (exit_code < 0) return last.empty() ? "ssh was killed" : "ssh was killed: " + last;
  if (last.empty()) return "ssh exited with code " + std::to_string(exit_code) + " before distrun answered";
  return last + " (ssh exited with code " + std::to_string(exit_code) + ")";
}

std::string FormatCheckTable(const std::vector<HostCheck>& checks) {
  size_t width = 4;
  for (const HostCheck& c : checks) width = std::max(width, c.host.size());
  auto pad = [width](const std::string& s) { return s + std::string(width + 2 - s.size(), ' '); };
  std::string out = "  " + pad("host") + "check\n";
  for (const HostCheck& c : checks) out += (c.ok ? "  " : "! ") + pad(c.host) + c.outcome + "\n";
  return out;
}

}  // namespace distrun
