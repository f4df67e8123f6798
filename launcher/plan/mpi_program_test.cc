#include "launcher/plan/mpi_program.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "detect/errors.h"
#include "launcher/process/elf_needed.h"
#include "test_support.h"

namespace distrun {
namespace {

using Strings = std::vector<std::string>;

TEST(ElfNeeded, ReadsTheLibrariesAProgramNames) {
  // Debian's Open MPI tools link the MPI library; /bin/true only the C library.
  Strings ompi_info = ElfNeededLibraries("/usr/bin/ompi_info");
  EXPECT_NE(std::find(ompi_info.begin(), ompi_info.end(), "libmpi.so.40"), ompi_info.end());
  EXPECT_EQ(ElfNeededLibraries("/bin/true"), Strings{"libc.so.6"});
  // Not ELF at all, or absent.
  const std::string script = ::testing::TempDir() + "/distrun-elf-script.sh";
  std::ofstream(script) << "#!/bin/sh\necho hi\n";
  EXPECT_TRUE(ElfNeededLibraries(script).empty());
  EXPECT_TRUE(ElfNeededLibraries("/nonexistent/program").empty());
}

TEST(ElfNeeded, AFileCutShortNamesNothing) {
  // /bin/true cut after its program headers, and after 4 KiB: the dynamic section or its strings are
  // missing, so nothing can be named (and nothing is read past the end).
  std::ifstream in("/bin/true", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 8192u);
  for (size_t size : {size_t{64 + 13 * 56}, size_t{4096}}) {
    const std::string cut = ::testing::TempDir() + "/distrun-elf-cut";
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, size);
    EXPECT_TRUE(ElfNeededLibraries(cut).empty()) << size;
  }
}

TEST(MpiProgram, KnowsTheMpiLibrariesByName) {
  EXPECT_EQ(MpiLibrary({"libc.so.6", "libmpi.so.40"}), "libmpi.so.40");
  EXPECT_EQ(MpiLibrary({"libmpich.so.12"}), "libmpich.so.12");
  EXPECT_EQ(MpiLibrary({"libmpi_cray.so.12"}), "libmpi_cray.so.12");
  EXPECT_EQ(MpiLibrary({"libmpi_mpifh.so.40"}), "libmpi_mpifh.so.40");
  EXPECT_EQ(MpiLibrary({"libmpi.so"}), "libmpi.so");
  EXPECT_EQ(MpiLibrary({"libc.so.6", "libmpfr.so.6", "libmpixxx.so.1", "libm.so.6"}), "");
}

Plan PlanOf(std::vector<bool> tasks, int world) {
  Plan plan;
  plan.assignment.num_processes = world;
  for (bool task : tasks) {
    WorkerPlan w;
    w.launcher_task = task;
    plan.workers.push_back(w);
  }
  return plan;
}

TEST(MpiProgram, StopsAnMpiProgramWhoseWorkersAreNotTheLaunchersProcesses) {
  Environment env = testing::MakeEnv({{"PATH", "/usr/sbin:/usr/bin:/sbin:/bin"}});
  try {
    CheckMpiProgram(PlanOf({false, false}, 4), {"ompi_info", "--version"}, env);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_EQ(
        std::string(e.what()),
        "ompi_info is an MPI program (it needs libmpi.so.40), but the 2 worker(s) of this distrun are not "
        "processes of an MPI launcher's job, so MPI_Init would make each of them a world of one process; "
        "start one distrun per MPI process (mpirun -np 4 distrun -- ompi_info, srun --ntasks-per-node=G "
        "distrun -- ompi_info) or one worker per distrun (--nproc-per-node 1)");
  }
  // Each worker its launcher's MPI process (a per-task launch): fine.
  EXPECT_NO_THROW(CheckMpiProgram(PlanOf({true}, 4), {"ompi_info"}, env));
  // Not an MPI program, or not found (spawning reports that).
  EXPECT_NO_THROW(CheckMpiProgram(PlanOf({false, false}, 4), {"/bin/true"}, env));
  EXPECT_NO_THROW(CheckMpiProgram(PlanOf({false, false}, 4), {"no-such-program-here"}, env));
  EXPECT_NO_THROW(CheckMpiProgram(PlanOf({false, false}, 4), {}, env));
}

}  // namespace
}  // namespace distrun
