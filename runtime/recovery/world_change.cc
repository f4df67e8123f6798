#include "runtime/recovery/world_change.h"

#include <algorithm>
#include <set>

namespace distrun {

WorldChange ComputeWorldChange(const std::map<int, AgentRanks>& previous,
                               const std::vector<NextAgent>& next) {
  WorldChange change;
  std::set<int> seen;
  for (const NextAgent& a : next) {
    seen.insert(a.agent);
    auto before = previous.find(a.agent);
    const std::set<int> fresh(a.fresh_local.begin(), a.fresh_local.end());
    for (int local = 0; local < a.ranks.workers; ++local) {
      const int rank = a.ranks.rank_offset + local;
      const bool kept = before != previous.end() && local < before->second.workers && !fresh.contains(local);
      if (!kept) {
        change.joined.push_back(rank);
      } else if (change.source < 0 || rank < change.source) {
        change.source = rank;
      }
    }
    if (before == previous.end()) continue;
    for (int local = 0; local < before->second.workers; ++local) {
      if (local >= a.ranks.workers || fresh.contains(local))
        change.lost.push_back(before->second.rank_offset + local);
    }
  }
  for (const auto& [agent, ranks] : previous) {
    if (seen.contains(agent)) continue;
    for (int local = 0; local < ranks.workers; ++local) change.lost.push_back(ranks.rank_offset + local);
  }
  std::sort(change.lost.begin(), change.lost.end());
  std::sort(change.joined.begin(), change.joined.end());
  return change;
}

}  // namespace distrun
