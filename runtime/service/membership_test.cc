#include "runtime/service/membership.h"

#include <gtest/gtest.h>

#include <optional>
#include <stdexcept>
#include <vector>

namespace distrun {
namespace {

using Seats = std::vector<std::optional<int>>;

Seats SeatsOf(const Membership& m) {
  Seats out;
  for (int a = 0; a < m.agents(); ++a) out.push_back(m.seat(a));
  return out;
}

TEST(Membership, WithoutARangeAnyLossEndsTheJob) {
  Membership m(3, {3, 3, ElasticPolicy::kResize});
  EXPECT_EQ(SeatsOf(m), (Seats{0, 1, 2}));
  EXPECT_EQ(m.Lose(1), Membership::Loss::kTooFew);
  EXPECT_EQ(m.lost_agents(), std::vector<int>{1});
}

TEST(Membership, ResizeKeepsEveryLiveAgentInLaunchOrder) {
  Membership m(4, {2, 4, ElasticPolicy::kResize});
  EXPECT_EQ(m.world_nodes(), 4);
  EXPECT_EQ(m.Lose(1), Membership::Loss::kMemberLost);
  EXPECT_EQ(m.epoch(), 0);  // the caller decides when the next epoch begins
  EXPECT_EQ(m.world_nodes(), 3);
  EXPECT_EQ(SeatsOf(m), (Seats{0, std::nullopt, 1, 2}));
  m.NextEpoch();
  EXPECT_EQ(m.agent_in_seat(2), 3);
  EXPECT_EQ(m.Lose(1), Membership::Loss::kAlreadyLost);
  EXPECT_EQ(m.epoch(), 1);
  EXPECT_EQ(m.Lose(3), Membership::Loss::kMemberLost);
  EXPECT_EQ(SeatsOf(m), (Seats{0, std::nullopt, 1, std::nullopt}));
  EXPECT_EQ(m.Lose(2), Membership::Loss::kTooFew);  // 1 left of at least 2
  EXPECT_EQ(m.lost_agents(), (std::vector<int>{1, 3, 2}));
  EXPECT_EQ(m.live(), 1);
}

TEST(Membership, SparesHoldNoSeatUntilAMemberIsLost) {
  Membership m(5, {3, 5, ElasticPolicy::kSpares});
  EXPECT_EQ(m.world_nodes(), 3);
  EXPECT_EQ(SeatsOf(m), (Seats{0, 1, 2, std::nullopt, std::nullopt}));
  // A spare lost: nothing to restart.
  EXPECT_EQ(m.Lose(4), Membership::Loss::kSpare);
  EXPECT_EQ(m.epoch(), 0);
  // A member lost: the first spare takes its seat, the others keep theirs.
  EXPECT_EQ(m.Lose(1), Membership::Loss::kMemberLost);
  EXPECT_EQ(SeatsOf(m), (Seats{0, std::nullopt, 2, 1, std::nullopt}));
  EXPECT_EQ(m.agent_in_seat(1), 3);
  EXPECT_EQ(m.world_nodes(), 3);
  EXPECT_EQ(m.Lose(0), Membership::Loss::kTooFew);
}

TEST(Membership, ARestartKeepsTheSeats) {
  Membership m(3, {2, 3, ElasticPolicy::kSpares});
  m.NextEpoch();
  EXPECT_EQ(m.epoch(), 1);
  EXPECT_EQ(SeatsOf(m), (Seats{0, 1, std::nullopt}));
}

TEST(Membership, TheStartedAgentsMustFitTheRange) {
  EXPECT_THROW(Membership(1, {2, 3, ElasticPolicy::kResize}), std::invalid_argument);
  EXPECT_THROW(Membership(4, {2, 3, ElasticPolicy::kResize}), std::invalid_argument);
  EXPECT_THROW(Membership(2, {3, 2, ElasticPolicy::kResize}), std::invalid_argument);
  EXPECT_NO_THROW(Membership(2, {2, 3, ElasticPolicy::kSpares}));
}

TEST(Membership, SparesAdmitArrivalsAsSparesUpToTheMaximum) {
  Membership m(2, {2, 3, ElasticPolicy::kSpares});
  EXPECT_EQ(m.Admit(), 2);
  EXPECT_EQ(SeatsOf(m), (Seats{0, 1, std::nullopt}));
  EXPECT_EQ(m.Admit(), std::nullopt);  // 3 live: the range's maximum
  EXPECT_EQ(m.Lose(1), Membership::Loss::kMemberLost);
  EXPECT_EQ(SeatsOf(m), (Seats{0, std::nullopt, 1}));
  EXPECT_EQ(m.Admit(), 3);  // room again
  EXPECT_EQ(m.world_nodes(), 2);
}

TEST(Membership, ResizeNextRestartSeatsArrivalsInTheNextEpoch) {
  Membership m(2, {1, 4, ElasticPolicy::kResize, ScaleUp::kNextRestart});
  EXPECT_EQ(m.Admit(), 2);
  EXPECT_TRUE(m.waiting(2));
  EXPECT_EQ(m.world_nodes(), 2);
  m.NextEpoch();
  EXPECT_EQ(SeatsOf(m), (Seats{0, 1, 2}));
  EXPECT_FALSE(m.waiting(2));
  // Lost while waiting: nothing to restart.
  EXPECT_EQ(m.Admit(), 3);
  EXPECT_EQ(m.Lose(3), Membership::Loss::kSpare);
  EXPECT_FALSE(m.SeatArrivals());
}

TEST(Membership, ResizeNeverSeatsAnArrivalOnlyInALostMembersPlace) {
  Membership m(2, {2, 3, ElasticPolicy::kResize, ScaleUp::kNever});
  EXPECT_EQ(m.Admit(), 2);
  m.NextEpoch();
  EXPECT_FALSE(m.SeatArrivals());
  EXPECT_EQ(SeatsOf(m), (Seats{0, 1, std::nullopt}));
  EXPECT_EQ(m.Lose(0), Membership::Loss::kMemberLost);
  EXPECT_EQ(SeatsOf(m), (Seats{std::nullopt, 0, 1}));
  EXPECT_EQ(m.world_nodes(), 2);
}

TEST(Membership, AWaitingArrivalCountsTowardsTheMinimum) {
  Membership m(2, {2, 3, ElasticPolicy::kResize, ScaleUp::kNextRestart});
  EXPECT_EQ(m.Admit(), 2);
  EXPECT_EQ(m.Lose(1), Membership::Loss::kMemberLost);
  m.NextEpoch();
  EXPECT_EQ(SeatsOf(m), (Seats{0, std::nullopt, 1}));
}

TEST(Membership, PerTaskAgentsOnOneHostAreOneNode) {
  Membership m(6, {2, 3, ElasticPolicy::kSpares}, /*grouped_later=*/true);
  m.SetGroups({0, 0, 1, 1, 2, 2});
  EXPECT_EQ(m.live(), 3);
  EXPECT_EQ(m.live_agents(), 6);
  EXPECT_EQ(m.world_nodes(), 2);
  EXPECT_EQ(SeatsOf(m), (Seats{0, 1, 2, 3, std::nullopt, std::nullopt}));
  // One agent of host 1 lost: the host goes with it, and the spare host takes its place and ranks.
  EXPECT_EQ(m.Lose(3), Membership::Loss::kMemberLost);
  EXPECT_EQ(m.lost_agents(), (std::vector<int>{2, 3}));
  EXPECT_TRUE(m.lost(2));
  EXPECT_EQ(SeatsOf(m), (Seats{0, 1, std::nullopt, std::nullopt, 2, 3}));
  EXPECT_EQ(m.Lose(2), Membership::Loss::kAlreadyLost);
  EXPECT_EQ(m.live(), 2);
  EXPECT_EQ(m.live_agents(), 4);
  EXPECT_EQ(m.Lose(5), Membership::Loss::kTooFew);
}

TEST(Membership, PerTaskRangesCountHosts) {
  Membership m(8, {2, 3, ElasticPolicy::kResize}, /*grouped_later=*/true);
  EXPECT_THROW(m.SetGroups({0, 0, 1, 1, 2, 2, 3, 3}), std::invalid_argument);  // 4 hosts
  EXPECT_THROW(Membership(8, {2, 3, ElasticPolicy::kResize}), std::invalid_argument);
  Membership r(4, {2, 3, ElasticPolicy::kResize}, true);
  r.SetGroups({0, 1, 0, 1});  // cyclic placement
  EXPECT_EQ(SeatsOf(r), (Seats{0, 2, 1, 3}));
  EXPECT_EQ(r.node_of(2), 0);
}

}  // namespace
}  // namespace distrun
