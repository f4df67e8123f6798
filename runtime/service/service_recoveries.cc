// The coordination service's account of each recovery (runtime/recovery/recovery_ledger.h): begun with the
// epoch a lost node, a failed worker or an arrival starts, agreed when its rendezvous completes, and
// complete once every node of its world reported its workers' groups up and their first steps; node 0's
// distrun then prints one line, and Overview shows it (status, metrics, the page).

#include <set>

#include "runtime/service/service.h"

namespace distrun {
namespace {

// How long a recovery waits for every node's report before it completes with what it has: workers that
// report no progress have no first step, a node lost meanwhile never reports.
constexpr std::chrono::milliseconds kRecoveryReportWait{60'000};

}  // namespace

std::string CoordinationService::RecoveryMismatch(const std::string& who, bool in_place) const {
  auto how = [](bool p) { return p ? "in place (--recovery in-process)" : "by restarting (--recovery restart)"; };
  return who + " recovers " + how(in_place) + ", but the job recovers " + how(config_.recovery_in_place) +
         "; every distrun of a job must use the same --recovery";
}

void CoordinationService::ChangeWorld() {
  // The first world has no change (every process is new, none kept state: source -1), as a single-host
  // job's link answers its first rendezvous without the service (launcher/job/lazy_link.h).
  const bool first_world = world_ranks_.empty();
  std::vector<NextAgent> next;
  std::map<int, AgentRanks> ranks;
  for (int seat = 0; seat < membership_.world_agents(); ++seat) {
    const int agent = membership_.agent_in_seat(seat);
    const NodeJoin& j = *nodes_[static_cast<size_t>(agent)].join;
    AgentRanks r{assignments_[static_cast<size_t>(seat)].rank_offset, j.local_workers};
    ranks[agent] = r;
    next.push_back({agent, r, j.fresh_local});
  }
  const WorldChange change = first_world ? WorldChange{} : ComputeWorldChange(world_ranks_, next);
  for (NodeAssignment& a : assignments_) a.change = change;
  world_ranks_ = std::move(ranks);
}

void CoordinationService::RecoveryBegan(const JobEvent& restart) {
  std::string cause = restart.notice.empty() ? DescribeFailure(restart.root_cause) : restart.notice;
  ledger_.Began(round_, config_.recovery_in_place, std::move(cause), Now());
}

void CoordinationService::RecoveryAgreed(const WorldChange& change) {
  std::set<int> nodes;
  for (int seat = 0; seat < membership_.world_agents(); ++seat) nodes.insert(membership_.agent_in_seat(seat));
  ledger_.Agreed(round_, change, config_.recovery_in_place ? std::move(nodes) : std::set<int>{}, Now());
}

void CoordinationService::RecoveryReported(int node, const NodeRecovery& report) {
  if (std::optional<RecoveryRecord> done = ledger_.Reported(node, report)) AnnounceRecovery(*done);
}

void CoordinationService::ExpireRecoveries(Clock::time_point now) {
  for (const RecoveryRecord& done : ledger_.Expire(now, kRecoveryReportWait)) AnnounceRecovery(done);
}

void CoordinationService::AnnounceRecovery(const RecoveryRecord& record) {
  if (!record.in_place) return;  // a restart says so as it happens
  JobEvent e;
  e.kind = JobEvent::Kind::kDiagnosis;
  e.info = true;
  e.notice = DescribeRecovery(record);
  Note(e.notice);
  SendToHost(e);
}

}  // namespace distrun
