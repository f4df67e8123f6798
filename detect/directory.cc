#include "detect/directory.h"

#include <dirent.h>

#include <algorithm>
#include <memory>
#include <string_view>

namespace distrun {

std::vector<std::string> ListNames(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) return names;
  while (const dirent* entry = ::readdir(d.get())) {
    std::string_view name = entry->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace distrun
