#pragma once
// torch's error files: each worker gets TORCHELASTIC_ERROR_FILE, a path of its own, as torchrun gives; a
// worker whose main is decorated with torch's @record writes its uncaught exception there as JSON before it
// exits, and the failure summary shows that exception and its traceback instead of only stderr's last lines.
//
// The files live in --log-dir (rank-R.error.json beside rank-R.out and rank-R.err, kept for the post-mortem)
// or else in a private directory made under TMPDIR at launch and removed when distrun ends.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace distrun {

inline constexpr std::string_view kTorchErrorFileVariable = "TORCHELASTIC_ERROR_FILE";

// What torch wrote: {"message": {"message": "Type: text", "extraInfo": {"py_callstack": "...",
// "timestamp": "..."}}}, or a plain string message (torch's newer C++-side errors).
struct TorchError {
  std::string message;    // "ValueError: bad learning rate"
  std::string traceback;  // Python's formatted traceback; may be empty
};

// Parses an error file's content. A file that is not torch's format gives the reason in `problem`.
std::optional<TorchError> ParseTorchErrorFile(std::string_view json, std::string* problem);

// The failure summary's lines for `error` (each starts with a newline and is indented): the exception,
// then the traceback's last lines, where Python names the failing frame.
std::string FormatTorchError(int rank, const TorchError& error);

class ErrorFiles {
 public:
  // `log_dir` set: the files go there. Otherwise a private directory under `temp_dir` is made; when that
  // fails, `problem()` says why and no worker gets an error file.
  ErrorFiles(const std::optional<std::filesystem::path>& log_dir, const std::filesystem::path& temp_dir);
  ~ErrorFiles();
  ErrorFiles(const ErrorFiles&) = delete;
  ErrorFiles& operator=(const ErrorFiles&) = delete;

  bool enabled() const { return !dir_.empty(); }
  // The private directory distrun made (and removes at the end); empty with --log-dir.
  std::filesystem::path private_directory() const { return owned_ ? dir_ : std::filesystem::path(); }
  const std::string& problem() const { return problem_; }

  // Where rank `rank` writes; empty when disabled.
  std::filesystem::path PathFor(int rank) const;
  // Removes what an earlier start of `rank` wrote, so that a restart never reports a stale exception.
  void Clear(int rank) const;
  // What rank `rank` wrote, if it wrote anything torch's way; `problem` says why a file that is there
  // could not be used.
  std::optional<TorchError> Read(int rank, std::string* problem) const;

 private:
  std::filesystem::path dir_;
  bool owned_ = false;  // a private directory, removed at the end
  std::string problem_;
};

}  // namespace distrun
