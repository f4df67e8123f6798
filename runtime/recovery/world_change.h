#pragma once
// How one generation's world follows the one before it under --recovery in-process (ARCHITECTURE.md,
// "Recovering in place"): which ranks of the previous world lost their processes, which ranks of the new
// one are held by new processes (a spare's workers, a worker started again), and the rank every rank of
// the new world takes its state from. The service computes it once per generation, at the end of the
// rendezvous, and every node hands it to its workers unchanged, so all agree. Pure: no clock, no I/O.

#include <map>
#include <vector>

namespace distrun {

struct WorldChange {
  // The lowest rank of the new world held by a process that was in the previous world (it kept its state);
  // -1: none did (the first world, or every process is new).
  int source = -1;
  std::vector<int> lost;    // ranks of the previous world whose processes are gone, ascending
  std::vector<int> joined;  // ranks of the new world held by new processes, ascending
  bool operator==(const WorldChange&) const = default;
};

// An agent's ranks in one world: its first rank and its worker count.
struct AgentRanks {
  int rank_offset = 0;
  int workers = 0;
  bool operator==(const AgentRanks&) const = default;
};

// An agent of the new world: its ranks there, and which of its local ranks are held by new processes.
struct NextAgent {
  int agent = 0;
  AgentRanks ranks;
  std::vector<int> fresh_local;
};

// `previous`: the previous world's agents (by agent number); empty for the first world. An agent of `next`
// that was not in `previous` (a spare taking a seat, an arrival) holds new processes only; one of
// `previous` missing from `next` lost them all; a local rank of an agent in both is lost and joined when it
// is fresh, kept otherwise (a local rank beyond the other world's count is joined, or lost).
WorldChange ComputeWorldChange(const std::map<int, AgentRanks>& previous, const std::vector<NextAgent>& next);

}  // namespace distrun
