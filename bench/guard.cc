// `distrun-bench guard [--distrun PATH] [--floor PATH] [--recorded FILE] [--repeats N] [--as-built 1]`: the
// hot path's ratios in about a minute, each beside its goal and the figure last recorded
// (bench/guard_recorded.txt, written from a closing note's run). Every ratio compares commands alternated in
// one run on this machine; each is measured --repeats times (default 3) and the median is shown with the
// range. It never fails on timing: machines are noisy. `.ci/run` prints it, and every closing note quotes
// it. The programs measured are copies, as installed (InstalledCopies); --as-built 1 times them in place.

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "flags.h"
#include "hot_path.h"
#include "process_timer.h"
#include "temp_dir.h"

namespace distrun::bench {
namespace {

struct GuardCheck {
  const char* name;
  const char* what;                                // ours / theirs
  double goal;                                     // the ratio's goal: at most this; 0: a reference
  std::vector<std::vector<std::string>> commands;  // ours, then theirs
  std::vector<std::string> env;
  int runs;  // alternated rounds per measurement
};

// NAME RATIO per line; '#' starts a comment. A missing file records nothing.
std::map<std::string, double> ReadRecorded(const std::string& path) {
  std::map<std::string, double> recorded;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    std::istringstream fields(line);
    std::string name;
    double ratio = 0;
    if (fields >> name >> ratio) recorded[name] = ratio;
  }
  return recorded;
}

// The programs measured, copied into a directory of their own as an installation (cmake --install, pip)
// writes them: here a program freshly written by the linker starts 3-8 % slower than a copy of the same
// bytes (146 page faults against 134 for `--detect`; its page cache is likely held in smaller pieces), and
// mpiexec, which the ratios compare with, is an installed file. Removed with the guard's end.
class InstalledCopies {
 public:
  InstalledCopies() {
    try {
      dir_.emplace("distrun-guard");
    } catch (const std::exception&) {  // nowhere to copy to: the programs are timed where they are
    }
  }

  // The copy of `program` and of `companions` beside it, in the same directory; `program` itself when
  // they cannot be copied.
  std::string Copy(const std::string& program, const std::vector<std::string>& companions = {}) {
    if (!dir_) return program;
    const std::filesystem::path from(program);
    std::error_code ec;
    const std::filesystem::path to = dir_->path() / from.filename();
    std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing, ec);
    for (const std::string& name : companions) {
      if (ec) break;
      std::filesystem::copy_file(from.parent_path() / name, dir_->path() / name,
                                 std::filesystem::copy_options::overwrite_existing, ec);
    }
    return ec ? program : to.string();
  }

 private:
  std::optional<TempDir> dir_;
};

}  // namespace

// distrun-spawn-floor, built beside distrun-bench.
std::string FloorProgram() {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (self.parent_path() / "distrun-spawn-floor").string();
}

int GuardBench(const Flags& flags) {
  InstalledCopies copies;
  const bool as_built = flags.Int("as-built", 0) != 0;
  const std::string built = flags.Get("distrun", "build/release/distrun");
  const std::string distrun =
      as_built ? built : copies.Copy(built, {"distrun-runtime.so", "distrun-sentinel"});
  const std::string floor =
      as_built ? flags.Get("floor", FloorProgram()) : copies.Copy(flags.Get("floor", FloorProgram()));
  const std::string measured =
      distrun == built ? "the build's own files (" + built + ")" : "copies, as installed (" + distrun + ")";
  const int repeats = std::max(1, static_cast<int>(flags.Int("repeats", 3)));
  const std::string recorded_path = flags.Get("recorded", "bench/guard_recorded.txt");
  const std::map<std::string, double> recorded = ReadRecorded(recorded_path);
  const std::vector<GuardCheck> checks = {
      {"launch-8",
       "distrun --nproc-per-node 8 -- /bin/true / mpiexec.mpich -n 8 /bin/true",
       0.55,
       {DistrunLaunch(distrun, 8), MpiexecLaunch(8)},
       LaunchEnv(),
       150},
      {"launch-64",
       "distrun --nproc-per-node 64 -- /bin/true / mpiexec.mpich -n 64 /bin/true",
       0.66,
       {DistrunLaunch(distrun, 64), MpiexecLaunch(64)},
       LaunchEnv(),
       40},
      {"detect",
       "distrun --detect --format json, task 300 of a 512-task Slurm step / /bin/true",
       2.0,
       {DistrunDetect(distrun), {"/bin/true"}},
       SlurmStep512Env(),
       1000},
      // What the machine allows: no launcher can run N processes faster than posix_spawn from two threads.
      {"floor-8",
       "distrun-spawn-floor 8 (posix_spawn and reap 8 /bin/true, 2 threads) / mpiexec.mpich -n 8 /bin/true",
       0,
       {{floor, "8"}, MpiexecLaunch(8)},
       LaunchEnv(),
       150},
      {"floor-64",
       "distrun-spawn-floor 64 / mpiexec.mpich -n 64 /bin/true",
       0,
       {{floor, "64"}, MpiexecLaunch(64)},
       LaunchEnv(),
       40},
  };

  std::printf(
      "hot-path guard: ratios of whole-process times, alternated in one run, median of %d (range);\n"
      "goals are upper bounds; floor-N: the least any launcher could take here (ref); recorded: %s.\n"
      "Timing never fails the guard. Programs measured: %s.\n",
      repeats, recorded_path.c_str(), measured.c_str());
  std::printf("  %-10s %7s %9s %-25s %21s\n", "check", "goal", "recorded", "now (range)",
              "ours / theirs (ms)");
  std::string json = "{\"bench\": \"guard\", \"repeats\": " + std::to_string(repeats) + ", \"checks\": [";
  for (size_t i = 0; i < checks.size(); ++i) {
    const GuardCheck& check = checks[i];
    std::vector<double> ratios, ours, theirs;
    int retried = 0;
    for (int r = 0; r < repeats; ++r) {
      std::vector<std::vector<double>> samples =
          TimeAlternated(check.commands, check.env, check.runs, 3, /*retries=*/5, &retried);
      const double a = Summarize(samples[0]).median, b = Summarize(samples[1]).median;
      ratios.push_back(a / b);
      ours.push_back(a * 1e3);
      theirs.push_back(b * 1e3);
    }
    const double ratio = Summarize(ratios).median;
    const double ours_ms = Summarize(ours).median, theirs_ms = Summarize(theirs).median;
    const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
    const auto it = recorded.find(check.name);
    char rec[32] = "-";
    if (it != recorded.end()) std::snprintf(rec, sizeof rec, "%.2f", it->second);
    char goal[16] = "-";
    if (check.goal > 0) std::snprintf(goal, sizeof goal, "%.2f", check.goal);
    const char* verdict = check.goal == 0 ? "ref" : ratio <= check.goal ? "ok" : "ABOVE";
    std::printf("  %-10s %7s %9s %6.2f (%.2f-%.2f) %-5s %10.2f / %-8.2f", check.name, goal, rec, ratio, *lo,
                *hi, verdict, ours_ms, theirs_ms);
    if (retried > 0) std::printf("  (%d failed runs were run again)", retried);
    std::printf("\n");
    char entry[320];
    std::snprintf(entry, sizeof entry,
                  "%s{\"check\": \"%s\", \"goal\": %s, \"ratio\": %.3f, \"min\": %.3f, \"max\": %.3f, "
                  "\"ours_ms\": %.3f, \"theirs_ms\": %.3f, \"recorded\": %s, \"retried\": %d}",
                  i ? ", " : "", check.name, check.goal > 0 ? goal : "null", ratio, *lo, *hi, ours_ms,
                  theirs_ms, it == recorded.end() ? "null" : rec, retried);
    json += entry;
  }
  for (const GuardCheck& check : checks) std::printf("  %-10s %s\n", check.name, check.what);
  std::printf("%s]}\n", json.c_str());
  return 0;
}

}  // namespace distrun::bench
