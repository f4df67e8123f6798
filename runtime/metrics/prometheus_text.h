#pragma once
// Prometheus' text exposition format 0.0.4 (what every Prometheus scrapes, and what it falls back to): one
// family a metric, `# HELP` and `# TYPE` before its samples, label values escaped, values as Go's ParseFloat
// reads them. Written by hand: a few rules, no second HTTP server or client library.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace distrun {

// The content type a scrape gets (Prometheus 3 fails a scrape without one).
inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class PrometheusText {
 public:
  // Starts a family: `type` is counter, gauge, histogram or untyped. A name or label that breaks the format's
  // rules (names [a-zA-Z_][a-zA-Z0-9_]*, no leading "__" in labels, never `job` or `instance`, which
  // Prometheus owns) throws std::invalid_argument: a programming error, never a user's.
  void Family(std::string_view name, std::string_view type, std::string_view help);
  // A sample of the current family.
  void Sample(const MetricLabels& labels, double value);
  void Sample(double value) { Sample({}, value); }
  // One histogram of the current family (type histogram): NAME_bucket for each (upper bound, observations
  // at most that) and for +Inf (`count`), then NAME_sum and NAME_count.
  void Histogram(const MetricLabels& labels, const std::vector<std::pair<double, uint64_t>>& buckets,
                 double sum, uint64_t count);

  const std::string& text() const { return text_; }

 private:
  void Line(std::string_view suffix, const MetricLabels& labels, double value);

  std::string text_;
  std::string name_;
};

// `\`, `"` and line feeds escaped, as label values need.
std::string EscapeLabelValue(std::string_view value);
// The shortest text that reads back as `value`; +Inf, -Inf, NaN.
std::string FormatMetricValue(double value);

}  // namespace distrun
