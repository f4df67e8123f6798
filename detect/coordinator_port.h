#pragma once
// The port of distrun's runtime service, derived from the job's identity so that every node computes the
// same one without talking, and two steps of one job or two jobs on one node do not collide.

#include <string_view>

namespace distrun {

// First port of the range distrun derives coordinator ports in (above Linux's default ephemeral range).
inline constexpr int kCoordinatorPortBase = 61440;
inline constexpr int kCoordinatorPortRange = 4096;

// Slurm: numeric job and step ids. Jobs whose ids differ by less than 256 and steps whose ids differ by
// less than 16 get distinct ports.
int SlurmCoordinatorPort(long long job_id, long long step_id);
// Any other launcher: a stable hash of a job identity string (namespace, job id, ...).
int HashedCoordinatorPort(std::string_view job_identity);

}  // namespace distrun
