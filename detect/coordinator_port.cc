#include "detect/coordinator_port.h"

#include <cstdint>

namespace distrun {

int SlurmCoordinatorPort(long long job_id, long long step_id) {
  // 256 job slots × 16 step slots fill the range: concurrent jobs on a node have nearby ids, and so do
  // the steps of one job, so nearby values must map to distinct ports (a hash would not guarantee it).
  long long job_slot = ((job_id % 256) + 256) % 256;
  long long step_slot = ((step_id % 16) + 16) % 16;
  return kCoordinatorPortBase + static_cast<int>(job_slot * 16 + step_slot);
}

int HashedCoordinatorPort(std::string_view job_identity) {
  uint64_t hash = 1469598103934665603ULL;  // FNV-1a: stable across builds and platforms
  for (unsigned char c : job_identity) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return kCoordinatorPortBase + static_cast<int>(hash % kCoordinatorPortRange);
}

}  // namespace distrun
