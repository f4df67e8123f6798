#pragma once
// Slurm's hostlist grammar as current Slurm (>= 23.11, hostlist.c) parses it, and the compressed count
// syntax of SLURM_TASKS_PER_NODE. See CLUSTER_FACTS for the grammar and its quirks.

#include <string>
#include <string_view>
#include <vector>

namespace distrun {

// Expands "n[01-03],gpu[1-2]-ib" into hosts, keeping order and duplicates. Throws UsageError naming
// `what` (the variable) and the offending token when the list is invalid.
std::vector<std::string> ExpandHostlist(std::string_view what, std::string_view hostlist);

// Expands "2(x3),1" into {2, 2, 2, 1}. Throws UsageError naming `what` on malformed input.
std::vector<int> ExpandTaskCounts(std::string_view what, std::string_view counts);

}  // namespace distrun
