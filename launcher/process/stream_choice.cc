#include "launcher/process/stream_choice.h"

#include "detect/errors.h"
#include "detect/parse.h"

namespace distrun {
namespace {

[[noreturn]] void Bad(const std::string& where, const std::string& value) {
  throw UsageError(where + "='" + value +
                   "' is not valid; use 0 (no stream), 1 (stdout), 2 (stderr) or 3 (both), for every "
                   "local rank or per local rank: 0:3,1:2");
}

int Streams(const std::string& where, const std::string& whole, std::string_view digit) {
  if (digit.size() != 1 || digit[0] < '0' || digit[0] > '3') Bad(where, whole);
  return digit[0] - '0';
}

}  // namespace

int StreamChoice::For(int local_rank) const {
  if (every) return *every;
  auto it = by_local_rank.find(local_rank);
  return it == by_local_rank.end() ? 0 : it->second;
}

StreamChoice ParseStreamChoice(const std::string& where, const std::string& value) {
  StreamChoice choice;
  const std::string_view text = Trim(value);
  if (text.find(':') == std::string_view::npos) {
    choice.every = Streams(where, value, text);
    return choice;
  }
  for (const std::string& item : Split(std::string(text), ',')) {
    const size_t colon = item.find(':');
    if (colon == std::string::npos) Bad(where, value);
    int local_rank = 0;
    try {
      local_rank = ParseCount(where, std::string(Trim(item.substr(0, colon))));
    } catch (const UsageError&) {
      Bad(where, value);
    }
    choice.by_local_rank[local_rank] = Streams(where, value, Trim(item.substr(colon + 1)));
  }
  return choice;
}

}  // namespace distrun
