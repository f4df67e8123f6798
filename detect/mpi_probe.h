#pragma once
// The MPI probe: asks the MPI library of the launcher that started distrun what mpi4py would tell a
// program (rank, size, ranks per node, rank 0's host) and lets rank 0 hand every rank the same free
// ports, job id and token. The library is loaded at run time: distrun never links MPI, and one binary
// serves Open MPI and the MPICH family, whose ABIs differ.
//
// MPI_Init runs in a short-lived child process, so the library's threads, signal handlers and memory
// hooks never reach distrun itself, and its chatter goes to stderr, not to --detect's stdout. It uses up
// the rank's MPI identity: after the probe, a worker of the same rank cannot call MPI_Init.

#include <string>
#include <vector>

#include "detect/environment.h"

namespace distrun {

// How long the probe waits for MPI before giving up: MPI_Init and the broadcasts finish only when every
// rank of the job runs the probe.
inline constexpr int kMpiProbeTimeoutSeconds = 300;

// The libraries to try, in order: DISTRUN_MPI_LIBRARY alone when set; libmpi.so.40 under Open MPI's
// mpirun (OMPI_* variables); libmpich.so.12 then libmpi.so.12 (MPICH, Intel MPI, MVAPICH, Cray MPICH) under
// a PMI launcher (PMI_*, PALS_*, MV2_*, MVP_*); every one of those otherwise.
std::vector<std::string> MpiLibraries(const Environment& env);

// The real probe (Environment::FromProcess's mpi_probe).
MpiProbeOutcome RunMpiProbe(const std::vector<std::string>& libraries);
// The same with a time limit in seconds, for tests.
MpiProbeOutcome RunMpiProbeWithin(const std::vector<std::string>& libraries, int timeout_seconds);

// The probe child's answer on its pipe, and back. DecodeMpiProbe turns a malformed answer into an error.
std::string EncodeMpiProbe(const MpiProbeOutcome& outcome);
MpiProbeOutcome DecodeMpiProbe(const std::string& text);

}  // namespace distrun
