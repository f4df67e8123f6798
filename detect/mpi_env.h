#pragma once
// What MPI-style launchers (Open MPI, MPICH/Hydra, Intel MPI, MVAPICH, Cray, jsrun, Flux) tell every rank:
// the world size, its rank, and its place among the ranks of its node. Shared by the ompi, pmi, lsf and
// flux detectors.

#include <optional>
#include <string>
#include <string_view>

#include "detect/environment.h"
#include "detect/topology.h"

namespace distrun {

struct MpiRanks {
  int size = 1;
  int rank = 0;
  int local_rank = 0;
  int local_size = 1;
  // The variables the values came from, for messages.
  std::string size_var, rank_var, local_rank_var, local_size_var;
};

// Reads the four variables (all must be set) and checks rank < size, local rank < local size <= size.
MpiRanks ReadMpiRanks(const Environment& env, std::string_view size_var, std::string_view rank_var,
                      std::string_view local_rank_var, std::string_view local_size_var);

// Checks that the optional variable `name`, when set, holds the same number as `value` read from
// `source` (two launchers' copies of one fact must agree; a difference means stale variables).
void RequireSameIfSet(const Environment& env, std::string_view name, int value, std::string_view source);

// Fills the task fields and the launch mode (per-node when this rank is alone on its node).
void FillMpiTasks(const MpiRanks& ranks, Topology& t);

// FillMpiTasks, and what the layout says about nodes: when every rank is on this
// node, the coordinator is 127.0.0.1; otherwise the environment does not say which host holds rank 0, so
// coordinator_host stays empty (the MPI probe must find it). `num_nodes` is the launcher's node count
// where it exports one (`num_nodes_var` names it); otherwise it is inferred from an even layout, or 0 when
// unknown. The node rank is this rank when every node holds one rank, else 0 until the probe runs.
void FillFromMpiRanks(const MpiRanks& ranks, std::optional<int> num_nodes, std::string_view num_nodes_var,
                      const Environment& env, Topology& t);

}  // namespace distrun
