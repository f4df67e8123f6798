#include "launcher/process/output.h"

#include <fcntl.h>
#include <spdlog/details/null_mutex.h>
#include <spdlog/logger.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>
#include <sys/select.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <system_error>

#include "detect/errors.h"
#include "detect/parse.h"

namespace distrun {
namespace {

constexpr size_t kTailLineBytes = 2000;  // a summary shows the start of very long lines only
constexpr const char* kReset = "\x1b[0m";
// Distinct, readable on dark and light terminals; red is left for errors.
constexpr const char* kRankColours[] = {"\x1b[36m", "\x1b[32m", "\x1b[33m", "\x1b[35m", "\x1b[34m",
                                        "\x1b[96m", "\x1b[92m", "\x1b[93m", "\x1b[95m", "\x1b[94m"};

constexpr const char* kPlaceholders[] = {"rank", "local_rank", "host"};

// distrun's messages: formatted by spdlog, written with one write() like worker lines.
class FdSink final : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 public:
  FdSink(int fd, bool colour) : fd_(fd), colour_(colour) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    std::string text(formatted.data(), formatted.size());
    if (colour_ && msg.color_range_end > msg.color_range_start) {
      const char* code = msg.level >= spdlog::level::err     ? "\x1b[1;31m"
                         : msg.level == spdlog::level::warn  ? "\x1b[33m"
                         : msg.level <= spdlog::level::debug ? "\x1b[2m"
                                                             : "";
      if (*code != '\0') {
        text.insert(msg.color_range_end, kReset);
        text.insert(msg.color_range_start, code);
      }
    }
    WriteAll(fd_, text);
  }
  void flush_() override {}

 private:
  int fd_;
  bool colour_;
};

}  // namespace

bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        // A non-blocking console (shared with another program): wait until it takes more.
        fd_set set;
        FD_ZERO(&set);
        FD_SET(fd, &set);
        ::select(fd + 1, nullptr, &set, nullptr, nullptr);
        continue;
      }
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void LineAssembler::Feed(std::string_view data, const Emit& emit) {
  while (!data.empty()) {
    size_t newline = data.find('\n');
    if (newline == std::string_view::npos) {
      partial_.append(data);
      // Bounded memory: an endless line is passed on in pieces.
      while (partial_.size() >= max_line_) {
        emit(std::string_view(partial_).substr(0, max_line_));
        partial_.erase(0, max_line_);
      }
      return;
    }
    std::string_view head = data.substr(0, newline);
    data.remove_prefix(newline + 1);
    if (partial_.empty()) {
      // The common case: a whole line in one read, passed on without a copy.
      while (head.size() > max_line_) {
        emit(head.substr(0, max_line_));
        head.remove_prefix(max_line_);
      }
      emit(head);
      continue;
    }
    partial_.append(head);
    std::string_view whole = partial_;
    while (whole.size() > max_line_) {
      emit(whole.substr(0, max_line_));
      whole.remove_prefix(max_line_);
    }
    emit(whole);
    partial_.clear();
  }
}

void LineAssembler::Finish(const Emit& emit) {
  if (!partial_.empty()) emit(partial_);
  partial_.clear();
}

void ValidateTagTemplate(const std::string& where, const std::string& tmpl) {
  for (size_t open = tmpl.find('{'); open != std::string::npos; open = tmpl.find('{', open + 1)) {
    size_t close = tmpl.find('}', open);
    std::string name =
        close == std::string::npos ? tmpl.substr(open) : tmpl.substr(open + 1, close - open - 1);
    if (close == std::string::npos ||
        std::find_if(std::begin(kPlaceholders), std::end(kPlaceholders),
                     [&](const char* p) { return name == p; }) == std::end(kPlaceholders)) {
      throw UsageError(where + "='" + tmpl + "' is not valid; '" +
                       (close == std::string::npos ? name : "{" + name + "}") +
                       "' is not a placeholder; use {rank}, {local_rank} and {host}");
    }
  }
}

std::string RenderTag(const std::string& tmpl, int rank, int local_rank, const std::string& host) {
  std::string out;
  size_t pos = 0;
  while (pos < tmpl.size()) {
    size_t open = tmpl.find('{', pos);
    size_t close = open == std::string::npos ? std::string::npos : tmpl.find('}', open);
    if (close == std::string::npos) {
      out += tmpl.substr(pos);
      break;
    }
    out += tmpl.substr(pos, open - pos);
    std::string name = tmpl.substr(open + 1, close - open - 1);
    if (name == "rank")
      out += std::to_string(rank);
    else if (name == "local_rank")
      out += std::to_string(local_rank);
    else if (name == "host")
      out += host;
    else
      out += tmpl.substr(open, close - open + 1);
    pos = close + 1;
  }
  return out;
}

std::vector<int> ParseRankList(const std::string& where, const std::string& value) {
  constexpr int kMaxRange = 65536;
  auto bad = [&](const std::string& why) {
    throw UsageError(where + "='" + value + "' is not valid; " + why);
  };
  std::set<int> ranks;
  for (const std::string& item : Split(value, ',')) {
    std::string_view t = Trim(item);
    if (t.empty()) bad("use ranks and ranges like 0,3 or 0-3,8 without empty items");
    size_t dash = t.find('-');
    try {
      if (dash == std::string_view::npos) {
        ranks.insert(ParseCount(where, t));
        continue;
      }
      int lo = ParseCount(where, Trim(t.substr(0, dash)));
      int hi = ParseCount(where, Trim(t.substr(dash + 1)));
      if (hi < lo) bad("the range " + std::string(t) + " is empty; write it low-high");
      if (hi - lo >= kMaxRange) bad("the range " + std::string(t) + " is longer than 65536 ranks");
      for (int r = lo; r <= hi; ++r) ranks.insert(r);
    } catch (const UsageError& e) {
      if (std::string(e.what()).starts_with(where + "='" + value + "'")) throw;
      bad("'" + std::string(t) + "' is not a rank; use ranks and ranges like 0,3 or 0-3,8");
    }
  }
  return {ranks.begin(), ranks.end()};
}

Output::Output(OutputSettings settings) : settings_(std::move(settings)) {
  const int fds[2] = {settings_.stdout_fd, settings_.stderr_fd};
  for (int s = 0; s < 2; ++s) colour_[s] = settings_.colour.value_or(::isatty(fds[s]) == 1);
  if (settings_.log_dir) {
    std::error_code ec;
    std::filesystem::create_directories(*settings_.log_dir, ec);
    if (ec || ::access(settings_.log_dir->c_str(), W_OK | X_OK) != 0) {
      std::string why = ec ? ec.message() : std::strerror(errno);
      throw UsageError("--log-dir '" + settings_.log_dir->string() + "' cannot be used (" + why +
                       "); name a directory distrun can create and write");
    }
  }
}

Output::~Output() = default;

void Output::StartWorker(size_t slot, int rank, int local_rank) {
  Worker& w = workers_[slot];
  for (int s = 0; s < 2; ++s) w.lines[s] = LineAssembler(settings_.max_line);
  w.tail.clear();
  Relabel(slot, rank, local_rank);
}

void Output::Relabel(size_t slot, int rank, int local_rank) {
  Worker& w = workers_[slot];
  w.rank = rank;
  const bool shown =
      (!settings_.ranks_filter ||
       std::binary_search(settings_.ranks_filter->begin(), settings_.ranks_filter->end(), rank)) &&
      (!settings_.local_ranks_filter || std::binary_search(settings_.local_ranks_filter->begin(),
                                                           settings_.local_ranks_filter->end(), local_rank));
  const bool chosen = settings_.redirects.given() || settings_.tee.given();
  const int redirected = settings_.redirects.For(local_rank);
  const int teed = settings_.tee.For(local_rank);
  const int bits[2] = {kStdoutBit, kStderrBit};
  for (int s = 0; s < 2; ++s) {
    w.shown[s] = shown && (redirected & bits[s]) == 0;
    w.to_file[s] = !chosen || ((redirected | teed) & bits[s]) != 0;
  }
  for (int s = 0; s < 2; ++s) {
    w.prefix[s].clear();
    if (!settings_.tag) continue;
    std::string tag = RenderTag(settings_.tag_template, rank, local_rank, settings_.host);
    w.prefix[s] =
        colour_[s] ? kRankColours[static_cast<size_t>(rank) % std::size(kRankColours)] + tag + kReset : tag;
  }
  if (settings_.log_dir && !files_.contains(rank)) {
    Files& f = files_[rank];
    const char* suffix[2] = {".out", ".err"};
    for (int s = 0; s < 2; ++s) {
      if (!w.to_file[s]) continue;
      std::filesystem::path path = *settings_.log_dir / ("rank-" + std::to_string(rank) + suffix[s]);
      f.fd[s].Reset(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
      if (!f.fd[s] && settings_.log) {
        settings_.log->warn("cannot write {}: {}; rank {}'s output goes to the console only", path.string(),
                            std::strerror(errno), rank);
      }
    }
  }
}

void Output::Write(size_t slot, Stream stream, std::string_view data) {
  auto it = workers_.find(slot);
  if (it == workers_.end()) return;
  Worker& w = it->second;
  WriteFile(w.rank, stream, data);
  w.lines[static_cast<int>(stream)].Feed(data, [&](std::string_view line) { EmitLine(w, stream, line); });
}

void Output::Finish(size_t slot, Stream stream) {
  auto it = workers_.find(slot);
  if (it == workers_.end()) return;
  Worker& w = it->second;
  w.lines[static_cast<int>(stream)].Finish([&](std::string_view line) { EmitLine(w, stream, line); });
}

std::vector<std::string> Output::StderrTail(size_t slot) const {
  auto it = workers_.find(slot);
  if (it == workers_.end()) return {};
  return {it->second.tail.begin(), it->second.tail.end()};
}

void Output::EmitLine(Worker& w, Stream stream, std::string_view line) {
  if (stream == Stream::kStderr && settings_.tail_lines > 0) {
    w.tail.emplace_back(line.substr(0, kTailLineBytes));
    while (w.tail.size() > settings_.tail_lines) w.tail.pop_front();
  }
  if (!w.shown[static_cast<int>(stream)]) return;
  const std::string& prefix = w.prefix[static_cast<int>(stream)];
  buffer_.clear();
  buffer_.reserve(prefix.size() + line.size() + 1);
  buffer_.append(prefix).append(line).push_back('\n');
  WriteConsole(stream, buffer_);
}

void Output::WriteConsole(Stream stream, const std::string& text) {
  const int s = static_cast<int>(stream);
  if (console_failed_[s]) return;
  const int fd = s == 0 ? settings_.stdout_fd : settings_.stderr_fd;
  if (!WriteAll(fd, text)) {
    // A closed console (`distrun ... | head`): the supervisor decides what the workers see (ConsoleBroken).
    console_failed_[s] = true;
    if (settings_.log && s == 0) {
      settings_.log->debug("cannot write workers' stdout to distrun's ({}); {}", std::strerror(errno),
                           settings_.log_dir ? "the console gets no more of it (--log-dir keeps it)"
                                             : "closing the workers' stdout too");
    }
  }
}

void Output::WriteFile(int rank, Stream stream, std::string_view data) {
  auto it = files_.find(rank);
  if (it == files_.end()) return;
  const int s = static_cast<int>(stream);
  Files& f = it->second;
  if (!f.fd[s] || f.failed[s]) return;
  if (!WriteAll(f.fd[s].get(), data)) {
    f.failed[s] = true;
    if (settings_.log) {
      settings_.log->warn("writing rank {}'s {} to --log-dir failed ({}); the file is incomplete", rank,
                          s == 0 ? "stdout" : "stderr", std::strerror(errno));
    }
  }
}

std::string MakeLogDir(const std::string& parent) {
  std::string dir = parent + "/distrun-logs-XXXXXX";
  if (::mkdtemp(dir.data()) == nullptr) {
    throw UsageError("cannot make a directory for the workers' log files in " + parent + " (" +
                     std::strerror(errno) + "); name one with --log-dir");
  }
  return dir;
}

std::shared_ptr<spdlog::logger> MakeLogger(const std::string& level, int fd) {
  auto sink = std::make_shared<FdSink>(fd, ::isatty(fd) == 1);
  auto logger = std::make_shared<spdlog::logger>("distrun", std::move(sink));
  logger->set_pattern("distrun: %^%l%$: %v");
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::trace);
  return logger;
}

}  // namespace distrun
