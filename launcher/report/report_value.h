#pragma once
// A small ordered document tree, so that --detect builds its content once and every format (JSON, YAML)
// serializes the same content.

#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace distrun {

struct ReportValue;
using ReportList = std::vector<ReportValue>;
using ReportMap = std::vector<std::pair<std::string, ReportValue>>;

struct ReportValue {
  std::variant<std::monostate, bool, long long, std::string, ReportList, ReportMap> value;

  ReportValue() = default;
  ReportValue(std::nullptr_t) {}
  ReportValue(bool b) : value(b) {}
  ReportValue(int i) : value(static_cast<long long>(i)) {}
  ReportValue(std::string s) : value(std::move(s)) {}
  ReportValue(const char* s) : value(std::string(s)) {}
  ReportValue(ReportList l) : value(std::move(l)) {}
  ReportValue(ReportMap m) : value(std::move(m)) {}
};

std::string ToJson(const ReportValue& v, int indent = 2);
std::string ToYaml(const ReportValue& v);

}  // namespace distrun
