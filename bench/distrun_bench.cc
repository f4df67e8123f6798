// distrun-bench: benchmark programs; each prints a readable summary and JSON on its last line.
//   distrun-bench detect [--distrun PATH] [--runs N]
//   distrun-bench launch [--distrun PATH] [--runs N] [--nproc N]

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

namespace distrun::bench {
int DetectStartupBench(const std::string& distrun, int runs);
int LaunchBench(const std::string& distrun, int runs, int nproc);
}  // namespace distrun::bench

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: distrun-bench detect|launch [--distrun PATH] [--runs N] [--nproc N]\n");
    return 2;
  }
  std::string which = argv[1];
  std::string distrun = "build/release/distrun";
  int runs = 200;
  int nproc = 8;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--distrun")
      distrun = argv[i + 1];
    else if (flag == "--runs")
      runs = std::atoi(argv[i + 1]);
    else if (flag == "--nproc")
      nproc = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "distrun-bench: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  try {
    if (which == "detect") return distrun::bench::DetectStartupBench(distrun, runs > 0 ? runs : 200);
    if (which == "launch")
      return distrun::bench::LaunchBench(distrun, runs > 0 ? runs : 200, nproc > 0 ? nproc : 8);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "distrun-bench: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "distrun-bench: unknown benchmark '%s'; use detect or launch\n", which.c_str());
  return 2;
}
