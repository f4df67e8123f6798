// The standby between the coordinator's loss and its decision: votes of agents, the window, a second loss,
// per-task nodes, and the decision it hands to the service. In process, with a fake clock.
#include "runtime/service/standby_coordinator.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace distrun {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Outcome = StandbyCoordinator::Outcome;

const Clock::time_point kStart = Clock::time_point{} + 1000s;

// The copy a standby holds of a job of `agents` agents in epoch 0 (per-task: `node_of` groups them).
ServiceSnapshot CopyOf(int agents, ElasticRange range, std::vector<int> node_of = {}) {
  Membership m(agents, range, !node_of.empty());
  if (!node_of.empty()) m.SetGroups(node_of);
  ServiceSnapshot s;
  s.num_nodes = agents;
  s.run_id = "run1";
  s.worker_token = "w";
  s.membership = m.State();
  for (int a = 0; a < agents; ++a) s.hosts.push_back(std::string("host-") + static_cast<char>('a' + a));
  s.job_keys["job/step"] = "42";
  return s;
}

TEST(StandbyCoordinator, AMajorityMakesItTakeOverAtOnceOnceEveryoneCame) {
  const ElasticRange range{2, 4, ElasticPolicy::kResize};
  StandbyCoordinator standby(CopyOf(4, range), 1, 10s, kStart);
  EXPECT_FALSE(standby.Reached(0));  // the lost coordinator has no vote
  EXPECT_TRUE(standby.Reached(2));
  EXPECT_EQ(standby.Tick(kStart + 1s), Outcome::kWaiting);  // node 3 may still come, within the window
  EXPECT_TRUE(standby.Reached(3));
  EXPECT_EQ(standby.Tick(kStart + 2s), Outcome::kTakeOver);  // everyone who can has come: at once
  EXPECT_FALSE(standby.Reached(3));                          // decided
  EXPECT_EQ(standby.decision().world, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(standby.decision().fenced, (std::vector<int>{0}));
}

TEST(StandbyCoordinator, WithoutAMajorityWithinTheWindowTheJobEndsNamingTheLostNodes) {
  const ElasticRange range{1, 4, ElasticPolicy::kResize};
  StandbyCoordinator standby(CopyOf(4, range), 1, 10s, kStart);
  EXPECT_TRUE(standby.Reached(2));
  EXPECT_EQ(standby.Tick(kStart + 19s), Outcome::kWaiting);
  // Two of four on this side: the other side may hold the other two, so neither goes on.
  EXPECT_EQ(standby.Tick(kStart + 20s), Outcome::kEnd);
  EXPECT_EQ(standby.end_message(),
            "node 0 (host-a), which hosted the job's coordinator, was lost, and its standby node 1 (host-b) "
            "cannot go on: only 2 of the last epoch's 4 nodes reached the standby within twice the "
            "heartbeat timeout (a majority is 3); lost: node 0 (host-a), node 3 (host-d)");
  EXPECT_EQ(standby.Tick(kStart + 30s), Outcome::kEnd);
}

TEST(StandbyCoordinator, ASecondLossDuringTheTakeoverEndsItAtOnce) {
  const ElasticRange range{1, 3, ElasticPolicy::kResize};
  StandbyCoordinator standby(CopyOf(3, range), 1, 10s, kStart);
  EXPECT_TRUE(standby.Reached(2));
  standby.Lost(2);
  EXPECT_FALSE(standby.Reached(2));  // lost for good
  EXPECT_EQ(standby.Tick(kStart + 1s), Outcome::kEnd);
  EXPECT_NE(standby.end_message().find("only 1 of the last epoch's 3 nodes are left"), std::string::npos)
      << standby.end_message();
}

TEST(StandbyCoordinator, BelowTheMinimumTheJobEnds) {
  const ElasticRange range{4, 4, ElasticPolicy::kResize};
  StandbyCoordinator standby(CopyOf(4, range), 1, 10s, kStart);
  standby.Reached(2);
  standby.Reached(3);
  EXPECT_EQ(standby.Tick(kStart + 1s), Outcome::kEnd);  // a majority, but three nodes of the four needed
  EXPECT_NE(standby.end_message().find(": 3 node(s) left, fewer than the 4 the job needs (--nnodes); lost: "
                                       "node 0 (host-a)"),
            std::string::npos)
      << standby.end_message();
}

TEST(StandbyCoordinator, PerTaskAgentsVoteAsTheirNode) {
  const ElasticRange range{1, 3, ElasticPolicy::kResize};
  // Three hosts of two tasks each; the standby is agent 2, the first of the second host.
  StandbyCoordinator standby(CopyOf(6, range, {0, 0, 1, 1, 2, 2}), 2, 10s, kStart);
  EXPECT_FALSE(standby.Reached(1));  // node 0's other agent: lost with its host
  EXPECT_TRUE(standby.Reached(3));   // the standby's own host
  EXPECT_EQ(standby.Tick(kStart + 1s), Outcome::kWaiting);
  EXPECT_TRUE(standby.Reached(5));
  EXPECT_EQ(standby.Tick(kStart + 1s), Outcome::kTakeOver);
  EXPECT_EQ(standby.decision().world, (std::vector<int>{1, 2}));  // nodes, not agents
}

TEST(StandbyCoordinator, ACopyThatDoesNotFitIsRefused) {
  const ElasticRange range{1, 3, ElasticPolicy::kResize};
  EXPECT_THROW(StandbyCoordinator(CopyOf(3, range), 0, 10s, kStart), std::invalid_argument);
  EXPECT_THROW(StandbyCoordinator(CopyOf(3, range), 7, 10s, kStart), std::invalid_argument);
  ServiceSnapshot broken = CopyOf(3, range);
  broken.membership.seated = {0, 0};
  EXPECT_THROW(StandbyCoordinator(broken, 1, 10s, kStart), std::invalid_argument);
}

}  // namespace
}  // namespace distrun
