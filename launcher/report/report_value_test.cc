#include "launcher/report/report_value.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <string>

#include "launcher/process/shell_quote.h"

namespace distrun {
namespace {

// Strings that break naive JSON or YAML writers, or that YAML would read as another type.
const std::vector<std::string>& TrickyStrings() {
  static const std::vector<std::string> strings = {
      "",
      "plain",
      "yes",
      "no",
      "on",
      "null",
      "~",
      "true",
      "1",
      "-3",
      "1.5e3",
      "0x10",
      "007",
      ".inf",
      "key: value",
      "- item",
      "# comment",
      "a #b",
      "'single'",
      "\"double\"",
      "back\\slash",
      "new\nline",
      "carriage\rreturn",
      "tab\there",
      "  leading and trailing  ",
      "{flow}",
      "[list]",
      "*alias",
      "&anchor",
      "!tag",
      "%directive",
      "@at",
      "`tick`",
      "|",
      ">",
      "---",
      "...",
      "?",
      ": colon",
      std::string("nul\0byte", 8),
      "\x01\x02\x1f\x7f",
      "\x1b[31mred\x1b[0m",
      "caf\xc3\xa9",                  // é
      "\xe2\x82\xac 100",             // €
      "\xf0\x9f\x9a\x80",             // rocket, outside the BMP
      "GPU-8c3d1e2f-aaaa-bbbb-cccc",  // realistic values too
      "http://user:pw@proxy:3128",
      "next\xc2\x85line",     // U+0085, a line break to YAML 1.1
      "line\xe2\x80\xa8sep",  // U+2028
      "\xef\xbb\xbf"
      "bom",  // U+FEFF
  };
  return strings;
}

// Compares a parsed YAML (or JSON) node with the value it was written from, types included: a string
// must come back as a quoted (non-plain) scalar so that "yes" or "1" cannot turn into a bool or number.
::testing::AssertionResult SameContent(const YAML::Node& node, const ReportValue& v,
                                       const std::string& path) {
  auto fail = [&](const std::string& what) { return ::testing::AssertionFailure() << path << ": " << what; };
  if (std::holds_alternative<std::monostate>(v.value)) {
    return node.IsNull() ? ::testing::AssertionSuccess() : fail("expected null");
  }
  if (auto* b = std::get_if<bool>(&v.value)) {
    if (!node.IsScalar() || node.Tag() == "!") return fail("expected a plain bool");
    return node.as<bool>() == *b ? ::testing::AssertionSuccess() : fail("bool differs");
  }
  if (auto* i = std::get_if<long long>(&v.value)) {
    if (!node.IsScalar() || node.Tag() == "!") return fail("expected a plain number");
    return node.as<long long>() == *i ? ::testing::AssertionSuccess()
                                      : fail("number differs: " + node.Scalar());
  }
  if (auto* s = std::get_if<std::string>(&v.value)) {
    if (!node.IsScalar()) return fail("expected a string");
    if (node.Tag() != "!") return fail("string '" + *s + "' came back plain (tag " + node.Tag() + ")");
    return node.Scalar() == *s ? ::testing::AssertionSuccess()
                               : fail("string differs: '" + node.Scalar() + "' vs '" + *s + "'");
  }
  if (auto* l = std::get_if<ReportList>(&v.value)) {
    if (!node.IsSequence()) return fail("expected a sequence");
    if (node.size() != l->size()) return fail("sequence size differs");
    for (size_t i = 0; i < l->size(); ++i) {
      auto r = SameContent(node[i], (*l)[i], path + "[" + std::to_string(i) + "]");
      if (!r) return r;
    }
    return ::testing::AssertionSuccess();
  }
  const auto& m = std::get<ReportMap>(v.value);
  if (!node.IsMap()) return fail("expected a map");
  if (node.size() != m.size()) return fail("map size differs");
  size_t i = 0;
  for (const auto& entry : node) {
    if (entry.first.Scalar() != m[i].first) return fail("key order differs at " + m[i].first);
    auto r = SameContent(entry.second, m[i].second, path + "." + m[i].first);
    if (!r) return r;
    ++i;
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult YamlRoundTrips(const ReportValue& v) {
  std::string text = ToYaml(v);
  try {
    return SameContent(YAML::Load(text), v, "$") << "\n" << text;
  } catch (const YAML::Exception& e) {
    return ::testing::AssertionFailure() << "not YAML: " << e.what() << "\n" << text;
  }
}

::testing::AssertionResult JsonRoundTrips(const ReportValue& v) {
  std::string text = ToJson(v);
  try {
    // JSON is YAML 1.2; yaml-cpp reads it, escapes included.
    return SameContent(YAML::Load(text), v, "$") << "\n" << text;
  } catch (const YAML::Exception& e) {
    return ::testing::AssertionFailure() << "not parsable: " << e.what() << "\n" << text;
  }
}

ReportValue Sample() {
  ReportMap worker = {{"process_id", 5},
                      {"local_device_ids", ReportList{0, 1}},
                      {"env", ReportMap{{"RANK", "5"}, {"MASTER_ADDR", "node001"}}}};
  return ReportMap{
      {"method", "slurm"},
      {"num_processes", 8},
      {"process_id", nullptr},
      {"ok", true},
      {"bad", false},
      {"hosts", ReportList{"node001", "node002"}},
      {"empty_list", ReportList{}},
      {"empty_map", ReportMap{}},
      {"workers", ReportList{worker, worker}},
      {"nested", ReportMap{{"inner", ReportMap{{"deeper", ReportList{"x"}}}}}},
      {"warnings", ReportList{"it's \"bad\"\n"}},
  };
}

TEST(ReportValue, JsonScalars) {
  EXPECT_EQ(ToJson(nullptr), "null\n");
  EXPECT_EQ(ToJson(true), "true\n");
  EXPECT_EQ(ToJson(false), "false\n");
  EXPECT_EQ(ToJson(0), "0\n");
  EXPECT_EQ(ToJson(-42), "-42\n");
  EXPECT_EQ(ToJson("x"), "\"x\"\n");
  EXPECT_EQ(ToJson(std::string("x")), "\"x\"\n");
}

TEST(ReportValue, JsonEscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(ToJson("a\"b\\c"), "\"a\\\"b\\\\c\"\n");
  EXPECT_EQ(ToJson("\n\r\t"), "\"\\n\\r\\t\"\n");
  EXPECT_EQ(ToJson("\x01\x1f\x7f"), "\"\\u0001\\u001f\\u007f\"\n");
  EXPECT_EQ(ToJson(std::string("a\0b", 3)), "\"a\\u0000b\"\n");
  EXPECT_EQ(ToJson("\x08\x0c"), "\"\\u0008\\u000c\"\n");
  // No raw control character may remain in the output.
  for (const std::string& s : TrickyStrings()) {
    std::string json = ToJson(s);
    for (size_t i = 0; i + 1 < json.size(); ++i) {
      unsigned char c = static_cast<unsigned char>(json[i]);
      EXPECT_TRUE(c >= 0x20 && c != 0x7f) << "raw control byte in " << json;
    }
  }
}

TEST(ReportValue, JsonKeepsUtf8AsIs) {
  EXPECT_EQ(ToJson("caf\xc3\xa9"), "\"caf\xc3\xa9\"\n");
  EXPECT_EQ(ToJson("\xf0\x9f\x9a\x80"), "\"\xf0\x9f\x9a\x80\"\n");
}

TEST(ReportValue, JsonLayout) {
  EXPECT_EQ(ToJson(ReportList{}), "[]\n");
  EXPECT_EQ(ToJson(ReportMap{}), "{}\n");
  EXPECT_EQ(ToJson(ReportList{1, "a", nullptr, true}), "[1, \"a\", null, true]\n");
  EXPECT_EQ(ToJson(ReportMap{{"a", 1}, {"b", ReportList{0, 1}}, {"c", ReportMap{}}}),
            "{\n  \"a\": 1,\n  \"b\": [0, 1],\n  \"c\": {}\n}\n");
  EXPECT_EQ(ToJson(ReportList{ReportMap{{"k", "v"}}}), "[\n  {\n    \"k\": \"v\"\n  }\n]\n");
  EXPECT_EQ(ToJson(ReportMap{{"a", ReportMap{{"b", 2}}}}, 4),
            "{\n    \"a\": {\n        \"b\": 2\n    }\n}\n");
}

TEST(ReportValue, JsonKeysAreEscaped) {
  EXPECT_EQ(ToJson(ReportMap{{"a\"b\n", 1}}), "{\n  \"a\\\"b\\n\": 1\n}\n");
}

TEST(ReportValue, JsonParsesBackToTheSameContent) {
  EXPECT_TRUE(JsonRoundTrips(Sample()));
  for (const std::string& s : TrickyStrings()) {
    EXPECT_TRUE(JsonRoundTrips(ReportMap{{s, s}, {"list", ReportList{s, s}}}));
  }
}

TEST(ReportValue, YamlParsesBackToTheSameContent) {
  EXPECT_TRUE(YamlRoundTrips(Sample()));
  for (const std::string& s : TrickyStrings()) {
    EXPECT_TRUE(YamlRoundTrips(ReportMap{{s, s}, {"list", ReportList{s, s}}}));
    EXPECT_TRUE(YamlRoundTrips(ReportList{s, ReportMap{{s, s}}}));
  }
}

TEST(ReportValue, YamlScalarsAtTheTop) {
  EXPECT_TRUE(YamlRoundTrips("yes"));
  EXPECT_TRUE(YamlRoundTrips(7));
  EXPECT_TRUE(YamlRoundTrips(true));
  EXPECT_TRUE(YamlRoundTrips(nullptr));
  EXPECT_TRUE(YamlRoundTrips(ReportMap{}));
  EXPECT_TRUE(YamlRoundTrips(ReportList{}));
}

TEST(ReportValue, YamlNestedShapes) {
  EXPECT_TRUE(YamlRoundTrips(ReportList{ReportList{1, 2}, ReportList{"a"}}));
  EXPECT_TRUE(YamlRoundTrips(ReportList{ReportMap{{"a", ReportList{ReportMap{{"b", 1}}}}}}));
  EXPECT_TRUE(YamlRoundTrips(ReportMap{{"a", ReportList{ReportList{ReportMap{{"b", nullptr}}}}}}));
  EXPECT_TRUE(YamlRoundTrips(ReportMap{{"m", ReportMap{}}, {"l", ReportList{}}}));
}

TEST(ReportValue, YamlEmptyContainersInsideLists) {
  EXPECT_TRUE(YamlRoundTrips(ReportList{ReportList{}, ReportList{1}}));
  EXPECT_TRUE(YamlRoundTrips(ReportList{ReportMap{}, ReportMap{{"a", 1}}}));
  EXPECT_TRUE(YamlRoundTrips(ReportMap{{"l", ReportList{ReportList{}, ReportMap{}}}}));
}

TEST(ReportValue, YamlLayoutIsBlockStyleWithQuotedScalars) {
  EXPECT_EQ(ToYaml(ReportMap{{"method", "local"}, {"n", 1}, {"ids", ReportList{0, 1}}, {"p", nullptr}}),
            "\"method\": \"local\"\n\"n\": 1\n\"ids\": [0, 1]\n\"p\": null\n");
  EXPECT_EQ(ToYaml(ReportMap{{"workers", ReportList{ReportMap{{"rank", 0}}}}}),
            "\"workers\":\n  -\n    \"rank\": 0\n");
}

TEST(ReportValue, ShellQuote) {
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("plain"), "'plain'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote("''"), "''\\'''\\'''");
  EXPECT_EQ(ShellQuote("$HOME `id` \\n \"q\" *"), "'$HOME `id` \\n \"q\" *'");
  EXPECT_EQ(ShellQuote("a\nb"), "'a\nb'");
}

TEST(ReportValue, ShellQuoteLeavesNoUnquotedText) {
  // Outside the quotes only the \' escapes appear.
  for (const std::string& s : TrickyStrings()) {
    std::string q = ShellQuote(s);
    ASSERT_GE(q.size(), 2u);
    EXPECT_EQ(q.front(), '\'');
    EXPECT_EQ(q.back(), '\'');
    bool inside = false;
    for (size_t i = 0; i < q.size(); ++i) {
      if (q[i] == '\'') {
        inside = !inside;
        continue;
      }
      if (!inside) {
        EXPECT_EQ(q.substr(i, 2), "\\'") << q;
        ++i;
      }
    }
    EXPECT_FALSE(inside) << q;
  }
}

}  // namespace
}  // namespace distrun
