#pragma once
// What a job started over ssh runs on each host: the ssh command that reaches it, and the distrun command
// line the host's distrun gets (the launcher's options as flags, the host's place in the job, the command).
// Pure functions of the options: --dry-run prints them.

#include <optional>
#include <string>
#include <vector>

#include "launcher/config/options.h"

namespace distrun {

// The launcher's options that stay with it: they say how to reach the hosts, not how the job runs.
bool LauncherOnlyOption(const std::string& name);

// ssh -T -x, the user's --ssh-args (ssh keeps the first value of an option, so the user's come first), then
// BatchMode=yes (never a hidden prompt), ConnectTimeout and ServerAliveInterval, the host, and the remote
// command `exec 'DISTRUN' --remote-node`.
std::vector<std::string> SshCommand(const Options& options, const HostEntry& host,
                                    const std::string& remote_distrun);

// Where each host finds node 0's service.
struct NodeZero {
  std::string host;  // a name or address the other hosts can reach
  int port = 0;
};

// The host's distrun: `--launcher-channel`, every option the launcher resolved but its own (as --NAME=VALUE,
// from flags, variables and the config file alike), the job's shape (--num-nodes, --node-rank,
// --coordinator-address, --run-id, --nproc-per-node from the host's slots), then `-- COMMAND`.
std::vector<std::string> RemoteDistrunArgs(const Options& options, const std::string& remote_distrun,
                                           size_t node, size_t nodes, const NodeZero& zero,
                                           const std::string& run_id, std::optional<int> slots, bool dry_run);

}  // namespace distrun
