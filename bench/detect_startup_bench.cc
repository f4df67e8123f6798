// `distrun-bench detect`: whole-process time of `distrun --detect --format json` as task 300 of a 512-task
// Slurm step (64 nodes × 8 tasks), against /bin/true as the floor of process creation, alternated.

#include <cstdio>
#include <string>
#include <vector>

#include "process_timer.h"

namespace distrun::bench {

int DetectStartupBench(const std::string& distrun, int runs) {
  std::vector<std::string> env = {"PATH=/usr/bin:/bin",
                                  "SLURM_JOB_ID=48213",
                                  "SLURM_STEP_ID=0",
                                  "SLURM_STEP_NODELIST=gpu-a[001-032],gpu-b[001-016],gpu-c[0001-0016]",
                                  "SLURM_STEP_NUM_NODES=64",
                                  "SLURM_STEP_NUM_TASKS=512",
                                  "SLURM_STEP_TASKS_PER_NODE=8(x64)",
                                  "SLURM_NTASKS=512",
                                  "SLURM_PROCID=300",
                                  "SLURM_LOCALID=4",
                                  "SLURM_NODEID=37",
                                  "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7",
                                  "SLURM_JOB_NODELIST=gpu-a[001-032],gpu-b[001-016],gpu-c[0001-0016]"};
  std::vector<std::vector<double>> samples =
      TimeAlternated({{distrun, "--detect", "--format", "json"}, {"/bin/true"}}, env, runs, /*warm=*/5);
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
