#pragma once
// Slurm's hostlist grammar as current Slurm (>= 23.11, hostlist.c) parses it, and the compressed count
// syntax of SLURM_TASKS_PER_NODE. See CLUSTER_FACTS for the grammar and its quirks.
//
// Deliberate differences from Slurm, all on inputs no Slurm daemon produces:
// - numbers are plain decimal: Slurm's strtoul also takes "n[1a-3]" (junk after LO when HI is given),
//   "n[0- -0]" (a negative HI that wraps to a valid value) and saturates "n[99999999999999999999]" to
//   ULONG_MAX; here those are errors;
// - a literal host whose digits overflow (n99999999999999999999) is kept as written, not rewritten;
// - a NUL byte is an error;
// - the whole expansion is capped at kMaxHostlistHosts hosts and kMaxHostlistBytes bytes of names, so
//   "a[0-65535]b[0-65535]" is an error rather than 4 billion hosts (Slurm only caps each bracket).

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace distrun {

inline constexpr size_t kMaxHostlistHosts = size_t{1} << 20;
inline constexpr size_t kMaxHostlistBytes = size_t{64} << 20;
inline constexpr size_t kMaxTaskCounts = size_t{1} << 20;

// Expands "n[01-03],gpu[1-2]-ib" into hosts, keeping order and duplicates; a list of only separators
// gives no hosts. Throws UsageError naming `what` (the variable) and the offending token when the list
// is invalid.
std::vector<std::string> ExpandHostlist(std::string_view what, std::string_view hostlist);

// Expands "2(x3),1" into {2, 2, 2, 1}. Throws UsageError naming `what` on malformed input.
std::vector<int> ExpandTaskCounts(std::string_view what, std::string_view counts);

}  // namespace distrun
