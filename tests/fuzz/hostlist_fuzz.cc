// libFuzzer target for Slurm hostlist expansion: any exception other than UsageError, a crash, a leak
// or a sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "detect/errors.h"
#include "detect/hostlist.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  try {
    auto hosts = distrun::ExpandHostlist("SLURM_STEP_NODELIST", input);
    // Every host is non-empty text, and the caps hold.
    if (hosts.size() > distrun::kMaxHostlistHosts) __builtin_trap();
    for (const auto& host : hosts) {
      if (host.empty()) __builtin_trap();
    }
  } catch (const distrun::UsageError&) {
  }
  return 0;
}
