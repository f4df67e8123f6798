// `distrun-bench stack-merge --stacks 10000,100000 --frames 30 --threads 4`: the cost of merging a hung
// job's stacks (diagnosis/) at scale, on one core. Each simulated rank has --threads Python threads of
// --frames frames, as faulthandler prints them: a main thread that most ranks share (3% of ranks diverge at
// some depth into one of four other paths, and 10% stop on another line of the leaf function) and
// background threads common to every rank. Three phases are timed apart: parsing the faulthandler texts
// (generating them is not timed), merging the parsed stacks into one tree, and rendering the summary
// screen (which finds the equivalence classes).

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "diagnosis/stack_parse.h"
#include "diagnosis/stack_report.h"
#include "diagnosis/stack_tree.h"
#include "flags.h"

namespace distrun::bench {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// splitmix64 of the rank: the same job on every run, without a generator's state.
uint64_t Hash(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// One rank's faulthandler dump (all threads, most recent call first).
std::string FaulthandlerText(int rank, int frames, int threads) {
  const uint64_t h = Hash(static_cast<uint64_t>(rank));
  const bool diverges = h % 100 < 3;
  const int diverge_at = static_cast<int>((h >> 8) % static_cast<uint64_t>(frames));
  const int variant = static_cast<int>((h >> 16) % 4);
  const int leaf_shift = (h >> 24) % 10 == 0 ? 1 + static_cast<int>((h >> 32) % 5) : 0;
  std::string out;
  out.reserve(static_cast<size_t>(threads * frames) * 96);
  char buf[256];
  for (int t = 0; t < threads; ++t) {
    std::snprintf(
        buf, sizeof buf, "%s 0x%016llx (most recent call first):\n", t == 0 ? "Current thread" : "Thread",
        static_cast<unsigned long long>(0x7f0000000000ull + (h & 0xffffff000ull) + static_cast<unsigned>(t)));
    out += buf;
    for (int d = frames - 1; d >= 0; --d) {  // innermost first
      int line = 10 + 7 * d;
      if (t == 0) {
        if (diverges && d >= diverge_at) {
          std::snprintf(buf, sizeof buf, "  File \"/w/job/other_%d.py\", line %d in branch_%d_%d\n", variant,
                        line, variant, d);
        } else {
          if (d == frames - 1) line += leaf_shift;
          std::snprintf(
              buf, sizeof buf,
              "  File \"/usr/lib/python3/dist-packages/torch/nn/module_%d.py\", line %d in forward_%d\n", d,
              line, d);
        }
      } else if (d == 0) {
        std::snprintf(buf, sizeof buf,
                      "  File \"/usr/lib/python3.11/threading.py\", line 995 in _bootstrap\n");
      } else {
        std::snprintf(buf, sizeof buf,
                      "  File \"/usr/lib/python3/dist-packages/torch/utils/bg_%d.py\", line %d in loop_%d\n",
                      t, line, d);
      }
      out += buf;
    }
    out += "\n";
  }
  return out;
}

struct Run {
  int stacks = 0;
  double text_mb = 0, parse_s = 0, merge_s = 0, summary_s = 0;
  size_t nodes = 0, classes = 0;
};

Run RunOnce(int stacks, int frames, int threads, std::string* screen) {
  Run run;
  run.stacks = stacks;
  std::vector<RankStack> ranks(static_cast<size_t>(stacks));
  size_t bytes = 0;
  for (int r = 0; r < stacks; ++r) {
    std::string text = FaulthandlerText(r, frames, threads);
    bytes += text.size();
    RankStack& rs = ranks[static_cast<size_t>(r)];
    rs.rank = r;
    rs.host = "node" + std::to_string(r / 8);
    rs.pid = 1000 + r;
    rs.gpu = std::to_string(r % 8);
    rs.mechanism = "python";
    double t0 = Now();
    rs.threads = ParseFaulthandler(text);
    run.parse_s += Now() - t0;
    if (rs.threads.size() != static_cast<size_t>(threads)) throw std::runtime_error("a dump parsed wrong");
  }
  run.text_mb = static_cast<double>(bytes) / 1e6;
  double t0 = Now();
  StackTree tree = StackTree::Build(ranks);
  run.merge_s = Now() - t0;
  run.nodes = tree.size();
  t0 = Now();
  *screen = RenderSummary(tree, ranks);
  run.summary_s = Now() - t0;
  run.classes = tree.EquivalenceClasses().size();
  return run;
}

}  // namespace

int StackMergeBench(const Flags& flags) {
  const int frames = static_cast<int>(flags.Int("frames", 30));
  const int threads = static_cast<int>(flags.Int("threads", 4));
  if (frames < 1 || threads < 1) throw std::invalid_argument("--frames and --threads must be positive");
  std::vector<int> counts;
  std::stringstream list(flags.Get("stacks", "10000"));
  for (std::string item; std::getline(list, item, ',');) {
    counts.push_back(std::stoi(item));
    if (counts.back() < 1) throw std::invalid_argument("--stacks must be positive");
  }
  std::printf("stack merge: %d threads x %d frames per rank, faulthandler text, one core\n", threads, frames);
  std::string json = "{\"benchmark\": \"stack-merge\", \"threads\": " + std::to_string(threads) +
                     ", \"frames\": " + std::to_string(frames) + ", \"runs\": [";
  for (size_t i = 0; i < counts.size(); ++i) {
    std::string screen;
    Run r = RunOnce(counts[i], frames, threads, &screen);
    if (i == 0) std::printf("summary of the first run:\n%s\n", screen.c_str());
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    const double rss_mb = static_cast<double>(u.ru_maxrss) / 1024.0;
    std::printf(
        "%7d stacks: parse %.3f s (%.1f MB of text, %.0f MB/s), merge %.3f s (%.2f us per stack), summary "
        "%.3f s; "
        "%zu nodes, %zu classes; max RSS %.0f MB\n",
        r.stacks, r.parse_s, r.text_mb, r.text_mb / r.parse_s, r.merge_s, r.merge_s / r.stacks * 1e6,
        r.summary_s, r.nodes, r.classes, rss_mb);
    char row[320];
    std::snprintf(
        row, sizeof row,
        "%s{\"stacks\": %d, \"text_mb\": %.1f, \"parse_s\": %.4f, \"merge_s\": %.4f, \"summary_s\": %.4f, "
        "\"nodes\": %zu, \"classes\": %zu, \"max_rss_mb\": %.0f}",
        i ? ", " : "", r.stacks, r.text_mb, r.parse_s, r.merge_s, r.summary_s, r.nodes, r.classes, rss_mb);
    json += row;
    std::fflush(stdout);
  }
  std::printf("%s]}\n", json.c_str());
  return 0;
}

}  // namespace distrun::bench
