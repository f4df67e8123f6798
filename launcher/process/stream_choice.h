#pragma once
// Which of a worker's streams a choice takes: torchrun's -r/--redirects and -t/--tee values, "0" to "3"
// (none, stdout, stderr, both) for every local rank, or per local rank ("0:1,1:3"; unnamed ones: none).

#include <map>
#include <optional>
#include <string>

namespace distrun {

inline constexpr int kStdoutBit = 1;
inline constexpr int kStderrBit = 2;

struct StreamChoice {
  std::optional<int> every;          // the value for every local rank
  std::map<int, int> by_local_rank;  // or these

  bool given() const { return every.has_value() || !by_local_rank.empty(); }
  // kStdoutBit | kStderrBit of the streams chosen for `local_rank`.
  int For(int local_rank) const;
};

// Throws UsageError naming `where` for anything but the forms above.
StreamChoice ParseStreamChoice(const std::string& where, const std::string& value);

}  // namespace distrun
