#include "launcher/supervise/python_site.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "detect/test_temp_root.h"
#include "launcher/process/spawn.h"

namespace distrun {
namespace {

const std::string kPython = "/usr/bin/python3";
const std::string kPath = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";

using TempDir = testing::TempRoot;

// Writes `text` to `name` under the directory; returns the directory `name` is in.
std::string WriteIn(const TempDir& dir, const std::string& name, const std::string& text) {
  dir.Write(name, text);
  return (dir.path() / name).parent_path().string();
}

struct Result {
  int code = -1;
  std::string out, err;
};

std::string ReadAll(int fd) {
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  return text;
}

// Python with distrun's site first on its PYTHONPATH, then `pythonpath`, and `env` ("NAME=value").
Result RunPython(const PythonSite& site, const std::vector<std::string>& args,
                 const std::string& pythonpath = "", const std::vector<std::string>& env = {}) {
  SpawnSpec spec;
  spec.argv = {kPython};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.env = {kPath, "PYTHONPATH=" + site.PythonPath(pythonpath)};
  spec.env.insert(spec.env.end(), env.begin(), env.end());
  Child child = Child::Start(spec);
  Result r;
  r.code = child.Wait();
  r.out = ReadAll(child.stdout_pipe().get());
  r.err = ReadAll(child.stderr_pipe().get());
  return r;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(PythonSite, WritesItsFilesIntoAPrivateDirectoryPutFirstOnThePath) {
  TempDir dir;
  PythonSite site((dir.path() / "python").string());
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "python/sitecustomize.py"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "python/_distrun_jax.py"));
  struct stat st {};
  ASSERT_EQ(::stat((dir.path() / "python").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(site.PythonPath("/a:/b"), (dir.path() / "python").string() + ":/a:/b");
  // No empty entry, which Python would read as the current directory.
  EXPECT_EQ(site.PythonPath(""), (dir.path() / "python").string());
  // Written again (a second job's site in the same place) it is the same.
  PythonSite again((dir.path() / "python").string());
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "python/sitecustomize.py"));
}

// torch 2.8 renamed the Flight Recorder's variables: the old names distrun set (and only those) move to the
// new ones where the worker's torch is 2.8 or later, read from a torch package's version.py.
TEST(PythonSite, SitecustomizeMovesTheFlightRecorderNamesDistrunSetForTorch28) {
  TempDir dir;
  PythonSite site((dir.path() / "python").string());
  const std::string script =
      "import os\n"
      "print(*(os.environ.get(n, '-') for n in ('TORCH_NCCL_TRACE_BUFFER_SIZE', 'TORCH_FR_BUFFER_SIZE',\n"
      "      'TORCH_NCCL_DEBUG_INFO_TEMP_FILE', 'TORCH_FR_DUMP_TEMP_FILE', 'TORCH_NCCL_DUMP_ON_TIMEOUT')))\n";
  auto run = [&](const std::string& version, const std::vector<std::string>& extra) {
    dir.Write("torch-" + version + "/torch/__init__.py", "");
    dir.Write("torch-" + version + "/torch/version.py",
              "__version__ = '" + version + "'\ngit_version = 'x'\n");
    Result r = RunPython(site, {"-c", script}, (dir.path() / ("torch-" + version)).string(), extra);
    EXPECT_EQ(r.code, 0) << r.err;
    return r.out;
  };
  const std::vector<std::string> distruns = {
      "DISTRUN_TORCH_RENAME=TORCH_NCCL_TRACE_BUFFER_SIZE,TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
      "TORCH_NCCL_TRACE_BUFFER_SIZE=2000", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/logs/fr-",
      "TORCH_FR_DUMP_TEMP_FILE=/logs/fr-", "TORCH_NCCL_DUMP_ON_TIMEOUT=1"};
  EXPECT_EQ(run("2.11.0+cu130", distruns), "- 2000 - /logs/fr- 1\n");
  EXPECT_EQ(run("2.8.0", distruns), "- 2000 - /logs/fr- 1\n");
  EXPECT_EQ(run("2.7.1", distruns), "2000 - /logs/fr- /logs/fr- 1\n");
  EXPECT_EQ(run("1.13.1", distruns), "2000 - /logs/fr- /logs/fr- 1\n");
  // The user's own old name stays where distrun did not set it.
  EXPECT_EQ(run("2.11.0",
                {"DISTRUN_TORCH_RENAME=TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "TORCH_NCCL_TRACE_BUFFER_SIZE=50",
                 "TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/logs/fr-", "TORCH_FR_DUMP_TEMP_FILE=/logs/fr-"}),
            "50 - - /logs/fr- -\n");
  EXPECT_EQ(run("2.11.0", {"TORCH_NCCL_TRACE_BUFFER_SIZE=50"}), "50 - - - -\n");
}

TEST(PythonSite, SitecustomizeChainsToTheOneItShadows) {
  TempDir dir;
  PythonSite site((dir.path() / "python").string());
  const std::string user = WriteIn(dir, "user/sitecustomize.py", "import sys\nsys.user_site_ran = 'yes'\n");
  Result r = RunPython(site, {"-c", "import sys; print(getattr(sys, 'user_site_ran', 'no'))"}, user);
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "yes\n");
  EXPECT_EQ(r.err, "");

  // A failing one is reported as Python reports it, and the worker still runs.
  const std::string bad = WriteIn(dir, "bad/sitecustomize.py", "raise ValueError('broken site')\n");
  Result b = RunPython(site, {"-c", "print('ran')"}, bad);
  EXPECT_EQ(b.code, 0);
  EXPECT_EQ(b.out, "ran\n");
  EXPECT_TRUE(Contains(b.err, "Error in sitecustomize")) << b.err;
  EXPECT_TRUE(Contains(b.err, "ValueError: broken site")) << b.err;

  // Without distrun's variables (someone copied PYTHONPATH alone) it does nothing and says nothing.
  Result plain = RunPython(site, {"-c", "import faulthandler; print('ok')"});
  EXPECT_EQ(plain.code, 0);
  EXPECT_EQ(plain.err, "");
}

// A JAX-shaped package: a ClusterEnv registry filled on import, in import order, as jax._src.clusters has it.
void WriteFakeJax(const TempDir& dir) {
  dir.Write("fake/jax/__init__.py", "from jax._src import clusters\n");
  dir.Write("fake/jax/_src/__init__.py", "");
  dir.Write("fake/jax/_src/clusters/__init__.py",
            "from .cluster import ClusterEnv\nfrom .slurm_cluster import SlurmCluster\n");
  dir.Write("fake/jax/_src/clusters/cluster.py",
            "class ClusterEnv:\n"
            "    _cluster_types = []\n"
            "    opt_in_only_method = False\n"
            "    def __init_subclass__(cls, **kwargs):\n"
            "        super().__init_subclass__(**kwargs)\n"
            "        cls._cluster_types.append(cls)\n");
  dir.Write("fake/jax/_src/clusters/slurm_cluster.py",
            "import os\nfrom jax._src import clusters\n"
            "class SlurmCluster(clusters.ClusterEnv):\n"
            "    name = 'slurm'\n"
            "    @classmethod\n"
            "    def is_env_present(cls):\n"
            "        return 'SLURM_JOB_ID' in os.environ\n");
}

TEST(PythonSite, JaxsClusterModuleGetsDistrunsClusterFirstWhenItIsImported) {
  TempDir dir;
  WriteFakeJax(dir);
  PythonSite site((dir.path() / "python").string());
  const std::string fake = (dir.path() / "fake").string();
  const std::vector<std::string> worker = {"JAX_COORDINATOR_ADDRESS=10.0.0.1:4321", "DISTRUN_NUM_PROCESSES=6",
                                           "DISTRUN_PROCESS_ID=4", "SLURM_JOB_ID=77"};
  // Nothing of JAX's or distrun's JAX module is loaded before the worker imports JAX.
  Result idle = RunPython(site, {"-c", "import sys; print(sorted(m for m in sys.modules if 'jax' in m))"},
                          fake, worker);
  EXPECT_EQ(idle.out, "[]\n") << idle.err;

  const std::string script =
      "import jax\n"
      "from jax._src.clusters import ClusterEnv\n"
      "first = next(c for c in ClusterEnv._cluster_types if c.is_env_present())\n"
      "print([c.__name__ for c in ClusterEnv._cluster_types])\n"
      "print(first.name, first.get_coordinator_address(timeout_secs=5, override_coordinator_port=None),\n"
      "      first.get_process_count(), first.get_process_id(), first.get_local_process_id())\n"
      "print(first.get_coordinator_address(), first.get_coordinator_address(None, '999'))\n";
  Result r = RunPython(site, {"-c", script}, fake, worker);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "['DistrunCluster', 'SlurmCluster']\n"
            "distrun 10.0.0.1:4321 6 4 None\n"
            "10.0.0.1:4321 10.0.0.1:999\n")
      << r.err;

  // import distrun.jax too (the copy installed with the module): still one class of distrun's, first.
  dir.Write("module/distrun/__init__.py", "");
  std::filesystem::copy_file(dir.path() / "python/_distrun_jax.py", dir.path() / "module/distrun/jax.py");
  Result both =
      RunPython(site,
                {"-c",
                 "import distrun.jax\nfrom jax._src.clusters import ClusterEnv\n"
                 "print([c.__name__ for c in ClusterEnv._cluster_types], distrun.jax.DistrunCluster.name)"},
                fake + ":" + (dir.path() / "module").string(), worker);
  EXPECT_EQ(both.out, "['DistrunCluster', 'SlurmCluster'] distrun\n") << both.err;

  // Outside a distrun worker (no plan), distrun's cluster is not present: JAX's own detection goes on.
  Result outside = RunPython(site,
                             {"-c",
                              "import jax\nfrom jax._src.clusters import ClusterEnv\n"
                              "print(next(c for c in ClusterEnv._cluster_types if c.is_env_present()).name)"},
                             fake, {"SLURM_JOB_ID=77"});
  EXPECT_EQ(outside.out, "slurm\n") << outside.err;
}

TEST(PythonSite, Mpi4pyStopsAWorkerWhoseMpiWorldIsNotTheJobs) {
  TempDir dir;
  PythonSite site((dir.path() / "python").string());
  // No launcher here: MPI_Init makes a world of this process alone.
  Result wrong = RunPython(site, {"-c", "from mpi4py import MPI\nprint('joined', MPI.COMM_WORLD.Get_size())"},
                           "", {"DISTRUN_NUM_PROCESSES=4", "DISTRUN_PROCESS_ID=2", "HOME=/tmp"});
  EXPECT_NE(wrong.code, 0);
  EXPECT_EQ(wrong.out, "");
  EXPECT_TRUE(Contains(wrong.err,
                       "ImportError: distrun: mpi4py's world here is 1 process(es) (this one rank 0) but "
                       "distrun's job has 4 workers (this one rank 2)"))
      << wrong.err;
  // Code that uses MPI only when it can goes on without it.
  Result optional = RunPython(
      site,
      {"-c", "try:\n    from mpi4py import MPI\nexcept ImportError:\n    MPI = None\nprint('mpi', MPI)"}, "",
      {"DISTRUN_NUM_PROCESSES=4", "DISTRUN_PROCESS_ID=2", "HOME=/tmp"});
  EXPECT_EQ(optional.code, 0) << optional.err;
  EXPECT_EQ(optional.out, "mpi None\n");
  // A world that is the job's (here: one worker) is left alone.
  Result right = RunPython(site, {"-c", "from mpi4py import MPI\nprint('joined', MPI.COMM_WORLD.Get_size())"},
                           "", {"DISTRUN_NUM_PROCESSES=1", "DISTRUN_PROCESS_ID=0", "HOME=/tmp"});
  EXPECT_EQ(right.code, 0) << right.err;
  EXPECT_EQ(right.out, "joined 1\n");
}

}  // namespace
}  // namespace distrun
