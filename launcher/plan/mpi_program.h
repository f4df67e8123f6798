#pragma once
// A native MPI program as the command of workers that are not MPI processes of their launcher's job (several
// workers per distrun, or ranks an elastic epoch renumbered; launcher/plan/task_variables.h takes the
// launcher's MPI variables from them): its MPI_Init would make each worker a world of one process, a wrong
// world no error reveals. distrun stops such a launch at its start, naming the program and the fix. (Python
// workers are checked when they import mpi4py or start Horovod: launcher/supervise/python/sitecustomize.py.)

#include <string>
#include <vector>

#include "detect/environment.h"
#include "launcher/plan/plan.h"

namespace distrun {

// The MPI library among a program's needed libraries (libmpi.so.40, libmpich.so.12, libmpi_cray.so.12...),
// or "" when none is.
std::string MpiLibrary(const std::vector<std::string>& needed);

// Throws UsageError when `command`'s program (looked up on the PATH of `env` unless it names a path) links
// an MPI library and a worker of `plan` is not its launcher's task.
void CheckMpiProgram(const Plan& plan, const std::vector<std::string>& command, const Environment& env);

}  // namespace distrun
