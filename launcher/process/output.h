#pragma once
// Worker output on distrun's console and in --log-dir files (DESIGN §3.2). Lines are assembled per worker
// and stream; each complete line goes to the console with its worker's prefix in one write(), so lines of
// different workers never interleave mid-line. Nothing else writes worker output.
//
// A line longer than kMaxLineBytes is written in pieces of that size, each as its own prefixed line, so
// that memory stays bounded whatever a worker prints. A last line without a newline gets one at EOF.
// Log files get each worker's bytes unchanged: DIR/rank-<rank>.out and DIR/rank-<rank>.err.
// torchrun's -r/--redirects and -t/--tee choose, per local rank, which streams go to the files only or to
// them as well.

#include <cstddef>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/process/stream_choice.h"
#include "launcher/process/unique_fd.h"

namespace spdlog {
class logger;
}

namespace distrun {

inline constexpr size_t kMaxLineBytes = size_t{1} << 20;

// Splits a byte stream into lines.
class LineAssembler {
 public:
  using Emit = std::function<void(std::string_view line)>;  // the line without its '\n'

  explicit LineAssembler(size_t max_line = kMaxLineBytes) : max_line_(max_line) {}
  // Emits every line completed by `data`; a partial line is kept, or emitted in max_line pieces.
  void Feed(std::string_view data, const Emit& emit);
  // End of the stream: emits the partial last line, if any.
  void Finish(const Emit& emit);
  size_t pending() const { return partial_.size(); }

 private:
  size_t max_line_;
  std::string partial_;
};

// --tag-template: text with {rank}, {local_rank} and {host}. Throws UsageError naming `where` for any
// other "{...}".
void ValidateTagTemplate(const std::string& where, const std::string& tmpl);
std::string RenderTag(const std::string& tmpl, int rank, int local_rank, const std::string& host);

// --ranks-filter: "0,3", "0-3,8". Throws UsageError naming `where`.
std::vector<int> ParseRankList(const std::string& where, const std::string& value);

enum class Stream { kStdout = 0, kStderr = 1 };

struct OutputSettings {
  bool tag = false;
  std::string tag_template = "[{rank}] ";
  std::string host;
  std::optional<std::filesystem::path> log_dir;
  std::optional<std::vector<int>> ranks_filter;        // console only; unset: every rank
  std::optional<std::vector<int>> local_ranks_filter;  // console only, by local rank; unset: every one
  // torchrun's -r and -t: the streams of a local rank that go to the log files only, or to them as well. With
  // either given, a log file holds only the streams they name; with neither, every stream (--log-dir).
  StreamChoice redirects;
  StreamChoice tee;
  int stdout_fd = 1;
  int stderr_fd = 2;
  std::optional<bool> colour;  // unset: colour the prefix only where the fd is a terminal
  size_t max_line = kMaxLineBytes;
  size_t tail_lines = 10;               // stderr lines kept per worker for the failure summary
  std::shared_ptr<spdlog::logger> log;  // for write errors; may be null
};

class Output {
 public:
  // Creates the log directory; throws UsageError when it cannot.
  explicit Output(OutputSettings settings);
  ~Output();

  // Begins worker `slot`'s streams for a (re)started worker. Log files are opened (truncated) the first
  // time a rank is seen and appended to across restarts.
  void StartWorker(size_t slot, int rank, int local_rank);
  // The worker in `slot` goes on under another rank (a new world recovered in place): its tag, filters and
  // log files are the new rank's from the next line on; a partial line and the stderr tail are kept.
  void Relabel(size_t slot, int rank, int local_rank);
  void Write(size_t slot, Stream stream, std::string_view data);
  // End of the stream: the partial last line is written with a newline.
  void Finish(size_t slot, Stream stream);
  // The last lines the worker wrote to stderr, oldest first.
  std::vector<std::string> StderrTail(size_t slot) const;
  // Whether distrun's own stdout or stderr failed (the reader went away): that console gets nothing more.
  bool ConsoleBroken(Stream stream) const { return console_failed_[static_cast<int>(stream)]; }

 private:
  struct Worker {
    int rank = 0;
    bool shown[2] = {true, true};    // on the console, per stream
    bool to_file[2] = {true, true};  // in the log files, per stream
    std::string prefix[2];           // per stream: coloured where that stream is a terminal
    LineAssembler lines[2];
    std::deque<std::string> tail;
  };
  struct Files {
    UniqueFd fd[2];
    bool failed[2] = {false, false};
  };

  void EmitLine(Worker& w, Stream stream, std::string_view line);
  void WriteConsole(Stream stream, const std::string& text);
  void WriteFile(int rank, Stream stream, std::string_view data);

  OutputSettings settings_;
  bool colour_[2] = {false, false};
  bool console_failed_[2] = {false, false};
  std::map<size_t, Worker> workers_;
  std::map<int, Files> files_;
  std::string buffer_;
};

// A new directory for the workers' log files under `parent` (torchrun's -r/-t without --log-dir):
// PARENT/distrun-logs-XXXXXX. Throws UsageError when it cannot be made.
std::string MakeLogDir(const std::string& parent);

// distrun's own messages ("distrun: warning: ..."), on `fd` with one write() per message, the level word
// coloured only on a terminal. `level` as --log-level.
std::shared_ptr<spdlog::logger> MakeLogger(const std::string& level, int fd = 2);

// write() until everything is written or an error other than EINTR; false on error.
bool WriteAll(int fd, std::string_view data);

}  // namespace distrun
