#pragma once
// Where a launch keeps the files only it and its workers use, each in a private directory removed when
// distrun ends: the progress board, the workers' Python site, stacks being collected, torch's error files.

#include <filesystem>

#include "detect/environment.h"

namespace distrun {

// $TMPDIR when set (the user's choice); else /dev/shm (under env.root) when it is a directory distrun may
// write, since memory costs a launch nothing to write and remove where a disk's /tmp costs journal and
// discard waits (0.5-0.8 ms at each end of a launch on this project's VM); else /tmp.
std::filesystem::path ScratchParent(const Environment& env);

}  // namespace distrun
