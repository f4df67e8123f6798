#include "launcher/process/companion_files.h"

#include <unistd.h>

#include <filesystem>

namespace distrun {

std::string FindCompanionFile(const std::string& self, std::string_view name, int access_mode) {
  if (self.empty()) return {};
  namespace fs = std::filesystem;
  fs::path dir = fs::path(self).parent_path();
  for (const fs::path& candidate : {dir / name, dir / ".." / "libexec" / "distrun" / name}) {
    if (::access(candidate.c_str(), access_mode) == 0) return candidate.lexically_normal().string();
  }
  return {};
}

}  // namespace distrun
