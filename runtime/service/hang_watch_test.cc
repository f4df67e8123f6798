#include "runtime/service/hang_watch.h"

#include <gtest/gtest.h>

namespace distrun {
namespace {

using namespace std::chrono_literals;
using Clock = HangWatch::Clock;

RankProgress Rank(int rank, int64_t step, int64_t advanced_ms_ago, int pid = 0) {
  RankProgress r;
  r.rank = rank;
  r.step = step;
  r.advanced_ms_ago = advanced_ms_ago;
  r.reported_ms_ago = advanced_ms_ago;
  r.pid = pid;
  return r;
}

NodeProgress Node(std::vector<RankProgress> ranks, int64_t slowest_ms = 0) {
  NodeProgress p;
  p.ranks = std::move(ranks);
  p.slowest_interval_ms = slowest_ms;
  p.workers = static_cast<int>(p.ranks.size());
  return p;
}

class HangWatchTest : public ::testing::Test {
 protected:
  Clock::time_point t0 = Clock::time_point{} + 1000s;
};

TEST_F(HangWatchTest, UnarmedUntilARankReports) {
  HangWatch w({});
  EXPECT_FALSE(w.Timeout());
  w.Update(0, Node({}), t0);  // a node whose workers never reported
  EXPECT_FALSE(w.Timeout());
  EXPECT_FALSE(w.Check(t0 + 24h));
}

TEST_F(HangWatchTest, TheLeastAdvancedRankStuckForTheTimeoutIsAHang) {
  HangWatchConfig c;
  c.timeout = 5s;
  HangWatch w(c);
  w.Update(0, Node({Rank(0, 10, 0), Rank(1, 10, 0)}), t0);
  w.Update(1, Node({Rank(2, 9, 1000, 4242), Rank(3, 10, 0)}), t0);
  EXPECT_FALSE(w.Check(t0 + 3s));  // rank 2: 4 s
  std::optional<HangVerdict> v = w.Check(t0 + 4s);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->stuck_for, 5s);
  EXPECT_EQ(v->step, 9);
  EXPECT_EQ(v->median_step, 10);
  ASSERT_EQ(v->slowest.size(), 1u);
  EXPECT_EQ(v->slowest[0].first, 1);
  EXPECT_EQ(v->slowest[0].second.rank, 2);
  EXPECT_EQ(
      DescribeHang(*v, {"node 0 (a)", "node 1 (b)"}),
      "hung: no progress for 5.0s (--hang-timeout 5s); least advanced: rank 2 (node 1 (b), pid 4242) at "
      "step 9 (median 10)");
  // The rank moves again: no hang.
  w.Update(1, Node({Rank(2, 10, 0), Rank(3, 10, 0)}), t0 + 4s);
  EXPECT_FALSE(w.Check(t0 + 6s));
}

TEST_F(HangWatchTest, AmongTheLeastAdvancedTheOneThatMovedLastDecides) {
  HangWatchConfig c;
  c.timeout = 5s;
  HangWatch w(c);
  w.Update(0, Node({Rank(0, 3, 9000), Rank(1, 3, 1000)}), t0);
  EXPECT_FALSE(w.Check(t0 + 3s));
  std::optional<HangVerdict> v = w.Check(t0 + 4s);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->behind, 2);
  EXPECT_EQ(v->slowest[0].second.rank, 0);  // longest stuck first
  EXPECT_EQ(DescribeHang(*v, {}),
            "hung: no progress for 5.0s (--hang-timeout 5s); every rank reported step 3 last");
}

TEST_F(HangWatchTest, AnOverdueNodesRanksAreLeftOutUntilItReportsAgain) {
  HangWatchConfig c;
  c.timeout = 1s;
  c.staleness = 1350ms;
  c.overdue = 2350ms;
  HangWatch w(c);
  // A node that reports at every heartbeat is judged on what it says, aged between its reports.
  w.Update(0, Node({Rank(0, 7, 1500)}), t0);
  EXPECT_FALSE(w.Check(t0 + 800ms));
  ASSERT_TRUE(w.Check(t0 + 900ms));  // 2.4 s without a move, its report 0.9 s old
  // A healthy rank's node that went silent for 3 s (its distrun, or node 0's, frozen): its last report
  // aged past the timeout through time nobody looked. Not a hang.
  w.Update(0, Node({Rank(0, 8, 50)}), t0 + 1s);
  EXPECT_FALSE(w.Check(t0 + 4s));
  // Back, with a rank that has moved meanwhile: still none.
  w.Update(0, Node({Rank(0, 60, 20)}), t0 + 4100ms);
  EXPECT_FALSE(w.Check(t0 + 4200ms));
  // Back, saying itself that the rank has not moved: judged at once.
  w.Update(0, Node({Rank(0, 60, 3000)}), t0 + 7s);
  EXPECT_TRUE(w.Check(t0 + 7s));
  // Every report shows up in status, overdue or not.
  EXPECT_EQ(w.Ranks(t0 + 1h).size(), 1u);
}

TEST_F(HangWatchTest, AnOverdueNodeCoversNoHangElsewhere) {
  HangWatchConfig c;
  c.timeout = 5s;
  c.overdue = 2s;
  HangWatch w(c);
  w.Update(0, Node({Rank(0, 3, 0)}), t0);  // falls silent at step 3
  w.Update(1, Node({Rank(1, 9, 0), Rank(2, 10, 0)}), t0);
  w.Update(1, Node({Rank(1, 9, 5000, 77), Rank(2, 10, 100)}), t0 + 5s);
  std::optional<HangVerdict> v = w.Check(t0 + 6s);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->step, 9);  // rank 0's older step 3 is not the least advanced any more: unknown
  EXPECT_EQ(v->ranks, 2);
  ASSERT_EQ(v->slowest.size(), 1u);
  EXPECT_EQ(v->slowest[0].second.rank, 1);
}

TEST_F(HangWatchTest, TheLearnedTimeoutIsFiveSlowestIntervalsAndNeverBelowTheFloor) {
  HangWatch w({});
  w.Update(0, Node({Rank(0, 1, 0)}, 0), t0);
  bool learned = false;
  EXPECT_EQ(w.Timeout(&learned), 600s);  // warm-up: not learned yet
  EXPECT_TRUE(learned);
  w.Update(0, Node({Rank(0, 1, 0)}, 2000), t0);
  w.Update(1, Node({Rank(1, 1, 0)}, 30'000), t0);
  EXPECT_EQ(w.Timeout(), 150s);
  w.Update(1, Node({Rank(1, 1, 0)}, 100), t0);
  EXPECT_EQ(w.Timeout(), 60s);  // the floor
  HangWatchConfig off;
  off.off = true;
  HangWatch none(off);
  none.Update(0, Node({Rank(0, 1, 0)}, 100), t0);
  EXPECT_FALSE(none.Timeout());
  EXPECT_FALSE(none.Check(t0 + 24h));
}

TEST_F(HangWatchTest, ForgetAndResetDropTheirRanks) {
  HangWatchConfig c;
  c.timeout = 1s;
  HangWatch w(c);
  w.Update(0, Node({Rank(0, 1, 0)}), t0);
  w.Update(1, Node({Rank(1, 1, 0)}), t0);
  w.Forget(1);
  EXPECT_EQ(w.Ranks(t0).size(), 1u);
  w.Reset();
  EXPECT_FALSE(w.Check(t0 + 1h));
}

TEST_F(HangWatchTest, AStallIsEveryNodeQuietWithoutProgressReports) {
  HangWatchConfig c;
  c.stall = 60s;
  HangWatch w(c);
  NodeProgress quiet;
  quiet.workers = 2;
  quiet.quiet_ms = 50'000;
  w.Update(0, quiet, t0);
  EXPECT_FALSE(w.Stalled({0, 1}, t0 + 20s));  // node 1 said nothing yet
  w.Update(1, quiet, t0);
  EXPECT_FALSE(w.Stalled({0, 1}, t0 + 5s));
  EXPECT_EQ(w.Stalled({0, 1}, t0 + 10s), 60s);
  NodeProgress busy = quiet;
  busy.quiet_ms = 0;
  w.Update(1, busy, t0 + 10s);
  EXPECT_FALSE(w.Stalled({0, 1}, t0 + 20s));
  // Progress reports mean the hang watch judges instead.
  NodeProgress reporting = quiet;
  reporting.ranks = {Rank(0, 1, 0)};
  w.Update(1, reporting, t0 + 10s);
  EXPECT_FALSE(w.Stalled({0, 1}, t0 + 100s));
}

}  // namespace
}  // namespace distrun
