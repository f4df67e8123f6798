// libFuzzer target for slurm.conf's text as distrun reads it to find munged's socket
// (runtime/auth/slurm_conf.h ParseSlurmConfText): the cluster's file, or any file an Include names. It never
// throws: any exception, a crash, a leak, a sanitizer report, or an item that breaks what the reader relies
// on (an Include's file without surrounding blanks, a socket without a ',' of AuthInfo's options) is a
// finding.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/auth/slurm_conf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using distrun::SlurmConfItem;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const SlurmConfItem& item : distrun::ParseSlurmConfText(text)) {
    if (item.value.find_first_of("\n#") != std::string_view::npos) __builtin_trap();  // one line, no comment
    if (item.kind == SlurmConfItem::Kind::kInclude && !item.value.empty() &&
        (std::isspace(static_cast<unsigned char>(item.value.front())) ||
         std::isspace(static_cast<unsigned char>(item.value.back())))) {
      __builtin_trap();
    }
    if (item.kind == SlurmConfItem::Kind::kAuthInfo &&
        item.value.find_first_of(", \t\r") != std::string_view::npos) {
      __builtin_trap();
    }
  }
  return 0;
}
