// `distrun-bench detect`: whole-process time of `distrun --detect --format json` as task 300 of a 512-task
// Slurm step (64 nodes × 8 tasks), against /bin/true as the floor of process creation, alternated.

#include <cstdio>
#include <string>
#include <vector>

#include "hot_path.h"
#include "process_timer.h"

namespace distrun::bench {

int DetectStartupBench(const std::string& distrun, int runs) {
  std::vector<std::vector<double>> samples =
      TimeAlternated({DistrunDetect(distrun), {"/bin/true"}}, SlurmStep512Env(), runs, /*warm=*/5);
  Summary d = Summarize(samples[0]), f = Summarize(samples[1]);
  std::printf("distrun --detect (512-task Slurm step): median %.2f ms, p10 %.2f ms, p90 %.2f ms\n",
              d.median * 1e3, d.p10 * 1e3, d.p90 * 1e3);
  std::printf("/bin/true (process floor):             median %.2f ms\n", f.median * 1e3);
  std::printf(
      "{\"bench\": \"detect\", \"runs\": %d, \"median_ms\": %.3f, \"p90_ms\": %.3f, \"true_median_ms\": "
      "%.3f}\n",
      runs, d.median * 1e3, d.p90 * 1e3, f.median * 1e3);
  return 0;
}

}  // namespace distrun::bench
