#include "launcher/supervise/progress_tracker.h"

#include <gtest/gtest.h>

namespace distrun {
namespace {

using namespace std::chrono_literals;
using Clock = ProgressTracker::Clock;

// A board sample whose report time is `at`.
ProgressSample At(uint64_t reports, int64_t step, Clock::time_point at) {
  return {reports, step, std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count()};
}

class ProgressTrackerTest : public ::testing::Test {
 protected:
  Clock::time_point t0 = Clock::time_point{} + 1000s;
};

TEST_F(ProgressTrackerTest, RanksThatNeverReportedAreNotInTheProgress) {
  ProgressTracker t(2);
  t.Started(0, 10, 100, t0);
  t.Started(1, 11, 101, t0);
  t.Sample(0, At(1, 5, t0 + 1s), t0 + 1s);
  NodeProgress p = t.Progress(3, t0 + 2s);
  EXPECT_EQ(p.epoch, 3);
  EXPECT_EQ(p.workers, 2);
  ASSERT_EQ(p.ranks.size(), 1u);
  EXPECT_EQ(p.ranks[0].rank, 10);
  EXPECT_EQ(p.ranks[0].pid, 100);
  EXPECT_EQ(p.ranks[0].step, 5);
  EXPECT_EQ(p.ranks[0].advanced_ms_ago, 1000);
  EXPECT_EQ(p.slowest_interval_ms, 0);  // not learned
}

TEST_F(ProgressTrackerTest, TheSlowestIntervalIsLearnedAfterTheFirstAndAFewMore) {
  ProgressTracker t(1);
  t.Started(0, 0, 100, t0);
  // Steps at 0 s (first report), 10 s (the warm-up interval, not kept), then every 1 s, one of 3 s.
  const int64_t at_s[] = {0, 10, 11, 12, 15, 16};
  for (size_t i = 0; i < std::size(at_s); ++i) {
    Clock::time_point at = t0 + std::chrono::seconds(at_s[i]);
    t.Sample(0, At(i + 1, static_cast<int64_t>(i), at), at);
    NodeProgress p = t.Progress(0, at);
    // Intervals kept after step 2: 1 s, 1 s (3 s at step 4): learned from the third one on.
    EXPECT_EQ(p.slowest_interval_ms, i < 4 ? 0 : 3000) << "after step " << i;
  }
}

TEST_F(ProgressTrackerTest, StepsBetweenTwoSamplesShareTheInterval) {
  ProgressTracker t(1);
  t.Started(0, 0, 100, t0);
  t.Sample(0, At(1, 0, t0), t0);
  t.Sample(0, At(2, 1, t0 + 1s), t0 + 1s);    // warm-up interval
  t.Sample(0, At(12, 11, t0 + 2s), t0 + 2s);  // 10 steps in 1 s: 100 ms each
  t.Sample(0, At(22, 21, t0 + 3s), t0 + 3s);
  t.Sample(0, At(32, 31, t0 + 4s), t0 + 4s);
  NodeProgress p = t.Progress(0, t0 + 4s);
  EXPECT_EQ(p.slowest_interval_ms, 100);
  ASSERT_EQ(p.ranks.size(), 1u);
  EXPECT_NEAR(p.ranks[0].steps_per_second, 31.0 / 4.0, 0.01);
}

TEST_F(ProgressTrackerTest, ARepeatedStepIsAReportButNoAdvance) {
  ProgressTracker t(1);
  t.Started(0, 0, 100, t0);
  t.Sample(0, At(1, 7, t0), t0);
  t.Sample(0, At(2, 7, t0 + 5s), t0 + 5s);
  NodeProgress p = t.Progress(0, t0 + 6s);
  EXPECT_EQ(p.ranks[0].advanced_ms_ago, 6000);
  EXPECT_EQ(p.ranks[0].reported_ms_ago, 1000);
}

TEST_F(ProgressTrackerTest, ExitedWorkersLeaveTheProgressAndAReplacementStartsFresh) {
  ProgressTracker t(1);
  t.Started(0, 0, 100, t0);
  t.Sample(0, At(1, 9, t0), t0);
  t.Exited(0);
  EXPECT_TRUE(t.Progress(0, t0 + 1s).ranks.empty());
  EXPECT_EQ(t.Progress(0, t0 + 1s).workers, 0);
  t.Started(0, 0, 200, t0 + 2s);
  EXPECT_TRUE(t.Progress(1, t0 + 3s).ranks.empty());
}

TEST_F(ProgressTrackerTest, QuietIsTheTimeSinceAnyWorkerUsedCpuOrWrote) {
  ProgressTracker t(2);
  t.Started(0, 0, 100, t0);
  t.Started(1, 1, 101, t0);
  t.Cpu(0, 50, t0);
  t.Cpu(1, 50, t0);
  t.Cpu(0, 50, t0 + 5s);
  t.Cpu(1, 60, t0 + 5s);                           // worker 1 ran until 5 s
  EXPECT_EQ(t.Progress(0, t0 + 14s).quiet_ms, 0);  // below the minimum
  EXPECT_EQ(t.Progress(0, t0 + 20s).quiet_ms, 15'000);
  t.Output(0, t0 + 20s);
  EXPECT_EQ(t.Progress(0, t0 + 21s).quiet_ms, 0);
}

TEST_F(ProgressTrackerTest, TimeNobodyLookedIsNotTimeWithoutProgress) {
  ProgressTracker t(2);
  t.Started(0, 0, 100, t0);
  t.Started(1, 1, 101, t0);
  t.Look(t0);
  t.Sample(0, At(1, 5, t0), t0);
  t.Sample(1, At(1, 9, t0), t0);
  t.Look(t0 + 250ms);  // the supervisor's cadence: nothing moves
  EXPECT_EQ(t.Progress(0, t0 + 250ms).ranks[0].advanced_ms_ago, 250);
  // The machine stood still for 3 s, workers and all: on the next look neither rank is 3 s behind.
  const Clock::time_point back = t0 + 3250ms;
  t.Look(back);
  t.Sample(0, At(1, 5, t0), back);           // not written again yet
  t.Sample(1, At(2, 10, t0 + 300ms), back);  // written after the last look, just before it stood still
  NodeProgress p = t.Progress(0, back + 100ms);
  ASSERT_EQ(p.ranks.size(), 2u);
  EXPECT_EQ(p.ranks[0].advanced_ms_ago, 250 + 100);  // what it showed before, and what came after
  EXPECT_EQ(p.ranks[1].advanced_ms_ago, 100);        // unseen before the gap: counted from its end
  // A rank that really stopped ages from there on.
  t.Look(back + 500ms);
  EXPECT_EQ(t.Progress(0, back + 5s).ranks[0].advanced_ms_ago, 5250);
}

SectionSample Runs(const std::string& name, uint64_t runs, std::vector<int64_t> durations_ns) {
  return {name, runs, std::move(durations_ns)};
}

TEST_F(ProgressTrackerTest, SectionMediansCountEachRunOnceAndOnlyRecentOnes) {
  ProgressTracker t(2);
  t.Started(0, 4, 100, t0);
  t.Started(1, 5, 101, t0);
  // Rank 4 ran fwd three times (10, 30, 20 ms): median 20 ms; no progress reports, yet its sections count.
  t.Sections(0, {Runs("fwd", 3, {10'000'000, 30'000'000, 20'000'000})}, t0 + 1s);
  // The same board again adds nothing; two more runs add two (the ring holds the older ones too).
  t.Sections(0, {Runs("fwd", 3, {10'000'000, 30'000'000, 20'000'000})}, t0 + 2s);
  NodeProgress p = t.Progress(0, t0 + 2s);
  EXPECT_TRUE(p.ranks.empty());  // no step reported: the hang watch has nothing of it
  ASSERT_EQ(p.sections.size(), 1u);
  EXPECT_EQ(p.sections[0].rank, 4);
  EXPECT_DOUBLE_EQ(p.sections[0].median_s.at("fwd"), 0.020);
  t.Sections(0, {Runs("fwd", 5, {10'000'000, 30'000'000, 20'000'000, 40'000'000, 50'000'000})}, t0 + 3s);
  EXPECT_DOUBLE_EQ(t.Progress(0, t0 + 3s).sections[0].median_s.at("fwd"), 0.030);
  // An even count: the mean of the two middle runs.
  t.Sections(0, {Runs("fwd", 6, {20'000'000, 40'000'000, 50'000'000, 60'000'000})}, t0 + 4s);
  EXPECT_DOUBLE_EQ(t.Progress(0, t0 + 4s).sections[0].median_s.at("fwd"), 0.035);
  // Past the window, a section no longer run drops out.
  EXPECT_TRUE(t.Progress(0, t0 + 4s + ProgressTracker::kSectionWindow + 1s).sections.empty());
}

TEST_F(ProgressTrackerTest, AOneOffStallHardlyMovesASectionsMedian) {
  ProgressTracker t(1);
  t.Started(0, 0, 100, t0);
  std::vector<int64_t> ring;
  for (uint64_t run = 1; run <= 40; ++run) {
    ring.push_back(run == 20 ? 5'000'000'000 : 100'000'000);  // one run of 5 s among runs of 0.1 s
    t.Sections(0, {Runs("step", run, ring)}, t0 + std::chrono::seconds(run));
  }
  EXPECT_DOUBLE_EQ(t.Progress(0, t0 + 41s).sections[0].median_s.at("step"), 0.1);
}

TEST_F(ProgressTrackerTest, AReplacementWorkersSectionsStartFresh) {
  ProgressTracker t(1);
  t.Started(0, 0, 100, t0);
  t.Sections(0, {Runs("fwd", 2, {1'000'000'000, 1'000'000'000})}, t0 + 1s);
  t.Exited(0);
  t.Started(0, 0, 200, t0 + 2s);
  t.Sections(0, {Runs("fwd", 1, {2'000'000})}, t0 + 3s);
  EXPECT_DOUBLE_EQ(t.Progress(1, t0 + 3s).sections[0].median_s.at("fwd"), 0.002);
}

}  // namespace
}  // namespace distrun
