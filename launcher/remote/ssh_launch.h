#pragma once
// A whole job started from this machine over ssh (distrun -H / --hostfile): one connection per host, each
// host checked before anything starts, then each host's distrun told its place in the job (node 0 serves it);
// their output relayed line by line; Ctrl-C and the launcher's end reach every host; distrun exits with the
// job's code. The channel each connection carries: channel.h; the host's side: remote_node.h.

#include <spdlog/logger.h>

#include <memory>
#include <string>

#include "detect/environment.h"
#include "launcher/config/options.h"

namespace distrun {

// Runs the job (or, with `dry_run`, prints each host's ssh command and plan) and returns distrun's exit
// code: the job's (node 0's distrun's), 2 when a host failed the check (a table says which and why).
// `version`: this distrun's, which every host's must be.
int RunSshLaunch(const Options& options, bool dry_run, const Environment& env, const std::string& version,
                 std::shared_ptr<spdlog::logger> log);

}  // namespace distrun
