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

// What a standby holds is the whole membership: rebuilt from its state, it seats, loses and admits as the
// original does.
void ExpectSame(const Membership& a, const Membership& b) {
  EXPECT_EQ(a.State(), b.State());
  EXPECT_EQ(SeatsOf(a), SeatsOf(b));
  EXPECT_EQ(a.live(), b.live());
  EXPECT_EQ(a.live_agents(), b.live_agents());
  EXPECT_EQ(a.world_nodes(), b.world_nodes());
  EXPECT_EQ(a.world_agents(), b.world_agents());
  EXPECT_EQ(a.waiting_count(), b.waiting_count());
  EXPECT_EQ(a.lost_agents(), b.lost_agents());
  for (int s = 0; s < a.world_agents(); ++s) EXPECT_EQ(a.agent_in_seat(s), b.agent_in_seat(s));
}

TEST(Membership, RebuiltFromItsStateItGoesOnAsTheOriginal) {
  for (ElasticPolicy policy : {ElasticPolicy::kResize, ElasticPolicy::kSpares}) {
    SCOPED_TRACE(ElasticPolicyName(policy));
    Membership m(6, {2, 5, policy, ScaleUp::kNextRestart}, /*grouped_later=*/true);
    m.SetGroups({0, 0, 1, 2, 2, 3});                      // four hosts, per-task agents
    ASSERT_EQ(m.Lose(2), Membership::Loss::kMemberLost);  // node 1
    m.NextEpoch();
    ASSERT_TRUE(m.Admit());
    Membership copy = Membership::FromState(m.State());
    ExpectSame(m, copy);
    // Both go on alike: another loss, the next epoch, an arrival.
    EXPECT_EQ(m.Lose(4), copy.Lose(4));  // node 2
    m.NextEpoch();
    copy.NextEpoch();
    EXPECT_EQ(m.Admit(), copy.Admit());
    ExpectSame(m, copy);
    EXPECT_EQ(m.Lose(0), copy.Lose(1));  // the same node, through its other agent
    ExpectSame(m, copy);
  }
}

TEST(Membership, AStateThatCannotBeIsRefused) {
  Membership m(3, {2, 3, ElasticPolicy::kSpares});
  ASSERT_EQ(m.Lose(1), Membership::Loss::kMemberLost);
  const MembershipState good = m.State();
  ExpectSame(m, Membership::FromState(good));
  auto refused = [](MembershipState s) { EXPECT_THROW(Membership::FromState(s), std::invalid_argument); };
  MembershipState s = good;
  s.node_of = {0, 2, 1};  // out of order
  refused(s);
  s = good;
  s.lost.pop_back();
  refused(s);
  s = good;
  s.seated = {0, 0};  // a seat held twice
  refused(s);
  s = good;
  s.seated = {0, 7};
  refused(s);
  s = good;
  s.seated = {0, 2, 1};  // three seats under spares with two
  refused(s);
  s = good;
  s.lost_order = {2};  // not lost
  refused(s);
  s = good;
  s.range.max_nodes = 0;
  refused(s);
  s = good;
  s.node_of.clear();
  s.lost.clear();
  s.waiting.clear();
  s.seated.clear();
  s.lost_order.clear();
  refused(s);
}

}  // namespace
}  // namespace distrun
