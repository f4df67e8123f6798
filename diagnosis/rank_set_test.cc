#include "diagnosis/rank_set.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

namespace distrun {
namespace {

RankSet Of(std::initializer_list<int> ranks) {
  RankSet s;
  for (int r : ranks) s.Add(r);
  return s;
}

TEST(RankSet, RendersRangesAndSingletons) {
  EXPECT_EQ(Of({0, 1, 2, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}).ToString(), "0-2,4,6-15");
  EXPECT_EQ(Of({3}).ToString(), "3");
  EXPECT_EQ(Of({3, 4}).ToString(), "3-4");
  EXPECT_EQ(RankSet().ToString(), "");
  RankSet s = Of({0, 1, 2, 4, 6, 7});
  EXPECT_EQ(s.size(), 6u);
  EXPECT_EQ(s.ranges().size(), 3u);
  EXPECT_EQ(s.first(), 0);
}

TEST(RankSet, AscendingAddsAppendOrExtend) {
  RankSet s;
  for (int r = 0; r < 1000; ++r) {
    if (r % 100 != 50) s.Add(r);
  }
  s.Add(999);  // again: nothing changes
  EXPECT_EQ(s.size(), 990u);
  EXPECT_EQ(s.ranges().size(), 11u);
  EXPECT_TRUE(s.Contains(49));
  EXPECT_FALSE(s.Contains(150));
  EXPECT_FALSE(s.Contains(1000));
  EXPECT_FALSE(s.Contains(-1));
}

TEST(RankSet, OutOfOrderAddsFoldNeighbours) {
  RankSet s = Of({10, 2, 6, 4, 3, 5, 0, 11, 12, 1});
  EXPECT_EQ(s.ToString(), "0-6,10-12");
  EXPECT_EQ(s.size(), 10u);
  s.Add(8);
  EXPECT_EQ(s.ToString(), "0-6,8,10-12");
  s.Add(7);
  s.Add(9);
  EXPECT_EQ(s.ToString(), "0-12");
  EXPECT_EQ(s.size(), 13u);
  s.AddRange(20, 25);
  s.AddRange(14, 30);
  s.AddRange(-3, -1);
  EXPECT_EQ(s.ToString(), "-3-12,14-30");
  EXPECT_EQ(s.size(), 3u + 13u + 17u);
}

TEST(RankSet, RandomOrderMatchesAStdSet) {
  std::mt19937 rng(7);
  std::vector<int> ranks(500);
  for (int i = 0; i < 500; ++i) ranks[static_cast<size_t>(i)] = i * 3 % 701;
  std::shuffle(ranks.begin(), ranks.end(), rng);
  RankSet s;
  std::set<int> want;
  for (int r : ranks) {
    s.Add(r);
    want.insert(r);
  }
  EXPECT_EQ(s.size(), want.size());
  for (int r = -1; r < 705; ++r) EXPECT_EQ(s.Contains(r), want.count(r) == 1) << r;
  for (size_t i = 1; i < s.ranges().size(); ++i) {
    EXPECT_GT(s.ranges()[i].lo, s.ranges()[i - 1].hi + 1);  // disjoint and not adjacent
  }
}

TEST(RankSet, MergeIsTheUnion) {
  RankSet a = Of({0, 1, 2, 8, 9});
  a.Merge(Of({3, 5, 7, 20}));
  EXPECT_EQ(a.ToString(), "0-3,5,7-9,20");
  EXPECT_EQ(a.size(), 9u);
  RankSet b = Of({1, 2});
  b.Merge(Of({5, 6}));  // past the end: appended
  EXPECT_EQ(b.ToString(), "1-2,5-6");
  b.Merge(RankSet());
  EXPECT_EQ(b.ToString(), "1-2,5-6");
  RankSet c;
  c.Merge(b);
  EXPECT_EQ(c, b);
  c.Merge(Of({0, 3, 4}));
  EXPECT_EQ(c.ToString(), "0-6");
  EXPECT_EQ(c.size(), 7u);
}

TEST(RankSet, ToStringStopsAtWholeItems) {
  RankSet s = Of({0, 2, 4, 6, 8, 10});
  EXPECT_EQ(s.ToString(6), "0,2,4,...");  // at most 6 characters before ",..."
  EXPECT_EQ(s.ToString(7), "0,2,4,6,...");
  EXPECT_EQ(s.ToString(0), "0,...");  // at least one item
}

TEST(RankSet, ParseIsTheInverseOfToString) {
  auto s = RankSet::Parse("0-2, 4,6-15");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->ToString(), "0-2,4,6-15");
  EXPECT_EQ(s->size(), 14u);
  EXPECT_EQ(RankSet::Parse("")->size(), 0u);
  EXPECT_EQ(RankSet::Parse("5,1")->ToString(), "1,5");
  EXPECT_FALSE(RankSet::Parse("3-1"));
  EXPECT_FALSE(RankSet::Parse("a"));
  EXPECT_FALSE(RankSet::Parse("1,,2"));
  EXPECT_FALSE(RankSet::Parse("1-"));
}

}  // namespace
}  // namespace distrun
