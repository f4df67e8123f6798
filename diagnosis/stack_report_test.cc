#include "diagnosis/stack_report.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "diagnosis/stack_test_ranks.h"

namespace distrun {
namespace {

using testing::Frames;
using testing::Rank;

const Frames kMain = {
    "<module> (/w/train.py:41)", "step (/w/train.py:30)",
    "all_reduce (/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py:1536)"};
const Frames kSaving = {"<module> (/w/train.py:41)", "step (/w/train.py:31)", "save (/w/train.py:50)"};
const Frames kLoader = {"_bootstrap (/usr/lib/python3.11/threading.py:995)",
                        "_bootstrap_inner (/usr/lib/python3.11/threading.py:1038)",
                        "run (/usr/lib/python3.11/threading.py:975)", "loader (/w/train.py:12)",
                        "wait (/usr/lib/python3.11/threading.py:320)"};

std::vector<RankStack> FourRanksThreeDiverges() {
  // The background thread first: the summary still puts the divergence first.
  std::vector<RankStack> ranks = {Rank(0, {kLoader, kMain}), Rank(1, {kLoader, kMain}),
                                  Rank(2, {kLoader, kMain}), Rank(3, {kLoader, kSaving})};
  for (RankStack& r : ranks) {
    r.threads[0].current = false;
    r.threads[1].current = true;
  }
  return ranks;
}

// A main thread of `depth` common frames, then `tail` frames of its own.
Frames Path(int depth, const std::string& tail_name, int tail) {
  Frames f;
  for (int i = 0; i < depth; ++i) f.push_back("f" + std::to_string(i) + " (a.py:" + std::to_string(i) + ")");
  for (int i = 0; i < tail; ++i)
    f.push_back(tail_name + std::to_string(i) + " (b.py:" + std::to_string(i) + ")");
  return f;
}

TEST(StackReport, SummaryNamesTheOddRank) {
  std::vector<RankStack> ranks = FourRanksThreeDiverges();
  StackTree tree = StackTree::Build(ranks);
  EXPECT_EQ(
      RenderSummary(tree, ranks),
      "stacks of 4 ranks (4 with a stack)\n"
      "|- <module> (/w/train.py:41)\n"
      "|  |- [3] ranks 0-2  step (/w/train.py:30)\n"
      "|  |  all_reduce (distributed/distributed_c10d.py:1536)\n"
      "|  `- [1] ranks 3  step (/w/train.py:31)\n"
      "|     save (/w/train.py:50)\n"
      "`- _bootstrap (python3.11/threading.py:995) ... 3 frames ... wait (python3.11/threading.py:320)\n"
      "odd ranks (the majority is [3] ranks 0-2):\n"
      "  [1] ranks 3:\n"
      "    rank 3 (host node1, pid 103, gpu 1): save (/w/train.py:50)\n");
}

TEST(StackReport, SummaryWhenEveryRankAgrees) {
  std::vector<RankStack> ranks = {Rank(0, {kMain}), Rank(1, {kMain})};
  EXPECT_EQ(RenderSummary(StackTree::Build(ranks), ranks),
            "stacks of 2 ranks (2 with a stack)\n"
            "`- <module> (/w/train.py:41) ... 1 frame ... all_reduce (distributed/distributed_c10d.py:1536)\n"
            "odd ranks: none (every rank took the same paths)\n");
  std::vector<RankStack> none;
  EXPECT_EQ(RenderSummary(StackTree(), none), "stacks of 0 ranks (0 with a stack)\n");
}

TEST(StackReport, ChainsCollapse) {
  // Ten frames shared by every rank, then ranks 0-2 in x and rank 3 four frames deep in y.
  std::vector<RankStack> ranks = {Rank(0, {Path(10, "x", 1)}), Rank(1, {Path(10, "x", 1)}),
                                  Rank(2, {Path(10, "x", 1)}), Rank(3, {Path(10, "y", 4)})};
  EXPECT_EQ(RenderSummary(StackTree::Build(ranks), ranks),
            "stacks of 4 ranks (4 with a stack)\n"
            "`- f0 (a.py:0)\n"
            "   ... 8 frames ...\n"
            "   f9 (a.py:9)\n"
            "   |- [3] ranks 0-2  x0 (b.py:0)\n"
            "   `- [1] ranks 3  y0 (b.py:0) ... 2 frames ... y3 (b.py:3)\n"
            "odd ranks (the majority is [3] ranks 0-2):\n"
            "  [1] ranks 3:\n"
            "    rank 3 (host node1, pid 103, gpu 1): y3 (b.py:3)\n");
  // The full dump's tree keeps every frame.
  std::string full = RenderFullDump(ranks);
  EXPECT_NE(full.find("== merged tree of [4] ranks 0-3 ==\n"
                      "`- f0 (a.py:0)\n"
                      "   f1 (a.py:1)\n"),
            std::string::npos)
      << full;
  EXPECT_NE(full.find("   `- [1] ranks 3  y0 (b.py:0)\n"
                      "      y1 (b.py:1)\n"
                      "      y2 (b.py:2)\n"
                      "      y3 (b.py:3)\n"),
            std::string::npos)
      << full;
}

TEST(StackReport, ErrorRankStandsApart) {
  std::vector<RankStack> ranks = {Rank(0, {kMain}), Rank(1, {kMain}), Rank(2, {kMain})};
  ranks[1].threads.clear();
  ranks[1].error = "stopped (state T): a stopped process cannot dump its stack";
  StackTree tree = StackTree::Build(ranks);
  EXPECT_EQ(RenderSummary(tree, ranks),
            "stacks of 3 ranks (2 with a stack)\n"
            "|- [2] ranks 0,2  <module> (/w/train.py:41) ... 1 frame ... all_reduce "
            "(distributed/distributed_c10d.py:1536)\n"
            "`- [1] ranks 1  <no stack: stopped (state T): a stopped process cannot dump its stack>\n"
            "odd ranks (the majority is [2] ranks 0,2):\n"
            "  [1] ranks 1:\n"
            "    rank 1 (host node0, pid 101, gpu 1): <no stack: stopped (state T): a stopped process cannot "
            "dump its stack>\n");
  std::string full = RenderFullDump(tree, ranks);
  EXPECT_NE(full.find("== rank 1 (host node0, pid 101, gpu 1, python) ==\n"
                      "no stack: stopped (state T): a stopped process cannot dump its stack\n\n"
                      "== rank 2 "),
            std::string::npos)
      << full;
}

TEST(StackReport, FullDumpListsEachRankInnermostFirst) {
  std::vector<RankStack> ranks = {Rank(1, {Path(0, "x", 2)}), Rank(0, {Path(0, "y", 1)})};
  ranks[1].host.clear();
  ranks[1].pid = 0;
  ranks[1].gpu.clear();  // a CPU worker: no GPU named
  ranks[1].mechanism = "native";
  EXPECT_EQ(RenderFullDump(ranks),
            "== rank 0 (host ?, pid ?, native) ==\n"
            "thread t0 (current):\n"
            "  #0 y0 (b.py:0)\n"
            "\n"
            "== rank 1 (host node0, pid 101, gpu 1, python) ==\n"
            "thread t0 (current):\n"
            "  #0 x1 (b.py:1)\n"
            "  #1 x0 (b.py:0)\n"
            "\n"
            "== merged tree of [2] ranks 0-1 ==\n"
            "|- [1] ranks 0  y0 (b.py:0)\n"
            "`- [1] ranks 1  x0 (b.py:0)\n"
            "   x1 (b.py:1)\n");
}

TEST(StackReport, MajorityPathStaysInOneColumnAndAlikeThreadsAreOneLine) {
  const Frames bg_a = {"_bootstrap (t.py:1)", "a1 (t.py:2)", "a2 (t.py:3)"};
  const Frames bg_b = {"_bootstrap (t.py:1)", "b1 (t.py:4)"};
  std::vector<RankStack> ranks;
  for (int r = 0; r < 10; ++r) {
    Frames main = r == 9   ? Frames{"f0 (a.py:0)", "y0 (b.py:0)"}
                  : r == 8 ? Frames{"f0 (a.py:0)", "f1 (a.py:1)", "z0 (b.py:0)"}
                           : Path(3, "x", 2);
    ranks.push_back(Rank(r, {bg_a, main, bg_b}));
  }
  std::string summary = RenderSummary(StackTree::Build(ranks), ranks);
  EXPECT_EQ(summary.substr(0, summary.find("odd ranks")),
            "stacks of 10 ranks (10 with a stack)\n"
            "|- f0 (a.py:0)\n"
            "|  |- [1] ranks 9  y0 (b.py:0)\n"
            "|  [9] ranks 0-8  f1 (a.py:1)\n"
            "|  |- [8] ranks 0-7  f2 (a.py:2) ... 1 frame ... x1 (b.py:1)\n"
            "|  `- [1] ranks 8  z0 (b.py:0)\n"
            "`- _bootstrap (t.py:1) ... 2 paths, 3 frames, alike in all its ranks\n");
  // The full dump draws the background threads.
  std::string full = RenderFullDump(ranks);
  EXPECT_NE(full.find("`- _bootstrap (t.py:1)\n"
                      "   |- a1 (t.py:2)\n"
                      "   |  a2 (t.py:3)\n"
                      "   `- b1 (t.py:4)\n"),
            std::string::npos)
      << full;
}

TEST(StackReport, ScreenLimit) {
  // Twenty ranks, each stuck somewhere else below one shared frame.
  std::vector<RankStack> ranks;
  for (int r = 0; r < 20; ++r)
    ranks.push_back(Rank(r, {{"main (m.py:1)", "at" + std::to_string(r) + " (m.py:9)"}}));
  StackTree tree = StackTree::Build(ranks);
  std::string unlimited = RenderSummary(tree, ranks, 0);
  // Seven branches, one line for the other 13, and 8 of the 19 odd classes with a rank each.
  EXPECT_NE(unlimited.find("   `- ... 13 more branches: [13] ranks 7-19\n"), std::string::npos) << unlimited;
  EXPECT_NE(unlimited.find("  and 11 more classes: [11] ranks 9-19\n"), std::string::npos) << unlimited;
  EXPECT_EQ(std::count(unlimited.begin(), unlimited.end(), '\n'), 1 + 1 + 8 + 1 + 8 * 2 + 1);

  std::string screen = RenderSummary(tree, ranks, 12);
  EXPECT_EQ(screen,
            "stacks of 20 ranks (20 with a stack)\n"
            "`- main (m.py:1)\n"
            "   |- [1] ranks 0  at0 (m.py:9)\n"
            "   |- [1] ranks 1  at1 (m.py:9)\n"
            "   |- [1] ranks 2  at2 (m.py:9)\n"
            "   |- [1] ranks 3  at3 (m.py:9)\n"
            "odd ranks (the majority is [1] ranks 0):\n"
            "  [1] ranks 1:\n"
            "    rank 1 (host node0, pid 101, gpu 1): at1 (m.py:9)\n"
            "  [1] ranks 2:\n"
            "    rank 2 (host node1, pid 102, gpu 0): at2 (m.py:9)\n"
            "... 17 more lines: the full dump has the rest\n");
}

TEST(StackReport, ShortLabels) {
  EXPECT_EQ(ShortLabel("wait (/usr/lib/python3.11/threading.py:320)"), "wait (python3.11/threading.py:320)");
  EXPECT_EQ(ShortLabel("f (/w/a.py:1)"), "f (/w/a.py:1)");
  EXPECT_EQ(ShortLabel("f (a.py:1)"), "f (a.py:1)");
  EXPECT_EQ(ShortLabel("std::function<void (int)>::operator() (src/x/y.cc:3)"),
            "std::function<void (int)>::operator() (x/y.cc:3)");
  EXPECT_EQ(ShortLabel("??"), "??");
}

}  // namespace
}  // namespace distrun
