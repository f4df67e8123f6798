// libFuzzer target for the compressed count syntax "2(x3),1": anything but a UsageError or a valid
// expansion within the cap is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "detect/errors.h"
#include "detect/hostlist.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  try {
    auto counts = distrun::ExpandTaskCounts("SLURM_STEP_TASKS_PER_NODE", input);
    if (counts.empty() || counts.size() > distrun::kMaxTaskCounts) __builtin_trap();
    for (int c : counts) {
      if (c < 0) __builtin_trap();
    }
  } catch (const distrun::UsageError&) {
  }
  return 0;
}
