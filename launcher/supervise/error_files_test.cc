#include "launcher/supervise/error_files.h"

#include <gtest/gtest.h>

#include <fstream>

#include "detect/test_temp_root.h"

namespace distrun {
namespace {

using testing::TempRoot;

// What torch 1.13's ErrorHandler.record_exception writes (json.dump), with its escapes.
constexpr std::string_view kTorchFile =
    R"({"message": {"message": "ValueError: bad learning rate -1 \u00e9", "extraInfo": {"py_callstack": )"
    R"("Traceback (most recent call last):\n  File \"/x/train.py\", line 9, in main\n    raise )"
    R"(ValueError(\"bad learning rate -1\")\nValueError: bad learning rate -1\n", "timestamp": "1764070000"}}})";

TEST(TorchErrorFile, ParsesTorchsFormat) {
  std::string problem;
  std::optional<TorchError> e = ParseTorchErrorFile(kTorchFile, &problem);
  ASSERT_TRUE(e) << problem;
  EXPECT_EQ(e->message, "ValueError: bad learning rate -1 \xc3\xa9");
  EXPECT_EQ(e->traceback,
            "Traceback (most recent call last):\n  File \"/x/train.py\", line 9, in main\n"
            "    raise ValueError(\"bad learning rate -1\")\nValueError: bad learning rate -1\n");
}

TEST(TorchErrorFile, AcceptsAPlainMessage) {
  std::string problem;
  std::optional<TorchError> e = ParseTorchErrorFile(R"({"message": "RuntimeError: NCCL error"})", &problem);
  ASSERT_TRUE(e) << problem;
  EXPECT_EQ(e->message, "RuntimeError: NCCL error");
  EXPECT_EQ(e->traceback, "");
}

TEST(TorchErrorFile, OtherContentSaysWhy) {
  for (auto [content, why] :
       {std::pair{"{not json", "it is not JSON"}, std::pair{R"({"error": "x"})", "no \"message\" field"},
        std::pair{"[1, 2]", "no \"message\" field"},
        std::pair{R"({"message": {"extraInfo": {}}})", "neither text nor"}}) {
    std::string problem;
    EXPECT_FALSE(ParseTorchErrorFile(content, &problem)) << content;
    EXPECT_NE(problem.find(why), std::string::npos) << content << ": " << problem;
  }
}

TEST(TorchErrorFile, FormatShowsTheExceptionAndTheTracebacksEnd) {
  TorchError e{"ValueError: bad\nsecond line", ""};
  for (int i = 0; i < 50; ++i) e.traceback += "frame " + std::to_string(i) + "\n";
  std::string text = FormatTorchError(3, e);
  EXPECT_NE(text.find("\n  rank 3 raised (torch's error file):\n    ValueError: bad\n    second line"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("traceback (last 40 of 50 lines):"), std::string::npos) << text;
  EXPECT_EQ(text.find("frame 9\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\n    frame 10\n"), std::string::npos) << text;
  EXPECT_TRUE(text.ends_with("\n    frame 49")) << text;
  EXPECT_EQ(FormatTorchError(0, TorchError{"E: x", ""}), "\n  rank 0 raised (torch's error file):\n    E: x");
}

TEST(ErrorFiles, PrivateDirectoryPerRankClearedAndRemoved) {
  TempRoot tmp;
  std::filesystem::path dir;
  {
    ErrorFiles files(std::nullopt, tmp.path());
    ASSERT_TRUE(files.enabled()) << files.problem();
    std::filesystem::path p = files.PathFor(7);
    dir = p.parent_path();
    EXPECT_EQ(dir.parent_path(), tmp.path());
    EXPECT_EQ(p.filename(), "rank-7.error.json");
    std::string problem;
    EXPECT_FALSE(files.Read(7, &problem));  // nothing written: no error, no problem
    EXPECT_EQ(problem, "");
    std::ofstream(p) << kTorchFile;
    std::optional<TorchError> e = files.Read(7, &problem);
    ASSERT_TRUE(e) << problem;
    EXPECT_EQ(e->message.substr(0, 11), "ValueError:");
    files.Clear(7);  // a restart starts clean
    EXPECT_FALSE(std::filesystem::exists(p));
    std::ofstream(files.PathFor(8)) << "garbage";
    EXPECT_FALSE(files.Read(8, &problem));
    EXPECT_NE(problem.find("rank 8's error file " + files.PathFor(8).string() + " is not torch's"),
              std::string::npos)
        << problem;
  }
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(ErrorFiles, LogDirKeepsTheFiles) {
  TempRoot logs;
  {
    ErrorFiles files(logs.path(), "/nonexistent");
    EXPECT_EQ(files.PathFor(2), logs.path() / "rank-2.error.json");
    std::ofstream(files.PathFor(2)) << kTorchFile;
  }
  EXPECT_TRUE(std::filesystem::exists(logs.path() / "rank-2.error.json"));
}

TEST(ErrorFiles, UnusableTempDirDisablesThemWithAReason) {
  ErrorFiles files(std::nullopt, "/nonexistent-distrun-tmp");
  EXPECT_FALSE(files.enabled());
  EXPECT_EQ(files.PathFor(0), std::filesystem::path());
  EXPECT_NE(files.problem().find("/nonexistent-distrun-tmp (No such file or directory); set TMPDIR"),
            std::string::npos)
      << files.problem();
}

}  // namespace
}  // namespace distrun
