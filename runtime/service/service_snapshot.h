#pragma once
// What a standby coordinator holds of an elastic job (DESIGN §4.5): enough for the next epoch to begin
// without node 0. The epoch's own state (joins, waits, barriers, the epoch's keys, the hang watch) is not
// in it: a takeover begins a new epoch, which starts without them anyway. The job's keys (types.h,
// kJobKeyPrefix) are, since they outlive epochs.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/recovery/world_change.h"
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
  // The last world's ranks by agent (--recovery in-process): the next world's change is computed from them.
  std::map<int, AgentRanks> world_ranks;
  // The last update it includes (StandbyUpdate::seq). A service rebuilt from it numbers its own updates
  // after it: the replicas of earlier standbys never hold a later one, so none takes a new update for one
  // it already has.
  uint64_t seq = 0;

  bool operator==(const ServiceSnapshot&) const = default;
};

// One change written through to the standby, in order: sequence numbers grow by one from update to
// update. A snapshot replaces whatever the standby held; any other update sets (value) or deletes (no
// value) one of the job's keys.
struct StandbyUpdate {
  uint64_t seq = 0;
  std::optional<ServiceSnapshot> snapshot;
  std::string key;
  std::optional<std::string> value;

  bool operator==(const StandbyUpdate&) const = default;
};

// The standby's copy of the job, fed update by update. Its acknowledgement is applied(): the coordinator
// holds a write back from its caller until the standby acknowledged it.
class StandbyReplica {
 public:
  enum class Result {
    kApplied,
    kStale,         // an update it already has (a resent one): nothing changes
    kNeedSnapshot,  // a key before any snapshot, or a gap: nothing changes until the next snapshot
  };
  Result Apply(const StandbyUpdate& update);
  uint64_t applied() const { return applied_; }
  const std::optional<ServiceSnapshot>& copy() const { return copy_; }

 private:
  uint64_t applied_ = 0;
  std::optional<ServiceSnapshot> copy_;
};

}  // namespace distrun
