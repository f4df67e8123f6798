#include "runtime/recovery/world_change.h"

#include <gtest/gtest.h>

namespace distrun {
namespace {

using Ranks = std::vector<int>;

TEST(WorldChange, TheFirstWorldIsAllNewWithNoSource) {
  WorldChange c = ComputeWorldChange({}, {{0, {0, 2}, {}}, {1, {2, 2}, {}}});
  EXPECT_EQ(c.source, -1);
  EXPECT_EQ(c.lost, Ranks{});
  EXPECT_EQ(c.joined, (Ranks{0, 1, 2, 3}));
}

TEST(WorldChange, ASpareTakesALostNodesSeat) {
  // Agents 0, 1, 2 of two workers each; agent 1 lost, agent 3 (a spare) takes its seat and ranks.
  std::map<int, AgentRanks> before{{0, {0, 2}}, {1, {2, 2}}, {2, {4, 2}}};
  WorldChange c = ComputeWorldChange(before, {{0, {0, 2}, {}}, {3, {2, 2}, {}}, {2, {4, 2}, {}}});
  EXPECT_EQ(c.source, 0);
  EXPECT_EQ(c.lost, (Ranks{2, 3}));
  EXPECT_EQ(c.joined, (Ranks{2, 3}));
}

TEST(WorldChange, ResizeRenumbersTheSurvivors) {
  std::map<int, AgentRanks> before{{0, {0, 1}}, {1, {1, 1}}, {2, {2, 1}}};
  WorldChange c = ComputeWorldChange(before, {{0, {0, 1}, {}}, {2, {1, 1}, {}}});
  EXPECT_EQ(c.source, 0);
  EXPECT_EQ(c.lost, Ranks{1});
  EXPECT_EQ(c.joined, Ranks{});
}

TEST(WorldChange, AWorkerStartedAgainIsLostAndJoinedAtItsRank) {
  std::map<int, AgentRanks> before{{0, {0, 2}}, {1, {2, 2}}};
  WorldChange c = ComputeWorldChange(before, {{0, {0, 2}, {0}}, {1, {2, 2}, {}}});
  EXPECT_EQ(c.source, 1);  // rank 0's process is new: the lowest rank that kept its state
  EXPECT_EQ(c.lost, Ranks{0});
  EXPECT_EQ(c.joined, Ranks{0});
}

TEST(WorldChange, NodeZeroLostMovesTheSourceToTheLowestSurvivor) {
  std::map<int, AgentRanks> before{{0, {0, 2}}, {1, {2, 2}}, {2, {4, 2}}};
  // The standby (agent 1) took over; agent 2 is node 1 now, at ranks 2-3; agent 1 at 0-1.
  WorldChange c = ComputeWorldChange(before, {{1, {0, 2}, {}}, {2, {2, 2}, {1}}});
  EXPECT_EQ(c.source, 0);
  EXPECT_EQ(c.lost, (Ranks{0, 1, 5}));
  EXPECT_EQ(c.joined, Ranks{3});
}

TEST(WorldChange, NoSurvivorMeansNoSource) {
  std::map<int, AgentRanks> before{{0, {0, 1}}};
  WorldChange c = ComputeWorldChange(before, {{0, {0, 1}, {0}}});
  EXPECT_EQ(c.source, -1);
  EXPECT_EQ(c.lost, Ranks{0});
  EXPECT_EQ(c.joined, Ranks{0});
}

TEST(WorldChange, AChangedWorkerCountLosesOrJoinsTheDifference) {
  std::map<int, AgentRanks> before{{0, {0, 3}}};
  EXPECT_EQ(ComputeWorldChange(before, {{0, {0, 2}, {}}}).lost, Ranks{2});
  EXPECT_EQ(ComputeWorldChange({{0, {0, 1}}}, {{0, {0, 2}, {}}}).joined, Ranks{1});
}

TEST(WorldChange, TenThousandAgentsOneLost) {
  std::map<int, AgentRanks> before;
  std::vector<NextAgent> next;
  for (int a = 0; a < 10'000; ++a) {
    before[a] = {a * 8, 8};
    if (a != 4'321) next.push_back({a, {static_cast<int>(next.size()) * 8, 8}, {}});
  }
  next.push_back({10'000, {static_cast<int>(next.size()) * 8, 8}, {}});  // a spare, last
  WorldChange c = ComputeWorldChange(before, next);
  EXPECT_EQ(c.source, 0);
  EXPECT_EQ(c.lost.size(), 8u);
  EXPECT_EQ(c.lost.front(), 4'321 * 8);
  EXPECT_EQ(c.joined, (Ranks{79'992, 79'993, 79'994, 79'995, 79'996, 79'997, 79'998, 79'999}));
}

}  // namespace
}  // namespace distrun
