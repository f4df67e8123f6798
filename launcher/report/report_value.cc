#include "launcher/report/report_value.h"

#include <cstdio>

namespace distrun {
namespace {

// Appends in place, unescaped runs at once: a --detect report of 8 workers holds ~1,000 strings, and
// building each through temporaries cost a tenth of `distrun --detect` (callgrind).
void AppendJsonString(const std::string& s, std::string& out) {
  out += '"';
  size_t run = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const char* escape = nullptr;
    char unicode[8];
    switch (c) {
      case '"':
        escape = "\\\"";
        break;
      case '\\':
        escape = "\\\\";
        break;
      case '\n':
        escape = "\\n";
        break;
      case '\r':
        escape = "\\r";
        break;
      case '\t':
        escape = "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          std::snprintf(unicode, sizeof(unicode), "\\u%04x", c);
          escape = unicode;
        }
    }
    if (escape == nullptr) continue;
    out.append(s, run, i - run);
    out += escape;
    run = i + 1;
  }
  out.append(s, run, std::string::npos);
  out += '"';
}

std::string JsonString(const std::string& s) {
  std::string out;
  AppendJsonString(s, out);
  return out;
}

bool IsScalar(const ReportValue& v) {
  return !std::holds_alternative<ReportList>(v.value) && !std::holds_alternative<ReportMap>(v.value);
}

void AppendScalar(const ReportValue& v, std::string& out) {
  if (std::holds_alternative<std::monostate>(v.value)) {
    out += "null";
  } else if (auto* b = std::get_if<bool>(&v.value)) {
    out += *b ? "true" : "false";
  } else if (auto* i = std::get_if<long long>(&v.value)) {
    out += std::to_string(*i);
  } else {
    AppendJsonString(std::get<std::string>(v.value), out);
  }
}

std::string Scalar(const ReportValue& v) {
  std::string out;
  AppendScalar(v, out);
  return out;
}

// Lists of scalars stay on one line: they are short (device ids, ranks) and read better that way.
bool ScalarList(const ReportList& l) {
  for (const auto& item : l) {
    if (!IsScalar(item)) return false;
  }
  return true;
}

void WriteJson(const ReportValue& v, int indent, int depth, std::string& out) {
  const size_t pad = static_cast<size_t>(indent * (depth + 1));
  const size_t close_pad = static_cast<size_t>(indent * depth);
  if (auto* l = std::get_if<ReportList>(&v.value)) {
    if (l->empty() || ScalarList(*l)) {
      out += '[';
      for (size_t i = 0; i < l->size(); ++i) {
        if (i > 0) out += ", ";
        AppendScalar((*l)[i], out);
      }
      out += ']';
      return;
    }
    out += "[\n";
    for (size_t i = 0; i < l->size(); ++i) {
      out.append(pad, ' ');
      WriteJson((*l)[i], indent, depth + 1, out);
      out += i + 1 < l->size() ? ",\n" : "\n";
    }
    out.append(close_pad, ' ');
    out += ']';
  } else if (auto* m = std::get_if<ReportMap>(&v.value)) {
    if (m->empty()) {
      out += "{}";
      return;
    }
    out += "{\n";
    for (size_t i = 0; i < m->size(); ++i) {
      out.append(pad, ' ');
      AppendJsonString((*m)[i].first, out);
      out += ": ";
      WriteJson((*m)[i].second, indent, depth + 1, out);
      out += i + 1 < m->size() ? ",\n" : "\n";
    }
    out.append(close_pad, ' ');
    out += '}';
  } else {
    AppendScalar(v, out);
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

}  // namespace distrun
