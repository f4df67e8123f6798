// `distrun-bench srun [--distrun PATH] [--nodes 3] [--runs 50] [--lab DIR]`: on the Slurm lab, the whole time
// of `srun -N3 distrun -- /bin/true` (one distrun per virtual host, each starting one worker, all meeting
// through node 0's runtime) against `srun -N3 /bin/true`, alternated in one run. The difference is what
// distrun adds to a Slurm step.

#include <cstdio>
#include <string>
#include <vector>

#include "flags.h"
#include "process_timer.h"
#include "slurm_lab.h"

namespace distrun::bench {

int SrunBench(const Flags& flags) {
  const std::string distrun = flags.Get("distrun", "build/release/distrun");
  const int nodes = static_cast<int>(flags.Int("nodes", 3));
  const int runs = static_cast<int>(flags.Int("runs", 50));
  SlurmLab lab = SlurmLab::Open(flags.Get("lab", "/run/distrun-lab"));
  const std::string n = "-N" + std::to_string(nodes);
  const char* names[] = {"srun /bin/true", "srun distrun"};
  const std::vector<std::vector<std::string>> commands = {
      lab.OnLoginHost({"srun", n, "--ntasks-per-node=1", "-J", "distrun-bench", "/bin/true"}),
      lab.OnLoginHost({"srun", n, "--ntasks-per-node=1", "-J", "distrun-bench", distrun, "--", "/bin/true"}),
  };
  std::vector<std::vector<double>> samples = TimeAlternated(commands, lab.ClientEnv(), runs, /*warm=*/2);
  Summary plain = Summarize(samples[0]);
  Summary with = Summarize(samples[1]);
  for (size_t c = 0; c < commands.size(); ++c) {
    Summary s = Summarize(samples[c]);
    std::printf("%-16s %s: median %7.2f ms  p10 %7.2f ms  p90 %7.2f ms\n", names[c], n.c_str(),
                s.median * 1e3, s.p10 * 1e3, s.p90 * 1e3);
  }
  std::printf(
      "{\"bench\": \"srun\", \"nodes\": %d, \"runs\": %d, \"srun_median_ms\": %.3f, "
      "\"srun_distrun_median_ms\": "
      "%.3f, \"added_ms\": %.3f, \"added_p10_ms\": %.3f}\n",
      nodes, runs, plain.median * 1e3, with.median * 1e3, (with.median - plain.median) * 1e3,
      (with.p10 - plain.p10) * 1e3);
  return 0;
}

}  // namespace distrun::bench
