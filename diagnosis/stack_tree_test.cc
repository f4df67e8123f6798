#include "diagnosis/stack_tree.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "diagnosis/stack_parse.h"
#include "diagnosis/stack_test_ranks.h"

namespace distrun {
namespace {

using testing::Frames;
using testing::Rank;

const Frames kMain = {"<module> (train.py:41)", "step (train.py:30)", "all_reduce (c10d.py:1536)"};
const Frames kSaving = {"<module> (train.py:41)", "step (train.py:31)", "save (train.py:50)"};
const Frames kLoader = {"_bootstrap (threading.py:995)", "loader (train.py:12)", "wait (threading.py:320)"};

// The child of `id` labelled `label`, or -1.
int ChildOf(const StackTree& tree, int id, const std::string& label) {
  for (int c : tree.node(id).children) {
    if (tree.label(c) == label) return c;
  }
  return -1;
}

std::vector<RankStack> FourRanksThreeDiverges() {
  return {Rank(0, {kMain, kLoader}), Rank(1, {kMain, kLoader}), Rank(2, {kMain, kLoader}),
          Rank(3, {kSaving, kLoader})};
}

TEST(StackTree, RankThreeDivergesFromTheMajority) {
  StackTree tree = StackTree::Build(FourRanksThreeDiverges());
  EXPECT_EQ(tree.ranks().ToString(), "0-3");
  // root, <module>, two steps, all_reduce, save, and the loader's three
  EXPECT_EQ(tree.size(), 9u);
  int module = ChildOf(tree, StackTree::kRoot, "<module> (train.py:41)");
  ASSERT_GE(module, 0);
  EXPECT_EQ(tree.node(module).ranks.ToString(), "0-3");
  ASSERT_EQ(tree.node(module).children.size(), 2u);
  int step = ChildOf(tree, module, "step (train.py:30)");
  int step3 = ChildOf(tree, module, "step (train.py:31)");
  ASSERT_GE(step, 0);
  ASSERT_GE(step3, 0);
  EXPECT_EQ(tree.node(step).ranks.ToString(), "0-2");
  EXPECT_EQ(tree.node(step3).ranks.ToString(), "3");
  int reduce = ChildOf(tree, step, "all_reduce (c10d.py:1536)");
  ASSERT_GE(reduce, 0);
  EXPECT_EQ(tree.node(reduce).ends.ToString(), "0-2");
  EXPECT_TRUE(tree.node(reduce).children.empty());
  EXPECT_EQ(tree.node(ChildOf(tree, StackTree::kRoot, "_bootstrap (threading.py:995)")).ranks.ToString(),
            "0-3");

  std::vector<EquivalenceClass> classes = tree.EquivalenceClasses();
  ASSERT_EQ(classes.size(), 2u);
  EXPECT_EQ(classes[0].ranks.ToString(), "3");
  EXPECT_EQ(classes[1].ranks.ToString(), "0-2");
  EXPECT_EQ(classes[1].ends.size(), 2u);  // all_reduce and the loader's wait

  std::vector<RankStack> ranks = FourRanksThreeDiverges();
  std::vector<OddClass> odd = OddRanks(tree, ranks);
  ASSERT_EQ(odd.size(), 1u);
  EXPECT_EQ(odd[0].ranks.ToString(), "3");
  ASSERT_EQ(odd[0].members.size(), 1u);
  EXPECT_EQ(odd[0].members[0]->pid, 103);
  EXPECT_EQ(LeafFrame(*odd[0].members[0]), "save (train.py:50)");
}

TEST(StackTree, CountsRanksNotThreads) {
  // Rank 0's two threads share a prefix; the prefix counts it once.
  StackTree tree;
  tree.Add(Rank(0, {kMain, {"<module> (train.py:41)", "step (train.py:30)", "log (train.py:7)"}}));
  tree.Add(Rank(1, {kMain}));
  int step = ChildOf(tree, ChildOf(tree, StackTree::kRoot, "<module> (train.py:41)"), "step (train.py:30)");
  EXPECT_EQ(tree.node(step).ranks.size(), 2u);
  EXPECT_EQ(tree.node(ChildOf(tree, step, "log (train.py:7)")).ranks.ToString(), "0");
  std::vector<EquivalenceClass> classes = tree.EquivalenceClasses();
  ASSERT_EQ(classes.size(), 2u);
  EXPECT_EQ(classes[0].ranks.ToString(), "0");  // equal sizes: the lower rank first
  EXPECT_EQ(classes[1].ranks.ToString(), "1");
  // Of equal classes, the one with the lowest rank is the majority.
  std::vector<RankStack> none;
  std::vector<OddClass> odd = OddRanks(tree, none);
  ASSERT_EQ(odd.size(), 1u);
  EXPECT_EQ(odd[0].ranks.ToString(), "1");
  EXPECT_TRUE(odd[0].members.empty());
}

TEST(StackTree, ErrorRankIsALeafOfItsOwn) {
  std::vector<RankStack> ranks = {Rank(0, {kMain}), Rank(1, {kMain}), Rank(2, {}), Rank(3, {{}})};
  ranks[1].error = "stopped (state T): a stopped process cannot dump its stack";
  ranks[1].threads.clear();
  StackTree tree = StackTree::Build(ranks);
  EXPECT_EQ(tree.ranks().ToString(), "0-3");
  int stopped = ChildOf(tree, StackTree::kRoot,
                        "<no stack: stopped (state T): a stopped process cannot dump its stack>");
  ASSERT_GE(stopped, 0);
  EXPECT_EQ(tree.node(stopped).ranks.ToString(), "1");
  EXPECT_EQ(tree.node(stopped).ends.ToString(), "1");
  int empty = ChildOf(tree, StackTree::kRoot, kEmptyStack);
  ASSERT_GE(empty, 0);
  EXPECT_EQ(tree.node(empty).ranks.ToString(), "2-3");  // no thread, or threads without frames
  EXPECT_EQ(LeafFrame(ranks[1]), "<no stack: stopped (state T): a stopped process cannot dump its stack>");
  EXPECT_EQ(LeafFrame(ranks[2]), kEmptyStack);
  // An error wins over threads the caller left in.
  RankStack both = Rank(7, {kMain});
  both.error = "timed out";
  StackTree one;
  one.Add(both);
  EXPECT_EQ(one.size(), 2u);
  EXPECT_EQ(one.label(1), "<no stack: timed out>");
}

TEST(StackTree, OutOfOrderAddsGiveTheSameTree) {
  std::vector<RankStack> ranks = FourRanksThreeDiverges();
  StackTree built = StackTree::Build(ranks);
  StackTree reversed;
  for (size_t i = ranks.size(); i-- > 0;) reversed.Add(ranks[i]);
  int a = ChildOf(built, StackTree::kRoot, "<module> (train.py:41)");
  int b = ChildOf(reversed, StackTree::kRoot, "<module> (train.py:41)");
  EXPECT_EQ(built.node(ChildOf(built, a, "step (train.py:30)")).ranks,
            reversed.node(ChildOf(reversed, b, "step (train.py:30)")).ranks);
  EXPECT_EQ(reversed.ranks().ToString(), "0-3");
}

TEST(StackTree, MergeOfPartialTreesEqualsOneTree) {
  std::vector<RankStack> ranks = FourRanksThreeDiverges();
  StackTree whole = StackTree::Build(ranks);
  StackTree low, high;
  low.Add(ranks[0]);
  low.Add(ranks[3]);
  high.Add(ranks[1]);
  high.Add(ranks[2]);
  low.Merge(high);
  ASSERT_EQ(low.size(), whole.size());
  EXPECT_EQ(low.ranks().ToString(), "0-3");
  int module = ChildOf(low, StackTree::kRoot, "<module> (train.py:41)");
  EXPECT_EQ(low.node(ChildOf(low, module, "step (train.py:30)")).ranks.ToString(), "0-2");
  std::vector<EquivalenceClass> classes = low.EquivalenceClasses();
  ASSERT_EQ(classes.size(), 2u);
  EXPECT_EQ(classes[0].ranks.ToString(), "3");
  EXPECT_EQ(classes[1].ranks.ToString(), "0-2");
}

TEST(StackTree, ParsedDumpsMerge) {
  // Two processes print different thread ids and addresses; their call sites are equal.
  auto dump = [](const std::string& id, const std::string& addr) {
    return "Thread " + addr + " (LWP " + id + "):\n#0  " + addr + " in poll () from /lib/libc.so.6\n#1  " +
           addr + " in wait_all (n=" + id + ") at w.c:12\n#2  " + addr + " in main () at m.c:3\n";
  };
  RankStack a, b;
  a.threads = ParseGdbBacktrace(dump("11", "0x7f01"));
  b.rank = 1;
  b.threads = ParseGdbBacktrace(dump("22", "0x7f99"));
  StackTree tree;
  tree.Add(a);
  tree.Add(b);
  EXPECT_EQ(tree.size(), 4u);
  EXPECT_EQ(tree.node(3).ranks.ToString(), "0-1");
  EXPECT_EQ(tree.label(3), "poll (libc.so.6)");
}

}  // namespace
}  // namespace distrun
