#include "launcher/remote/remote_command.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string_view>

#include "launcher/process/shell_quote.h"
#include "launcher/remote/remote_node.h"

namespace distrun {
namespace {

// Set per host by RemoteDistrunArgs itself.
constexpr const char* kPerHost[] = {"num-nodes", "node-rank",  "coordinator-address", "coordinator-port",
                                    "run-id",    "token-file", "nproc-per-node"};
constexpr const char* kLauncherOnly[] = {
    "hosts",          "hostfile",   "ssh-args", "ssh-concurrency", "ssh-connect-timeout",
    "remote-distrun", "forward-env"};

bool Among(const std::string& name, const auto& list) {
  for (const char* n : list) {
    if (name == n) return true;
  }
  return false;
}

}  // namespace

bool LauncherOnlyOption(const std::string& name) { return Among(name, kLauncherOnly); }

std::vector<std::string> SshCommand(const Options& options, const HostEntry& host,
                                    const std::string& remote_distrun) {
  std::vector<std::string> argv = {"ssh", "-T", "-x"};
  argv.insert(argv.end(), options.ssh_args.begin(), options.ssh_args.end());
  const long connect = std::lround(std::ceil(options.ssh_connect_timeout_s));
  // ssh's own keep-alive ends a connection to a host cut off for three intervals; distrun's heartbeat and
  // the channel's keep-alive decide sooner.
  const long alive = std::max(1L, std::lround(std::ceil(options.heartbeat_timeout_s)));
  for (const std::string& o :
       {std::string("BatchMode=yes"), "ConnectTimeout=" + std::to_string(connect),
        "ServerAliveInterval=" + std::to_string(alive), std::string("ServerAliveCountMax=3")}) {
    argv.push_back("-o");
    argv.push_back(o);
  }
  argv.push_back("--");
  argv.push_back(host.Destination());
  argv.push_back(ShellJoin({"exec", remote_distrun, kRemoteNodeFlag}));
  return argv;
}

std::vector<std::string> RemoteDistrunArgs(const Options& options, const std::string& remote_distrun,
                                           size_t node, size_t nodes, const NodeZero& zero,
                                           const std::string& run_id, std::optional<int> slots,
                                           bool dry_run) {
  std::vector<std::string> argv = {remote_distrun, kLauncherChannelFlag};
  if (dry_run) argv.push_back("--dry-run");
  for (const OptionSpec& spec : OptionTable()) {
    auto it = options.effective.find(spec.name);
    if (it == options.effective.end() || Among(spec.name, kPerHost) || Among(spec.name, kLauncherOnly))
      continue;
    const Options::Effective& e = it->second;
    // A value the host would take by default anyway is not sent: the command line stays readable.
    if (e.source == OptionSource::kDefault && spec.default_value != nullptr &&
        e.value == spec.default_value) {
      continue;
    }
    argv.push_back(std::string("--") + spec.name + "=" + e.value);
  }
  if (!options.effective.contains("cluster-detection-method") ||
      options.effective.at("cluster-detection-method").source == OptionSource::kDefault) {
    argv.push_back("--cluster-detection-method=deactivate");  // the launcher's shape, not the host's guess
  }
  if (!options.effective.contains("tag-template") ||
      options.effective.at("tag-template").source == OptionSource::kDefault) {
    argv.push_back("--tag-template=[{host}:{rank}] ");
  }
  argv.push_back("--num-nodes=" + std::to_string(nodes));
  argv.push_back("--node-rank=" + std::to_string(node));
  argv.push_back("--coordinator-address=" +
                 (zero.host.find(':') != std::string::npos ? "[" + zero.host + "]" : zero.host) + ":" +
                 std::to_string(zero.port));
  argv.push_back("--run-id=" + run_id);
  if (slots) {
    argv.push_back("--nproc-per-node=" + std::to_string(*slots));
  } else if (auto it = options.effective.find("nproc-per-node"); it != options.effective.end()) {
    argv.push_back("--nproc-per-node=" + it->second.value);
  }
  argv.push_back("--");
  argv.insert(argv.end(), options.command.begin(), options.command.end());
  return argv;
}

}  // namespace distrun
