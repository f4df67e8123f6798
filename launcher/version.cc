#include "launcher/version.h"

namespace distrun {

const char* Version() { return DISTRUN_VERSION; }

// DISTRUN_WITH_* come from cmake/features.cmake, for this file only.
std::vector<std::string> Features() {
  std::vector<std::string> features = {"cuda-driver"};
#ifdef DISTRUN_WITH_NCCL
  features.emplace_back("nccl");
#endif
  return features;
}

std::string VersionLine() {
  std::string line = std::string("distrun ") + Version() + " (features: ";
  const std::vector<std::string> features = Features();
  for (size_t i = 0; i < features.size(); ++i) line += (i ? ", " : "") + features[i];
  return line + ")";
}

}  // namespace distrun
