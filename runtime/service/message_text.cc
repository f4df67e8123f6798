#include "runtime/service/message_text.h"

#include <algorithm>
#include <cstdio>

namespace distrun {

std::string MeasuredSeconds(std::chrono::milliseconds d) {
  const double s = static_cast<double>(d.count()) / 1000.0;
  char buf[32];
  std::snprintf(buf, sizeof buf, s < 10 ? "%.1fs" : "%.0fs", s);
  return buf;
}

std::string JoinNames(const std::vector<std::string>& names, size_t total) {
  std::string out;
  size_t shown = std::min(names.size(), kMaxNamesInMessage);
  for (size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + names[i];
  if (total > shown) out += " and " + std::to_string(total - shown) + " more";
  return out;
}

std::string JoinNames(const std::vector<std::string>& names) { return JoinNames(names, names.size()); }

}  // namespace distrun
