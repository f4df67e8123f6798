#include "launcher/supervise/scratch_parent.h"

#include <sys/stat.h>
#include <unistd.h>

namespace distrun {

std::filesystem::path ScratchParent(const Environment& env) {
  if (const std::string* tmpdir = env.Get("TMPDIR"); tmpdir != nullptr && !tmpdir->empty()) return *tmpdir;
  const std::filesystem::path shm = env.Path("/dev/shm");
  struct stat st;
  if (::stat(shm.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && ::access(shm.c_str(), W_OK | X_OK) == 0) {
    return shm;
  }
  return "/tmp";
}

}  // namespace distrun
