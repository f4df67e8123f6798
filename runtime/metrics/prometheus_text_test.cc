#include "runtime/metrics/prometheus_text.h"

#include <gtest/gtest.h>

#include <limits>
#include <stdexcept>

namespace distrun {
namespace {

TEST(PrometheusText, FamiliesAndSamplesInFormat004) {
  PrometheusText t;
  t.Family("distrun_ranks", "gauge", "Workers in the job.");
  t.Sample(4);
  t.Family("distrun_rank_step", "gauge", "The step each rank reported last.\nSecond line \\ here.");
  t.Sample({{"rank", "0"}, {"host", "node\"1\"\n"}}, 1234567);
  t.Sample({{"rank", "1"}, {"host", "c:\\x"}}, 0.25);
  EXPECT_EQ(t.text(),
            "# HELP distrun_ranks Workers in the job.\n"
            "# TYPE distrun_ranks gauge\n"
            "distrun_ranks 4\n"
            "# HELP distrun_rank_step The step each rank reported last.\\nSecond line \\\\ here.\n"
            "# TYPE distrun_rank_step gauge\n"
            "distrun_rank_step{rank=\"0\",host=\"node\\\"1\\\"\\n\"} 1234567\n"
            "distrun_rank_step{rank=\"1\",host=\"c:\\\\x\"} 0.25\n");
}

TEST(PrometheusText, ValuesReadBackAsGoParsesThem) {
  EXPECT_EQ(FormatMetricValue(0.1), "0.1");
  EXPECT_EQ(FormatMetricValue(1e21), "1e+21");
  EXPECT_EQ(FormatMetricValue(-3), "-3");
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatMetricValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<double>::quiet_NaN()), "NaN");
}

TEST(PrometheusText, NamesAndLabelsPrometheusOwnsAreRefused) {
  PrometheusText t;
  EXPECT_THROW(t.Sample(1), std::invalid_argument);
  EXPECT_THROW(t.Family("9lives", "gauge", ""), std::invalid_argument);
  EXPECT_THROW(t.Family("a-b", "gauge", ""), std::invalid_argument);
  EXPECT_THROW(t.Family("ok_name", "summary", ""), std::invalid_argument);
  t.Family("ok_name", "counter", "");
  EXPECT_THROW(t.Sample({{"job", "x"}}, 1), std::invalid_argument);
  EXPECT_THROW(t.Sample({{"instance", "x"}}, 1), std::invalid_argument);
  EXPECT_THROW(t.Sample({{"__name__", "x"}}, 1), std::invalid_argument);
}

TEST(PrometheusText, HistogramsHaveCumulativeBucketsSumAndCount) {
  PrometheusText t;
  t.Family("distrun_rtt_seconds", "histogram", "Round trips.");
  t.Histogram({{"node", "1"}}, {{0.001, 2}, {0.5, 5}}, 1.25, 7);
  EXPECT_EQ(t.text(),
            "# HELP distrun_rtt_seconds Round trips.\n"
            "# TYPE distrun_rtt_seconds histogram\n"
            "distrun_rtt_seconds_bucket{node=\"1\",le=\"0.001\"} 2\n"
            "distrun_rtt_seconds_bucket{node=\"1\",le=\"0.5\"} 5\n"
            "distrun_rtt_seconds_bucket{node=\"1\",le=\"+Inf\"} 7\n"
            "distrun_rtt_seconds_sum{node=\"1\"} 1.25\n"
            "distrun_rtt_seconds_count{node=\"1\"} 7\n");
}

}  // namespace
}  // namespace distrun
