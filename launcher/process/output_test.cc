#include "launcher/process/output.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "detect/errors.h"

namespace distrun {
namespace {

std::vector<std::string> Feed(LineAssembler& a, std::initializer_list<std::string_view> chunks) {
  std::vector<std::string> lines;
  for (std::string_view c : chunks) a.Feed(c, [&](std::string_view l) { lines.emplace_back(l); });
  return lines;
}

// A pipe standing in for the console; Read() takes what was written so far.
struct Capture {
  UniqueFd read_end, write_end;
  Capture() {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
    read_end.Reset(fds[0]);
    write_end.Reset(fds[1]);
  }
  std::string Read() {
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(read_end.get(), buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
    return out;
  }
};

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(OutputLines, CompleteLinesOnly) {
  LineAssembler a;
  EXPECT_EQ(Feed(a, {"one\ntw", "o\nthr", "ee"}), (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(a.pending(), 5u);  // "three"
  std::vector<std::string> rest;
  a.Finish([&](std::string_view l) { rest.emplace_back(l); });
  EXPECT_EQ(rest, (std::vector<std::string>{"three"}));
  EXPECT_EQ(a.pending(), 0u);
}

TEST(OutputLines, EmptyLinesAndSeveralLinesPerChunk) {
  LineAssembler a;
  EXPECT_EQ(Feed(a, {"\n\na\nb\n"}), (std::vector<std::string>{"", "", "a", "b"}));
  std::vector<std::string> rest;
  a.Finish([&](std::string_view l) { rest.emplace_back(l); });
  EXPECT_TRUE(rest.empty()) << "no partial line: nothing at EOF";
}

TEST(OutputLines, ByteByByte) {
  LineAssembler a;
  std::vector<std::string> lines;
  for (char c : std::string("ab\ncd\n")) {
    a.Feed(std::string_view(&c, 1), [&](std::string_view l) { lines.emplace_back(l); });
  }
  EXPECT_EQ(lines, (std::vector<std::string>{"ab", "cd"}));
}

TEST(OutputLines, LongLinesAreCutIntoBoundedPieces) {
  LineAssembler a(4);
  EXPECT_EQ(Feed(a, {"abcdefghij"}), (std::vector<std::string>{"abcd", "efgh"}));
  EXPECT_EQ(a.pending(), 2u);
  EXPECT_EQ(Feed(a, {"k\n"}), (std::vector<std::string>{"ijk"}));
  // A complete long line in one chunk is cut the same way.
  EXPECT_EQ(Feed(a, {"0123456789\n"}), (std::vector<std::string>{"0123", "4567", "89"}));
  EXPECT_EQ(Feed(a, {"12\n3456\n"}), (std::vector<std::string>{"12", "3456"}));
}

TEST(OutputLines, MemoryStaysBoundedForAnEndlessLine) {
  LineAssembler a(1024);
  std::string chunk(1000, 'x');
  size_t emitted = 0;
  for (int i = 0; i < 1000; ++i) {
    a.Feed(chunk, [&](std::string_view l) {
      EXPECT_EQ(l.size(), 1024u);
      emitted += l.size();
    });
    EXPECT_LT(a.pending(), 1024u);
  }
  EXPECT_EQ(emitted + a.pending(), 1000u * 1000u);
}

TEST(OutputLines, DefaultLimitIsOneMebibyte) { EXPECT_EQ(kMaxLineBytes, 1024u * 1024u); }

TEST(OutputTags, Placeholders) {
  EXPECT_EQ(RenderTag("[{rank}] ", 3, 1, "n1"), "[3] ");
  EXPECT_EQ(RenderTag("{host}:{local_rank}/{rank}| ", 12, 4, "node7"), "node7:4/12| ");
  EXPECT_EQ(RenderTag("plain", 0, 0, "h"), "plain");
  EXPECT_EQ(RenderTag("", 0, 0, "h"), "");
}

TEST(OutputTags, UnknownPlaceholdersAreRejected) {
  EXPECT_NO_THROW(ValidateTagTemplate("--tag-template", "[{rank}] {host} {local_rank}"));
  EXPECT_NO_THROW(ValidateTagTemplate("--tag-template", "} no placeholder"));
  try {
    ValidateTagTemplate("--tag-template", "[{rnak}] ");
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("{rnak}"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--tag-template"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ValidateTagTemplate("--tag-template", "[{rank"), UsageError);
}

TEST(OutputRanks, ListsAndRanges) {
  EXPECT_EQ(ParseRankList("--ranks-filter", "0,3"), (std::vector<int>{0, 3}));
  EXPECT_EQ(ParseRankList("--ranks-filter", "8, 0-2 ,1"), (std::vector<int>{0, 1, 2, 8}));
  EXPECT_THROW(ParseRankList("--ranks-filter", ""), UsageError);
  EXPECT_THROW(ParseRankList("--ranks-filter", "1,,2"), UsageError);
  EXPECT_THROW(ParseRankList("--ranks-filter", "-1"), UsageError);
  EXPECT_THROW(ParseRankList("--ranks-filter", "3-1"), UsageError);
  EXPECT_THROW(ParseRankList("--ranks-filter", "a"), UsageError);
  EXPECT_THROW(ParseRankList("--ranks-filter", "0-100000000"), UsageError);
  try {
    ParseRankList("DISTRUN_RANKS_FILTER", "x");
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("DISTRUN_RANKS_FILTER='x'"), std::string::npos) << e.what();
  }
}

TEST(OutputConsole, PrefixedCompleteLinesPerStream) {
  Capture out, err;
  OutputSettings s;
  s.tag = true;
  s.tag_template = "[{rank}:{local_rank}@{host}] ";
  s.host = "h";
  s.stdout_fd = out.write_end.get();
  s.stderr_fd = err.write_end.get();
  s.colour = false;
  Output o(s);
  o.StartWorker(0, 4, 0);
  o.StartWorker(1, 5, 1);
  o.Write(0, Stream::kStdout, "hel");
  o.Write(1, Stream::kStdout, "other\nsecond ");
  o.Write(0, Stream::kStdout, "lo\n");
  o.Write(1, Stream::kStderr, "oops\n");
  EXPECT_EQ(out.Read(), "[5:1@h] other\n[4:0@h] hello\n");
  EXPECT_EQ(err.Read(), "[5:1@h] oops\n");
  o.Finish(1, Stream::kStdout);
  EXPECT_EQ(out.Read(), "[5:1@h] second \n") << "a partial last line gets a newline at EOF";
}

TEST(OutputConsole, UntaggedAndColoured) {
  Capture out, err;
  OutputSettings s;
  s.stdout_fd = out.write_end.get();
  s.stderr_fd = err.write_end.get();
  s.colour = false;
  {
    Output o(s);
    o.StartWorker(0, 0, 0);
    o.Write(0, Stream::kStdout, "x\n");
    EXPECT_EQ(out.Read(), "x\n");
  }
  s.tag = true;
  s.colour = true;
  Output o(s);
  o.StartWorker(0, 2, 0);
  o.Write(0, Stream::kStdout, "x\n");
  std::string text = out.Read();
  EXPECT_NE(text.find("\x1b["), std::string::npos);
  EXPECT_NE(text.find("[2] "), std::string::npos);
  EXPECT_TRUE(text.ends_with("\x1b[0mx\n")) << text;
}

TEST(OutputConsole, ColourFollowsTheTerminal) {
  // A pipe is not a terminal: no escape codes unless asked for.
  Capture out, err;
  OutputSettings s;
  s.tag = true;
  s.stdout_fd = out.write_end.get();
  s.stderr_fd = err.write_end.get();
  Output o(s);
  o.StartWorker(0, 1, 0);
  o.Write(0, Stream::kStdout, "x\n");
  EXPECT_EQ(out.Read(), "[1] x\n");
}

TEST(OutputConsole, RanksFilterHidesOtherRanksButKeepsTheirTail) {
  Capture out, err;
  OutputSettings s;
  s.tag = true;
  s.stdout_fd = out.write_end.get();
  s.stderr_fd = err.write_end.get();
  s.colour = false;
  s.ranks_filter = std::vector<int>{0, 3};
  s.tail_lines = 2;
  Output o(s);
  for (size_t slot = 0; slot < 4; ++slot) o.StartWorker(slot, static_cast<int>(slot), static_cast<int>(slot));
  for (size_t slot = 0; slot < 4; ++slot) {
    o.Write(slot, Stream::kStdout, "out\n");
    o.Write(slot, Stream::kStderr, "e1\ne2\ne3\n");
  }
  EXPECT_EQ(out.Read(), "[0] out\n[3] out\n");
  EXPECT_EQ(err.Read(), "[0] e1\n[0] e2\n[0] e3\n[3] e1\n[3] e2\n[3] e3\n");
  EXPECT_EQ(o.StderrTail(1), (std::vector<std::string>{"e2", "e3"}));
  EXPECT_TRUE(o.StderrTail(9).empty());
}

TEST(OutputConsole, LongLineIsWrittenInOnePiecePerLimit) {
  Capture out, err;
  OutputSettings s;
  s.tag = true;
  s.stdout_fd = out.write_end.get();
  s.stderr_fd = err.write_end.get();
  s.colour = false;
  s.max_line = 8;
  Output o(s);
  o.StartWorker(0, 0, 0);
  o.Write(0, Stream::kStdout, "0123456789abcdefXY\n");
  EXPECT_EQ(out.Read(), "[0] 01234567\n[0] 89abcdef\n[0] XY\n");
}

TEST(OutputFiles, PerRankFilesGetEveryByteAndSurviveRestarts) {
  auto dir = std::filesystem::temp_directory_path() / ("distrun-output-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  Capture out, err;
  OutputSettings s;
  s.tag = true;
  s.stdout_fd = out.write_end.get();
  s.stderr_fd = err.write_end.get();
  s.colour = false;
  s.log_dir = dir / "nested";
  s.ranks_filter = std::vector<int>{0};
  {
    Output o(s);
    o.StartWorker(0, 0, 0);
    o.StartWorker(1, 1, 1);
    o.Write(0, Stream::kStdout, "a\nb");
    o.Write(1, Stream::kStderr, "hidden on the console\n");
    o.Finish(0, Stream::kStdout);
    // A restart: the same ranks append.
    o.StartWorker(0, 0, 0);
    o.Write(0, Stream::kStdout, "c\n");
  }
  EXPECT_EQ(ReadFile(dir / "nested" / "rank-0.out"), "a\nbc\n") << "files get the bytes unchanged";
  EXPECT_EQ(ReadFile(dir / "nested" / "rank-0.err"), "");
  EXPECT_EQ(ReadFile(dir / "nested" / "rank-1.err"), "hidden on the console\n");
  EXPECT_EQ(err.Read(), "");
  // A later job with the same directory starts fresh files.
  {
    Output o(s);
    o.StartWorker(0, 0, 0);
    o.Write(0, Stream::kStdout, "new\n");
  }
  EXPECT_EQ(ReadFile(dir / "nested" / "rank-0.out"), "new\n");
  std::filesystem::remove_all(dir);
}

TEST(OutputFiles, UnusableDirectoryIsAUsageError) {
  OutputSettings s;
  s.log_dir = "/proc/version/logs";  // under a file
  EXPECT_THROW(Output o(s), UsageError);
}

TEST(OutputConsole, ClosedConsoleDropsOutputWithoutFailing) {
  Capture out, err;
  OutputSettings s;
  s.stdout_fd = out.write_end.get();
  s.stderr_fd = err.write_end.get();
  s.colour = false;
  Output o(s);
  o.StartWorker(0, 0, 0);
  out.read_end.Reset();
  struct sigaction ignore {
  }, old{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &old);
  o.Write(0, Stream::kStdout, "nobody reads this\n");
  o.Write(0, Stream::kStdout, "nor this\n");
  o.Write(0, Stream::kStderr, "but this\n");
  ::sigaction(SIGPIPE, &old, nullptr);
  EXPECT_EQ(err.Read(), "but this\n");
}

}  // namespace
}  // namespace distrun
