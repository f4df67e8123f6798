#include "launcher/supervise/python_site.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string_view>

#include "launcher/supervise/python_sources.h"

namespace distrun {
namespace {

// Written whole under another name and renamed, so a worker starting meanwhile never reads half a file.
void WriteFile(const std::string& path, std::string_view text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc | std::ios::binary);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.close();
    if (!out) throw std::runtime_error("cannot write " + temporary);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  }
}

}  // namespace

PythonSite::PythonSite(std::string dir) : dir_(std::move(dir)) {
  if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) {
    throw std::runtime_error("cannot create " + dir_ + ": " + std::strerror(errno));
  }
  WriteFile(dir_ + "/sitecustomize.py", embedded::kSitecustomizePy);
  // The name sitecustomize.py imports; `import distrun.jax` is the same file, installed with the module.
  WriteFile(dir_ + "/_distrun_jax.py", embedded::kDistrunJaxPy);
}

std::string PythonSite::PythonPath(const std::string& existing) const {
  // No trailing ':' when there is nothing to keep: an empty entry would put the current directory on
  // sys.path.
  return existing.empty() ? dir_ : dir_ + ":" + existing;
}

}  // namespace distrun
