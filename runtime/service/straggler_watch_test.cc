#include "runtime/service/straggler_watch.h"

#include <gtest/gtest.h>

namespace distrun {
namespace {

std::vector<RankSections> Window(std::vector<double> fwd_medians) {
  std::vector<RankSections> ranks;
  for (size_t r = 0; r < fwd_medians.size(); ++r) {
    ranks.push_back({static_cast<int>(r), "node" + std::to_string(r / 2), {{"fwd", fwd_medians[r]}}});
  }
  return ranks;
}

TEST(StragglerWatch, ScoreIsTheFastestMedianOverTheRanksOwn) {
  StragglerWatch watch;
  EXPECT_TRUE(watch.Evaluate(Window({0.1, 0.1, 0.2, 0.125})).empty());
  EXPECT_DOUBLE_EQ(watch.scores().at(0).score, 1.0);
  EXPECT_DOUBLE_EQ(watch.scores().at(2).score, 0.5);
  EXPECT_DOUBLE_EQ(watch.scores().at(3).score, 0.8);
  EXPECT_EQ(watch.scores().at(2).section, "fwd");
  EXPECT_DOUBLE_EQ(watch.scores().at(2).fastest_median_s, 0.1);
}

TEST(StragglerWatch, SlowForSeveralWindowsIsAStragglerOnceAndRecoversOnce) {
  StragglerWatch watch({0.75, 3});
  EXPECT_TRUE(watch.Evaluate(Window({0.1, 0.2, 0.1})).empty());
  EXPECT_TRUE(watch.Evaluate(Window({0.1, 0.2, 0.1})).empty());
  std::vector<StragglerEvent> events = watch.Evaluate(Window({0.1, 0.2, 0.1}));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, StragglerEvent::Kind::kStraggler);
  EXPECT_EQ(events[0].rank, 1);
  EXPECT_EQ(
      DescribeStragglerEvent(events[0]),
      "rank 1 (node0) is a straggler: score 0.50 in section fwd (median 0.200 s; fastest rank 0.100 s)");
  EXPECT_EQ(watch.stragglers(), 1);
  EXPECT_TRUE(watch.Evaluate(Window({0.1, 0.2, 0.1})).empty());  // said once
  EXPECT_TRUE(watch.Evaluate(Window({0.1, 0.1, 0.1})).empty());
  EXPECT_TRUE(watch.Evaluate(Window({0.1, 0.1, 0.1})).empty());
  events = watch.Evaluate(Window({0.1, 0.1, 0.1}));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, StragglerEvent::Kind::kRecovered);
  EXPECT_EQ(watch.stragglers(), 0);
}

TEST(StragglerWatch, AOneOffStallIsNotAStraggler) {
  StragglerWatch watch({0.75, 3});
  for (int w = 0; w < 10; ++w) {
    const bool stall = w == 4;
    EXPECT_TRUE(watch.Evaluate(Window({0.1, stall ? 0.5 : 0.1, 0.1})).empty()) << w;
  }
}

TEST(StragglerWatch, TheWorstSectionDecidesAndRanksWithoutSectionsAreLeftOut) {
  StragglerWatch watch({0.75, 1});
  std::vector<RankSections> ranks = {
      {0, "a", {{"fwd", 0.1}, {"bwd", 0.2}}}, {1, "b", {{"fwd", 0.1}, {"bwd", 0.4}}}, {2, "c", {}}};
  std::vector<StragglerEvent> events = watch.Evaluate(ranks);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].score.section, "bwd");
  EXPECT_DOUBLE_EQ(events[0].score.score, 0.5);
  EXPECT_FALSE(watch.scores().contains(2));
}

}  // namespace
}  // namespace distrun
