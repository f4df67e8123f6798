// The service's hang watch, stall warning and stack requests (runtime/service/service_diagnosis.cc).
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/service/service.h"

namespace distrun {
namespace {

using namespace std::chrono_literals;
using TimePoint = std::chrono::steady_clock::time_point;

class ServiceDiagnosisTest : public ::testing::Test {
 protected:
  std::unique_ptr<CoordinationService> Make(int nodes, int max_restarts = 0) {
    ServiceConfig c;
    c.num_nodes = nodes;
    c.max_restarts = max_restarts;
    c.run_id = "run1";
    c.heartbeat_timeout = 1h;  // liveness is not what these tests are about
    c.clock = [now = now_] { return *now; };
    c.hang = hang;
    c.stacks_timeout = 2s;
    c.explain = [this](const std::string& verdict, const StacksReply& stacks) {
      explained.push_back(stacks);
      HangExplanation e;
      e.text = verdict + "\n<picture>";
      e.odd_ranks = odd;
      if (!odd.empty()) e.odd_summary = "rank 3 (host-b, pid 33)";
      return e;
    };
    auto s = std::make_unique<CoordinationService>(c);
    for (int n = 0; n < nodes; ++n) {
      events.push_back(std::make_shared<std::vector<JobEvent>>());
      uint64_t id = 0;
      EXPECT_TRUE(s->AttachAgent(
                       n, [ev = events.back()](const JobEvent& e) { ev->push_back(e); }, &id)
                      .ok());
    }
    for (int n = 0; n < nodes; ++n) {
      NodeJoin j;
      j.node_rank = n;
      j.num_nodes = nodes;
      j.host = std::string("host-") + static_cast<char>('a' + n);
      j.local_workers = 2;
      j.run_id = "run1";
      s->Join(j, [](const Status& st, const NodeAssignment&) { EXPECT_TRUE(st.ok()) << st.message; });
    }
    EXPECT_EQ(s->State(), JobState::kRunning);
    return s;
  }

  static NodeProgress Progress(int first_rank, int64_t step, int epoch = 0) {
    NodeProgress p;
    p.epoch = epoch;
    p.workers = 2;
    for (int r = first_rank; r < first_rank + 2; ++r) {
      RankProgress rp;
      rp.rank = r;
      rp.step = step;
      rp.pid = 30 + r;
      p.ranks.push_back(rp);
    }
    return p;
  }

  void Advance(std::chrono::milliseconds d) { *now_ += d; }

  // The events of `kind` node `n` got.
  std::vector<JobEvent> Got(int n, JobEvent::Kind kind) const {
    std::vector<JobEvent> out;
    for (const JobEvent& e : *events[static_cast<size_t>(n)]) {
      if (e.kind == kind) out.push_back(e);
    }
    return out;
  }

  static StacksReply Answer(uint64_t id, int first_rank) {
    StacksReply r;
    r.id = id;
    for (int rank = first_rank; rank < first_rank + 2; ++rank) {
      r.workers.push_back({rank, "host", 30 + rank, "", "python", "dump of " + std::to_string(rank), ""});
    }
    return r;
  }

  HangWatchConfig hang = [] {
    HangWatchConfig c;
    c.timeout = 5s;
    c.stall = 60s;
    return c;
  }();
  std::shared_ptr<TimePoint> now_ = std::make_shared<TimePoint>(TimePoint{} + 1000s);
  std::vector<std::shared_ptr<std::vector<JobEvent>>> events;
  std::vector<StacksReply> explained;
  std::vector<int> odd = {3};  // the ranks explain says the stacks set apart
};

TEST_F(ServiceDiagnosisTest, AHungJobShowsItsStacksThenStopsWithTheHungExitCode) {
  auto s = Make(2);
  s->ReportProgress(0, Progress(0, 7));
  s->ReportProgress(1, Progress(2, 7));
  Advance(4s);
  s->Tick();
  EXPECT_TRUE(Got(0, JobEvent::Kind::kStacks).empty());
  Advance(1s);
  s->Tick();
  // Every node is asked for its stacks; the job runs on meanwhile.
  ASSERT_EQ(Got(0, JobEvent::Kind::kStacks).size(), 1u);
  ASSERT_EQ(Got(1, JobEvent::Kind::kStacks).size(), 1u);
  const uint64_t id = Got(1, JobEvent::Kind::kStacks)[0].stacks_id;
  EXPECT_EQ(s->State(), JobState::kRunning);
  s->ReportStacks(1, Answer(id, 2));
  EXPECT_TRUE(explained.empty());
  s->ReportStacks(0, Answer(id, 0));
  ASSERT_EQ(explained.size(), 1u);
  ASSERT_EQ(explained[0].workers.size(), 4u);
  EXPECT_EQ(explained[0].workers[3].text, "dump of 3");  // by rank
  EXPECT_TRUE(explained[0].missing.empty());
  // Node 0's distrun prints the picture; every node stops.
  std::vector<JobEvent> said = Got(0, JobEvent::Kind::kDiagnosis);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0].notice,
            "hung: no progress for 5.0s (--hang-timeout 5s); every rank reported step 7 last\n<picture>");
  EXPECT_TRUE(Got(1, JobEvent::Kind::kDiagnosis).empty());
  for (int n = 0; n < 2; ++n) {
    std::vector<JobEvent> stops = Got(n, JobEvent::Kind::kStop);
    ASSERT_EQ(stops.size(), 1u);
    EXPECT_EQ(stops[0].exit_code, kHungExitCode);
    EXPECT_EQ(stops[0].root_cause.process_id, 3);  // the rank its stacks set apart
    EXPECT_EQ(stops[0].root_cause.node_rank, 1);
    EXPECT_EQ(
        stops[0].root_cause.description,
        "hung: no progress for 5.0s (--hang-timeout 5s); every rank reported step 7 last; the stacks set "
        "apart rank 3 (host-b, pid 33)");
  }
  EXPECT_EQ(s->ExitCode(), kHungExitCode);
  // The overview says so; every rank was stuck alike, so no step sets some apart.
  JobStatusView v = s->Overview();
  EXPECT_TRUE(v.hung);
  EXPECT_FALSE(v.hung_at_step);
  ASSERT_FALSE(v.events.empty());
  EXPECT_EQ(v.events.front().second,
            "hung: no progress for 5.0s (--hang-timeout 5s); every rank reported step 7 last");
  ASSERT_EQ(v.epochs.size(), 1u);
  EXPECT_TRUE(v.epochs[0].end_ms);
  EXPECT_NE(v.epochs[0].end.find("stopped: "), std::string::npos) << v.epochs[0].end;
}

TEST_F(ServiceDiagnosisTest, WhenSomeRanksAreAheadTheHungOnesAreTheLeastAdvanced) {
  auto s = Make(2);
  s->ReportProgress(0, Progress(0, 9));
  s->ReportProgress(1, Progress(2, 7));
  EXPECT_FALSE(s->Overview().hung);
  Advance(5s);
  s->Tick();
  JobStatusView v = s->Overview();  // while the stacks are collected
  EXPECT_TRUE(v.hung);
  EXPECT_EQ(v.hung_at_step, 7);
}

TEST_F(ServiceDiagnosisTest, RanksStuckAlikeBlameTheJobNotARank) {
  odd.clear();
  auto s = Make(2);
  s->ReportProgress(0, Progress(0, 7));
  s->ReportProgress(1, Progress(2, 7));
  Advance(5s);
  s->Tick();
  const uint64_t id = Got(0, JobEvent::Kind::kStacks).at(0).stacks_id;
  s->ReportStacks(0, Answer(id, 0));
  s->ReportStacks(1, Answer(id, 2));
  std::vector<JobEvent> stops = Got(1, JobEvent::Kind::kStop);
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0].root_cause.process_id, -1);
  EXPECT_EQ(stops[0].root_cause.node_rank, -1);
  EXPECT_EQ(stops[0].root_cause.description,
            "hung: no progress for 5.0s (--hang-timeout 5s); every rank reported step 7 last");
}

TEST_F(ServiceDiagnosisTest, AHungJobRestartsWhereRestartsRemain) {
  auto s = Make(2, /*max_restarts=*/1);
  s->ReportProgress(0, Progress(0, 1));
  s->ReportProgress(1, Progress(2, 1));
  Advance(5s);
  s->Tick();
  // Node 1 never answers: the picture comes at the deadline, naming it.
  const uint64_t id = Got(0, JobEvent::Kind::kStacks).at(0).stacks_id;
  s->ReportStacks(0, Answer(id, 0));
  Advance(2s);
  s->Tick();
  ASSERT_EQ(explained.size(), 1u);
  EXPECT_EQ(explained[0].missing, std::vector<std::string>{"node 1 (host-b)"});
  ASSERT_EQ(Got(1, JobEvent::Kind::kRestart).size(), 1u);
  EXPECT_EQ(Got(1, JobEvent::Kind::kRestart)[0].restart_round, 1);
  EXPECT_EQ(s->State(), JobState::kRendezvous);
  // The new epoch starts unwatched: the old steps are gone, and late reports of epoch 0 are dropped.
  s->ReportProgress(0, Progress(0, 1, /*epoch=*/0));
  EXPECT_TRUE(s->Overview().ranks.empty());
}

TEST_F(ServiceDiagnosisTest, StacksOnRequestNameTheNodesThatDidNotAnswer) {
  auto s = Make(2);
  std::optional<StacksReply> got;
  s->CollectStacks(1s, [&](const StacksReply& r) { got = r; });
  const uint64_t id = Got(0, JobEvent::Kind::kStacks).at(0).stacks_id;
  s->ReportStacks(0, Answer(id, 0));
  s->ReportStacks(0, Answer(id, 0));  // twice: counted once
  EXPECT_FALSE(got);
  Advance(1s);
  s->Tick();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->workers.size(), 2u);
  EXPECT_EQ(got->missing, std::vector<std::string>{"node 1 (host-b)"});
  // A late answer changes nothing; the job is unharmed.
  s->ReportStacks(1, Answer(id, 2));
  EXPECT_EQ(s->State(), JobState::kRunning);
  EXPECT_TRUE(Got(0, JobEvent::Kind::kStop).empty());
}

TEST_F(ServiceDiagnosisTest, StatusShowsEachRanksProgressAndTheTimeout) {
  auto s = Make(2);
  s->ReportProgress(1, Progress(2, 40));
  s->ReportProgress(0, Progress(0, 41));
  Advance(2s);
  JobStatusView v = s->Overview();
  EXPECT_EQ(v.state, JobState::kRunning);
  ASSERT_EQ(v.ranks.size(), 4u);
  EXPECT_EQ(v.ranks[0].rank, 0);
  EXPECT_EQ(v.ranks[2].step, 40);
  EXPECT_EQ(v.ranks[2].reported_ms_ago, 2000);
  EXPECT_EQ(v.hang_timeout, 5s);
  EXPECT_FALSE(v.hang_timeout_learned);
  EXPECT_EQ(v.nodes, (std::vector<std::string>{"node 0 (host-a): 2 workers", "node 1 (host-b): 2 workers"}));
}

TEST_F(ServiceDiagnosisTest, AStalledJobIsSaidOnceToNodeZeroAndNotStopped) {
  auto s = Make(2);
  NodeProgress quiet;
  quiet.workers = 2;
  quiet.quiet_ms = 59'000;
  s->ReportProgress(0, quiet);
  s->ReportProgress(1, quiet);
  s->Tick();
  EXPECT_TRUE(Got(0, JobEvent::Kind::kDiagnosis).empty());
  Advance(1s);
  s->Tick();
  Advance(1s);
  s->Tick();
  std::vector<JobEvent> said = Got(0, JobEvent::Kind::kDiagnosis);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].notice.find("stalled: no worker on any node has used CPU time or written output for 60s"),
            std::string::npos)
      << said[0].notice;
  EXPECT_TRUE(Got(1, JobEvent::Kind::kDiagnosis).empty());
  EXPECT_EQ(s->State(), JobState::kRunning);
}

// Node `first_rank / 2`'s report: its two ranks' medians in section fwd.
NodeProgress Sections(int first_rank, double median0, double median1) {
  NodeProgress p;
  p.workers = 2;
  p.sections = {{first_rank, {{"fwd", median0}}, "", -1, false, ""},
                {first_rank + 1, {{"fwd", median1}}, "", -1, false, ""}};
  return p;
}

TEST_F(ServiceDiagnosisTest, AStragglerIsWarnedOnceToNodeZeroAfterSeveralWindowsAndShownInTheOverview) {
  auto s = Make(2);
  const auto said = [&] { return Got(0, JobEvent::Kind::kDiagnosis); };
  // Rank 3 on node 1 takes twice as long as the others, window after window.
  for (int window = 0; window < 3; ++window) {
    s->ReportProgress(0, Sections(0, 0.100, 0.102));
    s->ReportProgress(1, Sections(2, 0.101, 0.200));
    s->Tick();
    Advance(5s);
  }
  ASSERT_EQ(said().size(), 1u);
  EXPECT_TRUE(said()[0].warning);
  EXPECT_EQ(
      said()[0].notice,
      "rank 3 (host-b) is a straggler: score 0.50 in section fwd (median 0.200 s; fastest rank 0.100 s)");
  EXPECT_TRUE(Got(1, JobEvent::Kind::kDiagnosis).empty());
  JobStatusView v = s->Overview();
  ASSERT_EQ(v.sections.size(), 4u);
  EXPECT_EQ(v.sections[3].host, "host-b");
  EXPECT_DOUBLE_EQ(v.sections[3].score, 0.5);
  EXPECT_TRUE(v.sections[3].straggler);
  EXPECT_FALSE(v.sections[2].straggler);
  EXPECT_DOUBLE_EQ(v.straggler_threshold, 0.75);
  ASSERT_EQ(v.events.size(), 1u);
  EXPECT_EQ(v.events[0].second, said()[0].notice);
  ASSERT_EQ(v.epochs.size(), 1u);
  EXPECT_EQ(v.epochs[0].ranks, 4);
  EXPECT_FALSE(v.epochs[0].end_ms);
  // It catches up: one more line, three windows later.
  for (int window = 0; window < 3; ++window) {
    s->ReportProgress(1, Sections(2, 0.101, 0.101));
    s->Tick();
    Advance(5s);
  }
  ASSERT_EQ(said().size(), 2u);
  EXPECT_NE(said()[1].notice.find("rank 3 (host-b) is no longer a straggler"), std::string::npos);
  EXPECT_FALSE(s->Overview().sections[3].straggler);
  EXPECT_EQ(s->State(), JobState::kRunning);
}

}  // namespace
}  // namespace distrun
