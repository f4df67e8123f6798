// Fuzzes detection end to end: the input is "NAME=value" lines forming an environment; every detector and
// the plan must either succeed or throw UsageError — never crash, hang or throw anything else.

#include <cstddef>
#include <cstdint>
#include <string>

#include "detect/detection.h"
#include "plan_without_sockets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace distrun;
  std::string text(reinterpret_cast<const char*>(data), size);
  Environment env;
  env.hostname = "fuzzhost";
  env.root = "/nonexistent-distrun-fuzz-root";  // no file look-up may escape into the real system
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    size_t eq = line.find('=');
    if (eq != std::string::npos && eq > 0) env.vars[line.substr(0, eq)] = line.substr(eq + 1);
    start = end + 1;
  }
  for (const std::string& method : DetectionMethodNames()) PlanWithoutSockets(env, method);
  return 0;
}
