// `distrun-bench failure [--distrun PATH] [--runs 50] [--nproc 8] [--srun-nodes N [--lab DIR]]`: how long
// after one worker fails every other worker gets SIGTERM. Each run is `distrun --nproc-per-node N --
// distrun-bench failure-worker ...`, locally, or with --srun-nodes under `srun -N<nodes>` on the Slurm lab
// (one distrun per virtual host, --nproc workers each, the failure crossing the lab's network); the failing
// rank (run % N) waits until every other worker is ready, notes CLOCK_MONOTONIC and exits 3; the others note
// CLOCK_MONOTONIC when SIGTERM arrives (sigtimedwait, so no handler runs first). CLOCK_MONOTONIC is one clock
// for the whole machine, so the notes compare directly. The failing worker's note is taken just before it
// writes it and exits, so the delays include its own exit: they err long, never short.

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "flags.h"
#include "proc_stats.h"
#include "slurm_lab.h"

extern char** environ;

namespace distrun::bench {
namespace {

constexpr int kFailExit = 3;

int OwnRank() {
  for (const char* name : {"DISTRUN_PROCESS_ID", "RANK"}) {
    if (const char* v = std::getenv(name)) return std::atoi(v);
  }
  return -1;
}

void WriteNote(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  [[maybe_unused]] ssize_t n = ::write(fd, text.data(), text.size());
  ::close(fd);
}

int CountReady(const std::string& dir) {
  int n = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) n += std::strncmp(e->d_name, "ready-", 6) == 0;
    ::closedir(d);
  }
  return n;
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

}  // namespace

int FailureWorkerMain(const Flags& flags) {
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ::sigprocmask(SIG_BLOCK, &term, nullptr);  // SIGTERM waits for sigtimedwait
  const std::string dir = flags.Get("dir", "");
  const int rank = OwnRank();
  const int fail_rank = static_cast<int>(flags.Int("fail-rank", 0));
  const int nproc = static_cast<int>(flags.Int("nproc", 8));
  const std::string note = dir + "/rank-" + std::to_string(rank);
  if (rank == fail_rank) {
    const double deadline = MonotonicSeconds() + 10;
    while (CountReady(dir) < nproc - 1 && MonotonicSeconds() < deadline) ::usleep(1000);
    ::usleep(20'000);  // the others are in sigtimedwait by now
    int fd = ::open(note.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    std::string text = "fail " + std::to_string(MonotonicNanos()) + "\n";
    [[maybe_unused]] ssize_t n = ::write(fd, text.data(), text.size());
    ::_exit(kFailExit);
  }
  WriteNote(dir + "/ready-" + std::to_string(rank), "");
  timespec wait{20, 0};
  int sig = ::sigtimedwait(&term, nullptr, &wait);
  int64_t at = MonotonicNanos();
  WriteNote(note, sig == SIGTERM ? "term " + std::to_string(at) + "\n" : "none\n");
  return sig == SIGTERM ? 128 + SIGTERM : 1;
}

int FailureBench(const Flags& flags) {
  const std::string distrun = flags.Get("distrun", "build/release/distrun");
  // --trials and --workers are other names for --runs and --nproc.
  const int runs = static_cast<int>(flags.Int("trials", flags.Int("runs", 50)));
  const int per_node = static_cast<int>(flags.Int("workers", flags.Int("nproc", 8)));
  const int nodes = static_cast<int>(flags.Int("srun-nodes", 0));
  const int nproc = per_node * std::max(nodes, 1);
  if (runs < 1 || nproc < 2 || nodes < 0) {
    throw std::invalid_argument(
        "--runs must be positive, --srun-nodes not negative, and there must be two workers");
  }
  std::optional<SlurmLab> lab;
  if (nodes > 0) lab = SlurmLab::Open(flags.Get("lab", "/run/distrun-lab"));
  const std::string self = SelfPath();
  std::vector<double> remote_ms;  // delays of workers on another host than the failing one
  std::vector<double> delays_ms, worst_ms, whole_ms;
  int missing = 0;
  for (int run = 0; run < runs; ++run) {
    char tmpl[] = "/tmp/distrun-failure-XXXXXX";
    if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    const std::string dir = tmpl;
    const int fail_rank = run % nproc;
    std::vector<std::string> argv = {distrun,
                                     "--nproc-per-node",
                                     std::to_string(per_node),
                                     "--",
                                     self,
                                     "failure-worker",
                                     "--dir",
                                     dir,
                                     "--fail-rank",
                                     std::to_string(fail_rank),
                                     "--nproc",
                                     std::to_string(nproc)};
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
    if (lab) {
      argv.insert(argv.begin(),
                  {"srun", "-N" + std::to_string(nodes), "--ntasks-per-node=1", "-J", "distrun-bench"});
      argv = lab->OnLoginHost(argv);
      env = lab->ClientEnv();
    }
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid = -1;
    double t0 = MonotonicSeconds();
    int rc = ::posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw std::runtime_error("cannot start " + distrun);
    int status = 0;
    ::waitpid(pid, &status, 0);
    whole_ms.push_back((MonotonicSeconds() - t0) * 1e3);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != kFailExit) {
      throw std::runtime_error(distrun + " did not exit with the failed worker's code " +
                               std::to_string(kFailExit) + " (status " + std::to_string(status) + ")");
    }
    auto read_note = [&](int r, std::string* kind) {
      std::ifstream in(dir + "/rank-" + std::to_string(r));
      long long ns = 0;
      in >> *kind >> ns;
      return ns;
    };
    std::string kind;
    long long failed_at = read_note(fail_rank, &kind);
    if (kind != "fail") throw std::runtime_error("the failing worker left no note in " + dir);
    double worst = 0;
    for (int r = 0; r < nproc; ++r) {
      if (r == fail_rank) continue;
      long long at = read_note(r, &kind);
      if (kind != "term") {
        ++missing;
        continue;
      }
      double d = static_cast<double>(at - failed_at) * 1e-6;
      delays_ms.push_back(d);
      if (r / per_node != fail_rank / per_node) remote_ms.push_back(d);
      worst = std::max(worst, d);
    }
    worst_ms.push_back(worst);
    for (int r = 0; r < nproc; ++r) {
      ::unlink((dir + "/rank-" + std::to_string(r)).c_str());
      ::unlink((dir + "/ready-" + std::to_string(r)).c_str());
    }
    ::rmdir(dir.c_str());
  }
  std::printf(
      "%d runs of %sdistrun --nproc-per-node %d, one worker failing: exit → SIGTERM in each other worker "
      "(%zu delays)\n  p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms; slowest worker of a run: p50 %.2f "
      "ms "
      "p99 %.2f ms; whole distrun p50 %.1f ms\n",
      runs, lab ? ("srun -N" + std::to_string(nodes) + " ").c_str() : "", per_node, delays_ms.size(),
      Quantile(delays_ms, 0.5), Quantile(delays_ms, 0.9), Quantile(delays_ms, 0.99), Quantile(delays_ms, 1.0),
      Quantile(worst_ms, 0.5), Quantile(worst_ms, 0.99), Quantile(whole_ms, 0.5));
  if (lab) {
    std::printf(
        "  under srun -N%d on the Slurm lab: workers on other hosts (%zu delays) p50 %.2f ms  p99 %.2f ms\n",
        nodes, remote_ms.size(), Quantile(remote_ms, 0.5), Quantile(remote_ms, 0.99));
  }
  if (missing) std::printf("  %d workers never got SIGTERM\n", missing);
  std::printf(
      "{\"bench\": \"failure\", \"runs\": %d, \"nproc\": %d, \"p50_ms\": %.3f, \"p90_ms\": %.3f, \"p99_ms\": "
      "%.3f, "
      "\"max_ms\": %.3f, \"run_worst_p50_ms\": %.3f, \"run_worst_p99_ms\": %.3f, \"missing\": %d, "
      "\"srun_nodes\": "
      "%d, \"other_hosts_p50_ms\": %.3f, \"other_hosts_p99_ms\": %.3f}\n",
      runs, nproc, Quantile(delays_ms, 0.5), Quantile(delays_ms, 0.9), Quantile(delays_ms, 0.99),
      Quantile(delays_ms, 1.0), Quantile(worst_ms, 0.5), Quantile(worst_ms, 0.99), missing, nodes,
      Quantile(remote_ms, 0.5), Quantile(remote_ms, 0.99));
  return missing ? 1 : 0;
}

}  // namespace distrun::bench
