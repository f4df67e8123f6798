#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "detect/errors.h"
#include "detect/hostlist.h"

namespace distrun {
namespace {

std::string ErrorOf(std::string_view value) {
  try {
    ExpandTaskCounts("SLURM_STEP_TASKS_PER_NODE", value);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(TaskCounts, Expands) {
  EXPECT_EQ(ExpandTaskCounts("V", "2(x3),1"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(ExpandTaskCounts("V", "4"), (std::vector<int>{4}));
  EXPECT_EQ(ExpandTaskCounts("V", "1,2,1(x3),3,2"), (std::vector<int>{1, 2, 1, 1, 1, 3, 2}));
  EXPECT_EQ(ExpandTaskCounts("V", "8(x1)"), (std::vector<int>{8}));
  EXPECT_EQ(ExpandTaskCounts("V", "0,007(x02)"), (std::vector<int>{0, 7, 7}));
  EXPECT_EQ(ExpandTaskCounts("V", "2147483647"), (std::vector<int>{2147483647}));
  EXPECT_EQ(ExpandTaskCounts("V", "1(x1048576)").size(), kMaxTaskCounts);
}

TEST(TaskCounts, RejectsMalformed) {
  for (const char* bad : {"",
                          "2(x0)",
                          "(x3)",
                          "2(3)",
                          "2(x3",
                          "2(x3)x",
                          ",",
                          "1,",
                          ",1",
                          "1,,2",
                          "a",
                          "-1",
                          "+1",
                          " 1",
                          "1 ",
                          "2(x)",
                          "2()",
                          "2(",
                          "2(x-1)",
                          "2(x3))",
                          "2(x3)(x2)",
                          "2x3",
                          "2(X3)",
                          "2(x 3)",
                          "1.5",
                          "0x10",
                          "2147483648",
                          "99999999999999999999",
                          "1(x2147483648)",
                          "1(x1048577)",
                          "1(x1048576),1",
                          "2(x3),\n1"}) {
    EXPECT_NE(ErrorOf(bad), "") << bad;
  }
}

TEST(TaskCounts, MessagesNameVariableValueAndFix) {
  std::string e = ErrorOf("2(x0)");
  EXPECT_NE(e.find("SLURM_STEP_TASKS_PER_NODE='2(x0)' is not a valid count list"), std::string::npos) << e;
  EXPECT_NE(e.find("at least 1"), std::string::npos) << e;
  EXPECT_NE(e.find("such as 2(x3),1"), std::string::npos) << e;
  e = ErrorOf("1,2(3)");
  EXPECT_NE(e.find("field 2 '2(3)' lacks the 'x'; write 2(x3)"), std::string::npos) << e;
  e = ErrorOf("(x3)");
  EXPECT_NE(e.find("no count before '('"), std::string::npos) << e;
  e = ErrorOf("2(x3");
  EXPECT_NE(e.find("closing ')'"), std::string::npos) << e;
  e = ErrorOf("2(x3)x");
  EXPECT_NE(e.find("'x' after the ')'"), std::string::npos) << e;
  e = ErrorOf("1,,2");
  EXPECT_NE(e.find("field 2 is empty"), std::string::npos) << e;
  e = ErrorOf("99999999999");
  EXPECT_NE(e.find("too large"), std::string::npos) << e;
  e = ErrorOf("1(x1048577)");
  EXPECT_NE(e.find("distrun's limit"), std::string::npos) << e;
  e = ErrorOf("1\n,2");
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

}  // namespace
}  // namespace distrun
