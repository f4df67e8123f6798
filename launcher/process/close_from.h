#pragma once
// Closing every descriptor from one number up, as the sentinel does at its start so that it keeps nobody's
// pipe open (not even one distrun inherited without close-on-exec). glibc's closefrom and
// posix_spawn_file_actions_addclosefrom_np are 2.34's; the wheel's programs must run on glibc 2.28 and
// kernels before close_range (5.9: RHEL 8's 4.18), so this asks the kernel itself.

namespace distrun {

// Closes every open descriptor >= `lowest`: close_range where the kernel has it, else each one that
// /proc/self/fd lists, else every number below the descriptor limit. Allocates nothing (safe in a forked
// child of a threaded process).
void CloseFrom(int lowest);

// CloseFrom's way on kernels without close_range: closes what /proc/self/fd lists from `lowest` up, reading
// it again until it lists nothing more. False when /proc/self/fd cannot be read.
bool CloseListedFrom(int lowest);

}  // namespace distrun
