#include "launcher/report/report_value.h"

#include <cstdio>

namespace distrun {
namespace {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

bool IsScalar(const ReportValue& v) {
  return !std::holds_alternative<ReportList>(v.value) && !std::holds_alternative<ReportMap>(v.value);
}

std::string Scalar(const ReportValue& v) {
  if (std::holds_alternative<std::monostate>(v.value)) return "null";
  if (auto* b = std::get_if<bool>(&v.value)) return *b ? "true" : "false";
  if (auto* i = std::get_if<long long>(&v.value)) return std::to_string(*i);
  return JsonString(std::get<std::string>(v.value));
}

// Lists of scalars stay on one line: they are short (device ids, ranks) and read better that way.
bool ScalarList(const ReportList& l) {
  for (const auto& item : l) {
    if (!IsScalar(item)) return false;
  }
  return true;
}

void WriteJson(const ReportValue& v, int indent, int depth, std::string& out) {
  std::string pad(static_cast<size_t>(indent * (depth + 1)), ' ');
  std::string close_pad(static_cast<size_t>(indent * depth), ' ');
  if (auto* l = std::get_if<ReportList>(&v.value)) {
    if (l->empty() || ScalarList(*l)) {
      out += "[";
      for (size_t i = 0; i < l->size(); ++i) out += (i ? ", " : "") + Scalar((*l)[i]);
      out += "]";
      return;
    }
    out += "[\n";
    for (size_t i = 0; i < l->size(); ++i) {
      out += pad;
      WriteJson((*l)[i], indent, depth + 1, out);
      out += i + 1 < l->size() ? ",\n" : "\n";
    }
    out += close_pad + "]";
  } else if (auto* m = std::get_if<ReportMap>(&v.value)) {
    if (m->empty()) {
      out += "{}";
      return;
    }
    out += "{\n";
    for (size_t i = 0; i < m->size(); ++i) {
      out += pad + JsonString((*m)[i].first) + ": ";
      WriteJson((*m)[i].second, indent, depth + 1, out);
      out += i + 1 < m->size() ? ",\n" : "\n";
    }
    out += close_pad + "}";
  } else {
    out += Scalar(v);
  }
}

// Block-style YAML whose scalars are JSON-quoted (YAML 1.2 reads them exactly), so no value can be
// misread as another type or break the structure.
void WriteYaml(const ReportValue& v, int depth, std::string& out) {
  std::string pad(static_cast<size_t>(2 * depth), ' ');
  // An empty list or map has no block form (it would read back as null): write it in flow style.
  auto* as_list = std::get_if<ReportList>(&v.value);
  auto* as_map = std::get_if<ReportMap>(&v.value);
  if ((as_list && as_list->empty()) || (as_map && as_map->empty())) {
    out += pad + (as_list ? "[]" : "{}") + "\n";
    return;
  }
  if (auto* m = std::get_if<ReportMap>(&v.value)) {
    for (const auto& [key, child] : *m) {
      out += pad + JsonString(key) + ":";
      bool nested = !IsScalar(child) && !(std::holds_alternative<ReportList>(child.value) &&
                                          ScalarList(std::get<ReportList>(child.value)));
      bool empty_map =
          std::holds_alternative<ReportMap>(child.value) && std::get<ReportMap>(child.value).empty();
      if (nested && !empty_map) {
        out += "\n";
        WriteYaml(child, depth + 1, out);
      } else {
        out += " ";
        WriteJson(child, 0, 0, out);
        out += "\n";
      }
    }
  } else if (auto* l = std::get_if<ReportList>(&v.value)) {
    for (const auto& item : *l) {
      out += pad + "-";
      if (IsScalar(item)) {
        out += " " + Scalar(item) + "\n";
      } else {
        out += "\n";
        WriteYaml(item, depth + 1, out);
      }
    }
  } else {
    out += pad + Scalar(v) + "\n";
  }
}

}  // namespace

std::string ToJson(const ReportValue& v, int indent) {
  std::string out;
  WriteJson(v, indent, 0, out);
  return out + "\n";
}

std::string ToYaml(const ReportValue& v) {
  std::string out;
  WriteYaml(v, 0, out);
  return out;
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace distrun
