#pragma once
// The hot path's commands, shared by `distrun-bench launch`, `detect` and `guard`: a local launch of N
// `/bin/true` against MPICH's mpiexec, and `distrun --detect` as task 300 of a 512-task Slurm step.

#include <string>
#include <vector>

namespace distrun::bench {

// The environment every launch comparison runs with (Open MPI's mpirun allowed as root, no rsh agent).
std::vector<std::string> LaunchEnv();
std::vector<std::string> DistrunLaunch(const std::string& distrun, int nproc);
std::vector<std::string> MpiexecLaunch(int nproc);

// A 512-task Slurm step (64 nodes × 8 tasks), this process task 300.
std::vector<std::string> SlurmStep512Env();
std::vector<std::string> DistrunDetect(const std::string& distrun);

}  // namespace distrun::bench
