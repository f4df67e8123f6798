// `distrun-bench launch`: whole-process time of `distrun --nproc-per-node N -- /bin/true` against
// `mpiexec.mpich -n N /bin/true` and Open MPI's `mpirun -np N /bin/true`, alternated in one run so that
// the ratio compares like with like.

#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "hot_path.h"
#include "process_timer.h"

namespace distrun::bench {

int LaunchBench(const std::string& distrun, int runs, int nproc) {
  const std::string n = std::to_string(nproc);
  const std::vector<std::string> env = LaunchEnv();
  std::vector<const char*> names = {"distrun", "mpiexec.mpich"};
  std::vector<std::vector<std::string>> commands = {DistrunLaunch(distrun, nproc), MpiexecLaunch(nproc)};
  if (::access("/usr/bin/mpirun.openmpi", X_OK) == 0) {
    names.push_back("mpirun.openmpi");
    commands.push_back({"/usr/bin/mpirun.openmpi", "--oversubscribe", "-np", n, "/bin/true"});
  }
  std::vector<std::vector<double>> samples = TimeAlternated(commands, env, runs, /*warm=*/3);
  std::vector<Summary> s;
  for (size_t c = 0; c < commands.size(); ++c) {
    s.push_back(Summarize(samples[c]));
    std::printf("%-16s -n %s /bin/true: median %7.2f ms  p10 %7.2f ms  p90 %7.2f ms\n", names[c], n.c_str(),
                s.back().median * 1e3, s.back().p10 * 1e3, s.back().p90 * 1e3);
  }
  std::printf(
      "{\"bench\": \"launch\", \"nproc\": %d, \"runs\": %d, \"distrun_median_ms\": %.3f, "
      "\"mpiexec_median_ms\": %.3f, \"ratio_to_mpiexec\": %.3f",
      nproc, runs, s[0].median * 1e3, s[1].median * 1e3, s[0].median / s[1].median);
  if (s.size() > 2) {
    std::printf(", \"mpirun_median_ms\": %.3f, \"ratio_to_mpirun\": %.3f", s[2].median * 1e3,
                s[0].median / s[2].median);
  }
  std::printf("}\n");
  return 0;
}

}  // namespace distrun::bench
