#include "runtime/metrics/job_view_text.h"

#include <gtest/gtest.h>

namespace distrun {
namespace {

JobStatusView TwoRanks() {
  JobStatusView v;
  v.state = JobState::kRunning;
  v.epoch = 2;
  v.num_nodes = 1;
  v.run_id = "r\"1";
  v.uptime_ms = 12'500;
  v.restarts = 1;
  v.nodes_lost = 1;
  v.straggler_threshold = 0.75;
  RankProgress r0;
  r0.rank = 0;
  r0.step = 40;
  r0.steps_per_second = 2;
  r0.host = "node-a";
  v.ranks.push_back(r0);
  RankSectionMedians s0;
  s0.rank = 0;
  s0.host = "node-a";
  s0.median_s = {{"fwd", 0.1}};
  s0.score = 1;
  s0.section = "fwd";
  RankSectionMedians s1 = s0;
  s1.rank = 1;
  s1.host = "node-\"b\"";
  s1.median_s = {{"fwd", 0.2}};
  s1.score = 0.5;
  s1.straggler = true;
  v.sections = {s0, s1};
  v.epochs = {{1, 0, 8'000, 2, "restart after rank 1 exited with code 3"}, {2, 8'100, std::nullopt, 2, ""}};
  v.events = {{9'000, "rank 1 (node-\"b\") is a straggler"}};
  return v;
}

TEST(JobMetricsText, ShowsTheJobAndEveryRankLabelledByRankAndHost) {
  const std::string text = JobMetricsText(TwoRanks());
  EXPECT_NE(text.find("# TYPE distrun_restarts_total counter\ndistrun_restarts_total 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("\ndistrun_epoch 2\n"), std::string::npos);
  EXPECT_NE(text.find("\ndistrun_ranks 2\n"), std::string::npos);  // rank 1 marks sections only
  EXPECT_NE(text.find("\ndistrun_stragglers 1\n"), std::string::npos);
  EXPECT_NE(text.find("distrun_rank_step{rank=\"0\",host=\"node-a\"} 40\n"), std::string::npos) << text;
  EXPECT_NE(
      text.find("distrun_rank_section_seconds{rank=\"1\",host=\"node-\\\"b\\\"\",section=\"fwd\"} 0.2\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("distrun_rank_straggler_score{rank=\"1\",host=\"node-\\\"b\\\"\"} 0.5\n"),
            std::string::npos);
  EXPECT_EQ(text.find("job="), std::string::npos);
  EXPECT_EQ(text.find("instance="), std::string::npos);
}

TEST(JobJson, HoldsWhatThePageReads) {
  const std::string json = JobJson(TwoRanks());
  EXPECT_NE(json.find("\"run_id\":\"r\\\"1\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"state\":\"running\",\"epoch\":2,\"uptime_s\":12.5,\"restarts\":1,\"nodes_lost\":1"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("{\"epoch\":2,\"start_s\":8.1,\"end_s\":null,\"ranks\":2,\"end\":\"\"}"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"num_ranks\":2"), std::string::npos);
  // Rank 0 reports steps and sections; rank 1 sections only: no step, a score.
  EXPECT_NE(json.find("{\"rank\":0,\"host\":\"node-a\",\"pid\":null,\"step\":40,\"step_time_s\":0.5,"),
            std::string::npos)
      << json;
  EXPECT_NE(
      json.find("{\"rank\":1,\"host\":\"node-\\\"b\\\"\",\"pid\":null,\"step\":null,\"step_time_s\":null,"),
      std::string::npos)
      << json;
  EXPECT_NE(json.find("\"score\":0.5,\"straggler\":true,\"section\":\"fwd\",\"sections\":{\"fwd\":0.2}"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"events\":[{\"t_s\":9,\"text\":\"rank 1 (node-\\\"b\\\") is a straggler\"}]"),
            std::string::npos);
}

TEST(JobJson, InAHungJobTheLeastAdvancedRanksAreTheHungOnes) {
  JobStatusView v = TwoRanks();
  v.hung = true;
  RankProgress ahead = v.ranks[0];
  ahead.rank = 1;
  ahead.step = 45;
  v.ranks.push_back(ahead);
  v.hung_at_step = 40;
  std::string json = JobJson(v);
  EXPECT_NE(json.find("\"sections\":{\"fwd\":0.1},\"hung\":true}"), std::string::npos) << json;   // rank 0
  EXPECT_NE(json.find("\"sections\":{\"fwd\":0.2},\"hung\":false}"), std::string::npos) << json;  // rank 1
  v.hung_at_step.reset();  // stuck alike: all of them
  json = JobJson(v);
  EXPECT_EQ(json.find("\"hung\":false}"), std::string::npos) << json;
}

JobStatusView Recovered() {
  JobStatusView v = TwoRanks();
  RecoveryRecord r;
  r.generation = 2;
  r.in_place = true;
  r.cause = "node 1 (node-b): node lost";
  r.decided_ms = 8'000;
  r.change = WorldChange{0, {1}, {1}};
  r.phases = RecoveryPhases{1, 30, 40, 70, 100};
  r.complete = true;
  v.recoveries = {r};
  v.recoveries_in_place = 1;
  v.recoveries_restart = 1;
  return v;
}

TEST(JobMetricsText, CountsRecoveriesByModeAndTheLastOnesPhases) {
  const std::string text = JobMetricsText(Recovered());
  EXPECT_NE(
      text.find(
          "distrun_recoveries_total{mode=\"in-process\"} 1\ndistrun_recoveries_total{mode=\"restart\"} 1\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("distrun_last_recovery_seconds{phase=\"agreed\"} 0.04\n"), std::string::npos) << text;
  EXPECT_NE(text.find("distrun_last_recovery_seconds{phase=\"first_step\"} 0.1\n"), std::string::npos)
      << text;
}

TEST(JobJson, ListsEachRecoveryWithItsPhases) {
  const std::string json = JobJson(Recovered());
  EXPECT_NE(json.find("\"recoveries_total\":{\"in_process\":1,\"restart\":1}"), std::string::npos) << json;
  EXPECT_NE(
      json.find(
          "{\"generation\":2,\"in_place\":true,\"cause\":\"node 1 (node-b): node lost\",\"decided_s\":8,"
          "\"lost\":[1],\"joined\":[1],\"source\":0,\"phases_s\":{\"notified\":0.001,\"ready\":0.03,"
          "\"agreed\":0.04,\"group_up\":0.07,\"first_step\":0.1},\"complete\":true,\"text\":\"generation 2 "
          "recovered in place in 0.100 s"),
      std::string::npos)
      << json;
}

TEST(JsonQuote, EscapesWhatJsonCannotHoldRaw) {
  EXPECT_EQ(JsonQuote("a\"b\\c\nd\x01"), "\"a\\\"b\\\\c\\nd\\u0001\"");
}

}  // namespace
}  // namespace distrun
