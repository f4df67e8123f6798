#include "detect/topology.h"

namespace distrun {

const char* LaunchModeName(LaunchMode mode) { return mode == LaunchMode::kPerTask ? "per-task" : "per-node"; }

}  // namespace distrun
