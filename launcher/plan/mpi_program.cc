#include "launcher/plan/mpi_program.h"

#include <sys/stat.h>
#include <unistd.h>

#include "detect/errors.h"
#include "launcher/process/elf_needed.h"
#include "launcher/process/spawn.h"

namespace distrun {
namespace {

// Where the command's program is, as exec would find it; "" when it is not found (spawning says so).
std::string ProgramPath(const std::string& file, const Environment& env) {
  for (const std::string& candidate : ExecCandidates(file, env.Get("PATH"))) {
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return {};
}

}  // namespace

std::string MpiLibrary(const std::vector<std::string>& needed) {
  for (const std::string& library : needed) {
    // libmpi.so.N (Open MPI, MPICH, Intel MPI, MVAPICH), libmpich.so.N (Debian's MPICH), libmpi_cray.so.N,
    // libmpi_mpifh.so.N (Open MPI's Fortran bindings): "libmpi" followed by a name and ".so".
    if (!library.starts_with("libmpi")) continue;
    const size_t so = library.find(".so");
    if (so == std::string::npos) continue;
    const std::string rest = library.substr(6, so - 6);
    if (rest.empty() || rest == "ch" || rest.starts_with("_")) return library;
  }
  return {};
}

void CheckMpiProgram(const Plan& plan, const std::vector<std::string>& command, const Environment& env) {
  if (command.empty()) return;
  bool all_tasks = true;
  for (const WorkerPlan& w : plan.workers) all_tasks = all_tasks && w.launcher_task;
  if (all_tasks) return;
  const std::string path = ProgramPath(command[0], env);
  if (path.empty()) return;
  const std::string library = MpiLibrary(ElfNeededLibraries(path));
  if (library.empty()) return;
  const std::string n = std::to_string(plan.assignment.num_processes);
  const std::string program = command[0];
  throw UsageError(program + " is an MPI program (it needs " + library + "), but the " +
                   std::to_string(plan.workers.size()) +
                   " worker(s) of this distrun are not processes of an MPI launcher's job, so MPI_Init "
                   "would make each of them a world of one process; start one distrun per MPI process "
                   "(mpirun -np " +
                   n + " distrun -- " + program + ", srun --ntasks-per-node=G distrun -- " + program +
                   ") or one worker per distrun (--nproc-per-node 1)");
}

}  // namespace distrun
