#include "runtime/metrics/prometheus_text.h"

#include <charconv>
#include <cmath>
#include <stdexcept>

namespace distrun {
namespace {

bool ValidName(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    const bool digit = c >= '0' && c <= '9';
    if (!letter && !(digit && i > 0)) return false;
  }
  return true;
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatMetricValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return ec == std::errc() ? std::string(buffer, end) : "NaN";
}

void PrometheusText::Family(std::string_view name, std::string_view type, std::string_view help) {
  if (!ValidName(name)) throw std::invalid_argument("not a metric name: " + std::string(name));
  if (type != "counter" && type != "gauge" && type != "histogram" && type != "untyped") {
    throw std::invalid_argument("not a metric type: " + std::string(type));
  }
  name_ = std::string(name);
  text_ += "# HELP " + name_ + " " + EscapeHelp(help) + "\n";
  text_ += "# TYPE " + name_ + " " + std::string(type) + "\n";
}

void PrometheusText::Sample(const MetricLabels& labels, double value) { Line("", labels, value); }

void PrometheusText::Histogram(const MetricLabels& labels,
                               const std::vector<std::pair<double, uint64_t>>& buckets, double sum,
                               uint64_t count) {
  MetricLabels with_le = labels;
  with_le.emplace_back("le", "");
  for (const auto& [bound, at_most] : buckets) {
    with_le.back().second = FormatMetricValue(bound);
    Line("_bucket", with_le, static_cast<double>(at_most));
  }
  with_le.back().second = "+Inf";
  Line("_bucket", with_le, static_cast<double>(count));
  Line("_sum", labels, sum);
  Line("_count", labels, static_cast<double>(count));
}

void PrometheusText::Line(std::string_view suffix, const MetricLabels& labels, double value) {
  if (name_.empty()) throw std::invalid_argument("a sample before its family");
  text_ += name_;
  text_ += suffix;
  if (!labels.empty()) {
    text_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      const std::string& label = labels[i].first;
      if (!ValidName(label) || label.starts_with("__") || label == "job" || label == "instance") {
        throw std::invalid_argument("not a label name a target may use: " + label);
      }
      text_ += (i ? "," : "") + label + "=\"" + EscapeLabelValue(labels[i].second) + "\"";
    }
    text_ += '}';
  }
  text_ += " " + FormatMetricValue(value) + "\n";
}

}  // namespace distrun
