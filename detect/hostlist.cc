// Placeholder until the hostlist parser lands.
#include "detect/hostlist.h"

#include "detect/errors.h"

namespace distrun {
std::vector<std::string> ExpandHostlist(std::string_view what, std::string_view) {
  throw UsageError(std::string(what) + ": hostlists not built yet");
}
std::vector<int> ExpandTaskCounts(std::string_view what, std::string_view) {
  throw UsageError(std::string(what) + ": counts not built yet");
}
}  // namespace distrun
