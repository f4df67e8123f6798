#include "runtime/recovery/recovery_ledger.h"

#include <gtest/gtest.h>

namespace distrun {
namespace {

using namespace std::chrono_literals;
using Clock = RecoveryLedger::Clock;

NodeRecovery Report(int generation, int64_t ready, int64_t up, int64_t first_step) {
  return NodeRecovery{generation, 0, ready, ready + 1, up, first_step};
}

TEST(RecoveryLedger, ARecoveryCompletesWhenEveryNodeStepped) {
  const Clock::time_point t0{};
  RecoveryLedger ledger(t0);
  ledger.Began(1, true, "node 1 (host-b): node lost: its distrun disconnected", t0 + 10s);
  ledger.Agreed(1, WorldChange{0, {2, 3}, {2, 3}}, {0, 2}, t0 + 10s + 40ms);
  EXPECT_FALSE(ledger.Reported(0, Report(1, 30, 60, -1)));  // no first step yet
  EXPECT_FALSE(ledger.Reported(2, Report(1, 5, 70, 90)));
  EXPECT_FALSE(ledger.Reported(7, Report(1, 5, 70, 90)));  // not a node of its world
  std::optional<RecoveryRecord> done = ledger.Reported(0, Report(1, 30, 60, 95));
  ASSERT_TRUE(done);
  EXPECT_TRUE(done->complete);
  EXPECT_EQ(done->decided_ms, 10'000);
  EXPECT_EQ(done->phases, (RecoveryPhases{0, 30, 40, 70, 95}));
  EXPECT_EQ(
      DescribeRecovery(*done),
      "generation 1 recovered in place in 0.095 s: node 1 (host-b): node lost: its distrun disconnected; "
      "lost rank(s) 2-3, new processes at rank(s) 2-3, state from rank 0; decided → notified 0 ms → ready "
      "30 ms → agreed 40 ms → group up 70 ms → first step 95 ms");
  EXPECT_EQ(ledger.count(true), 1u);
  EXPECT_EQ(ledger.records().size(), 1u);
}

TEST(RecoveryLedger, WithoutReportsItCompletesAfterTheWaitWithWhatItHas) {
  const Clock::time_point t0{};
  RecoveryLedger ledger(t0);
  ledger.Began(2, true, "rank 3 on node 1 (host-b): exit code 1", t0);
  ledger.Agreed(2, WorldChange{0, {3}, {3}}, {0, 1}, t0 + 5ms);
  ledger.Reported(0, Report(2, 3, 20, -1));  // its workers report no progress
  EXPECT_TRUE(ledger.Expire(t0 + 59s, 60s).empty());
  std::vector<RecoveryRecord> done = ledger.Expire(t0 + 61s, 60s);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].phases, (RecoveryPhases{0, 3, 5, 20, -1}));
  EXPECT_EQ(DescribeRecovery(done[0]).substr(0, 44), "generation 2 recovered in place in 0.020 s: ");
}

TEST(RecoveryLedger, ARestartIsCountedAndCompleteWhenAgreed) {
  const Clock::time_point t0{};
  RecoveryLedger ledger(t0);
  ledger.Began(1, false, "rank 0 on node 0 (host-a): exit code 1", t0);
  ledger.Agreed(1, {}, {}, t0 + 12ms);
  ASSERT_EQ(ledger.records().size(), 1u);
  EXPECT_TRUE(ledger.records().front().complete);
  EXPECT_EQ(ledger.records().front().phases.agreed, 12);
  EXPECT_EQ(ledger.count(false), 1u);
  EXPECT_EQ(ledger.count(true), 0u);
}

TEST(RecoveryLedger, ANewerGenerationEndsTheWaitOfAnOlderOne) {
  const Clock::time_point t0{};
  RecoveryLedger ledger(t0);
  ledger.Began(1, true, "a", t0);
  ledger.Agreed(1, {}, {0, 1}, t0 + 1ms);
  ledger.Began(2, true, "b", t0 + 2ms);
  EXPECT_TRUE(ledger.records().front().complete);
  EXPECT_FALSE(ledger.Reported(0, Report(1, 1, 2, 3)));  // too late: generation 1 is over
  ledger.Agreed(2, {}, {0}, t0 + 3ms);
  EXPECT_TRUE(ledger.Reported(0, Report(2, 1, 2, 3)));
}

TEST(RecoveryLedger, OnlyTheLatestAreKept) {
  RecoveryLedger ledger(Clock::time_point{});
  for (int g = 1; g <= 100; ++g) ledger.Began(g, true, "x", Clock::time_point{});
  EXPECT_EQ(ledger.records().size(), RecoveryLedger::kKept);
  EXPECT_EQ(ledger.records().front().generation, 100 - static_cast<int>(RecoveryLedger::kKept) + 1);
  EXPECT_EQ(ledger.count(true), 100u);
}

}  // namespace
}  // namespace distrun
