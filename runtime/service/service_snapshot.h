#pragma once
// What a standby coordinator holds of an elastic job (DESIGN §4.5): enough for the next epoch to begin
// without node 0. The epoch's own state (joins, waits, barriers, the epoch's keys, the hang watch) is not
// in it: a takeover begins a new epoch, which starts without them anyway. The job's keys (types.h,
// kJobKeyPrefix) are, since they outlive epochs.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/service/membership.h"

namespace distrun {

struct ServiceSnapshot {
  int num_nodes = 0;  // the agents the launch started (arrivals come after them)
  std::string run_id;
  std::string worker_token;
  int host_agent = 0;  // whose distrun hosted the service that took it
  int round = 0;
  int restarts = 0;
  std::vector<std::pair<int, int>> losses;    // (agent, epoch it was lost in)
  std::vector<std::pair<int, int>> arrivals;  // (agent, epoch it arrived in)
  std::vector<std::string> hosts;             // by agent, as it last joined (empty: not known)
  MembershipState membership;
  std::map<std::string, std::string> job_keys;

  bool operator==(const ServiceSnapshot&) const = default;
};

}  // namespace distrun
