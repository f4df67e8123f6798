#include "runtime/service/takeover.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace distrun {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Verdict = TakeoverDecision::Verdict;

const Clock::time_point kStart = Clock::time_point{} + 100s;

TakeoverConfig Config(std::vector<int> members, int min_nodes, std::vector<int> spares = {},
                      ElasticPolicy policy = ElasticPolicy::kResize) {
  TakeoverConfig c;
  c.members = std::move(members);
  c.spares = std::move(spares);
  c.lost_coordinator = 0;
  c.standby = 1;
  c.min_nodes = min_nodes;
  c.policy = policy;
  c.window = 3s;
  return c;
}

TEST(Takeover, MajorityCountsTheLostCoordinator) {
  EXPECT_FALSE(IsMajority(1, 2));  // two nodes cut in two: neither side goes on
  EXPECT_TRUE(IsMajority(2, 3));
  EXPECT_FALSE(IsMajority(2, 4));
  EXPECT_TRUE(IsMajority(3, 4));
  EXPECT_FALSE(IsMajority(0, 0));
}

TEST(Takeover, EveryMemberReachedTakesOverAtOnceAndFencesTheOldCoordinator) {
  Takeover t(Config({0, 1, 2, 3}, 2), kStart);
  EXPECT_EQ(t.Decide(kStart).verdict, Verdict::kWait);
  EXPECT_TRUE(t.Reached(3));
  EXPECT_EQ(t.Decide(kStart + 1ms).verdict, Verdict::kWait);  // node 2 may still come
  EXPECT_TRUE(t.Reached(2));
  TakeoverDecision d = t.Decide(kStart + 2ms);
  ASSERT_EQ(d.verdict, Verdict::kTakeOver);
  EXPECT_EQ(d.world, (std::vector<int>{1, 2, 3}));  // seat order kept
  EXPECT_EQ(d.fenced, (std::vector<int>{0}));
}

TEST(Takeover, AMajorityAtTheEndOfTheWindowTakesOverAndFencesWhoDidNotCome) {
  Takeover t(Config({0, 1, 2, 3, 4}, 2), kStart);
  t.Reached(4);
  t.Reached(3);
  EXPECT_EQ(t.votes(), 3);
  EXPECT_EQ(t.Decide(kStart + 2999ms).verdict, Verdict::kWait);  // node 2 may still come
  TakeoverDecision d = t.Decide(kStart + 3s);
  ASSERT_EQ(d.verdict, Verdict::kTakeOver);
  EXPECT_EQ(d.world, (std::vector<int>{1, 3, 4}));
  EXPECT_EQ(d.fenced, (std::vector<int>{0, 2}));
}

TEST(Takeover, WithoutAMajorityTheJobEndsNamingTheLostNodes) {
  // The standby alone may be the cut-off side: node 0 and the others could be going on without it.
  Takeover t(Config({0, 1, 2, 3}, 1), kStart);
  EXPECT_EQ(t.Decide(kStart + 1s).verdict, Verdict::kWait);
  EXPECT_EQ(t.Decide(kStart + 3s).verdict, Verdict::kWait);  // no majority yet: one more window
  EXPECT_EQ(t.Decide(kStart + 5999ms).verdict, Verdict::kWait);
  TakeoverDecision d = t.Decide(kStart + 6s);
  ASSERT_EQ(d.verdict, Verdict::kEnd);
  EXPECT_EQ(d.why,
            "only 1 of the last epoch's 4 nodes reached the standby within twice the heartbeat timeout "
            "(a majority is 3)");
  EXPECT_EQ(d.fenced, (std::vector<int>{0, 2, 3}));
}

TEST(Takeover, AMajorityThatComesInTheSecondWindowTakesOverAtOnce) {
  // Node 0's link drops packets: node 2 still hears it now and then, and loses it later than the standby.
  Takeover t(Config({0, 1, 2, 3}, 2), kStart);
  t.Reached(3);
  EXPECT_EQ(t.Decide(kStart + 3s).verdict, Verdict::kWait);  // 2 of 4: no majority yet
  t.Reached(2);
  TakeoverDecision d = t.Decide(kStart + 4s);
  ASSERT_EQ(d.verdict, Verdict::kTakeOver);
  EXPECT_EQ(d.world, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(d.fenced, (std::vector<int>{0}));
}

TEST(Takeover, ATwoNodeJobNeverTakesOver) {
  // Node 0 and node 1 cut apart look the same to each side: neither has a majority, so neither goes on.
  Takeover t(Config({0, 1}, 1), kStart);
  TakeoverDecision d = t.Decide(kStart);
  ASSERT_EQ(d.verdict, Verdict::kEnd);  // at once: nobody else can come
  EXPECT_EQ(d.fenced, (std::vector<int>{0}));
}

TEST(Takeover, ASecondLossThatLeavesNoMajorityEndsItAtOnce) {
  Takeover t(Config({0, 1, 2, 3, 4}, 1), kStart);
  t.Reached(2);
  t.Lost(3);
  EXPECT_EQ(t.Decide(kStart + 1ms).verdict, Verdict::kWait);  // 1, 2 and 4: still a majority possible
  t.Lost(4);
  TakeoverDecision d = t.Decide(kStart + 2ms);
  ASSERT_EQ(d.verdict, Verdict::kEnd);
  EXPECT_EQ(d.why, "only 2 of the last epoch's 5 nodes are left to reach the standby (a majority is 3)");
  EXPECT_EQ(d.fenced, (std::vector<int>{0, 3, 4}));
}

TEST(Takeover, ASecondLossThatLeavesAMajorityIsFencedWithTheOldCoordinator) {
  Takeover t(Config({0, 1, 2, 3, 4}, 1), kStart);
  t.Reached(4);
  t.Lost(4);  // reached, then lost: its vote goes with it
  EXPECT_FALSE(t.Reached(4));
  t.Reached(2);
  t.Reached(3);
  TakeoverDecision d = t.Decide(kStart + 1ms);
  ASSERT_EQ(d.verdict, Verdict::kTakeOver);
  EXPECT_EQ(d.world, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(d.fenced, (std::vector<int>{0, 4}));
}

TEST(Takeover, BelowMinTheJobEnds) {
  Takeover t(Config({0, 1, 2}, 3), kStart);
  t.Reached(2);
  TakeoverDecision d = t.Decide(kStart);
  ASSERT_EQ(d.verdict, Verdict::kEnd);
  EXPECT_EQ(d.why, "2 node(s) left, fewer than the 3 the job needs (--nnodes)");
  EXPECT_EQ(d.fenced, (std::vector<int>{0}));
}

TEST(Takeover, UnderSparesASpareTakesTheOldCoordinatorsSeat) {
  Takeover t(Config({0, 1, 2}, 3, {3, 4}, ElasticPolicy::kSpares), kStart);
  t.Reached(2);
  t.Reached(4);
  t.Reached(3);
  TakeoverDecision d = t.Decide(kStart);
  ASSERT_EQ(d.verdict, Verdict::kTakeOver);
  EXPECT_EQ(d.world, (std::vector<int>{3, 1, 2}));  // the first spare in seat 0; the others keep theirs
  EXPECT_EQ(d.spares, (std::vector<int>{4}));
  EXPECT_EQ(d.fenced, (std::vector<int>{0}));
}

TEST(Takeover, SparesDoNotVote) {
  Takeover t(Config({0, 1, 2}, 1, {3, 4}, ElasticPolicy::kSpares), kStart);
  t.Reached(3);
  t.Reached(4);
  EXPECT_EQ(t.votes(), 1);
  EXPECT_EQ(t.Decide(kStart + 3s).verdict, Verdict::kWait);  // node 2 may still make the majority
  TakeoverDecision d = t.Decide(kStart + 6s);
  ASSERT_EQ(d.verdict, Verdict::kEnd);
  EXPECT_EQ(d.fenced, (std::vector<int>{0, 2}));
}

TEST(Takeover, UnderResizeSparesStaySpares) {
  Takeover t(Config({0, 1, 2}, 2, {5}), kStart);
  t.Reached(2);
  t.Reached(5);
  TakeoverDecision d = t.Decide(kStart);
  ASSERT_EQ(d.verdict, Verdict::kTakeOver);
  EXPECT_EQ(d.world, (std::vector<int>{1, 2}));
  EXPECT_EQ(d.spares, (std::vector<int>{5}));
}

TEST(Takeover, TheOldCoordinatorAndStrangersAreNotCounted) {
  Takeover t(Config({0, 1, 2}, 1), kStart);
  EXPECT_FALSE(t.Reached(0));  // it comes back: it is fenced, whatever it says
  EXPECT_FALSE(t.Reached(9));
  EXPECT_TRUE(t.Reached(1));  // the standby itself, again
  EXPECT_EQ(t.votes(), 1);
}

TEST(Takeover, TheStandbyAndTheLostCoordinatorMustBeMembers) {
  TakeoverConfig c = Config({0, 1, 2}, 1);
  c.standby = 0;
  EXPECT_THROW(Takeover(c, kStart), std::invalid_argument);
  c.standby = 7;
  EXPECT_THROW(Takeover(c, kStart), std::invalid_argument);
  c.standby = 1;
  c.lost_coordinator = 5;
  EXPECT_THROW(Takeover(c, kStart), std::invalid_argument);
}

TEST(ChooseStandby, TheFirstSeatedNodeOnAnotherHost) {
  Membership m(4, {2, 4, ElasticPolicy::kResize});
  std::vector<std::string> hosts = {"a", "a", "b", "c"};
  auto host_of = [&](int agent) { return hosts[static_cast<size_t>(agent)]; };
  EXPECT_EQ(ChooseStandby(m, 0, host_of), 2);  // node 1 shares node 0's host
  ASSERT_EQ(m.Lose(2), Membership::Loss::kMemberLost);
  EXPECT_EQ(ChooseStandby(m, 0, host_of), 3);
  ASSERT_EQ(m.Lose(3), Membership::Loss::kMemberLost);
  EXPECT_EQ(ChooseStandby(m, 0, host_of), 1);  // only the host's own host is left: better than none
  hosts = {"", "", "", ""};                    // hosts not known yet: the first other seated node
  EXPECT_EQ(ChooseStandby(m, 0, host_of), 1);
  EXPECT_EQ(ChooseStandby(m, 1, host_of), 0);  // a standby that took over hosts the service now
}

TEST(ChooseStandby, ASpareWhenNoOtherNodeIsSeatedAndNoneForOneNode) {
  Membership m(2, {1, 2, ElasticPolicy::kSpares});
  auto host_of = [](int agent) { return "host-" + std::to_string(agent); };
  EXPECT_EQ(ChooseStandby(m, 0, host_of), 1);  // the spare
  ASSERT_EQ(m.Lose(1), Membership::Loss::kSpare);
  EXPECT_EQ(ChooseStandby(m, 0, host_of), std::nullopt);
}

TEST(ChooseStandby, PerTaskJobsChooseANodesFirstAgent) {
  Membership m(6, {2, 3, ElasticPolicy::kResize}, /*grouped_later=*/true);
  m.SetGroups({0, 0, 1, 1, 2, 2});
  auto host_of = [](int agent) { return "host-" + std::to_string(agent / 2); };
  EXPECT_EQ(ChooseStandby(m, 1, host_of), 2);
  ASSERT_EQ(m.Lose(3), Membership::Loss::kMemberLost);
  EXPECT_EQ(ChooseStandby(m, 0, host_of), 4);
}

}  // namespace
}  // namespace distrun
