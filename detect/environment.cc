#include "detect/environment.h"

#include <sched.h>
#include <unistd.h>

#include "detect/cuda_driver.h"
#include "detect/devices.h"
#include "detect/http_get.h"
#include "detect/mpi_probe.h"

extern char** environ;

namespace distrun {

const std::string* Environment::Get(std::string_view name) const {
  auto it = vars.find(name);
  return it == vars.end() ? nullptr : &it->second;
}

std::string Environment::GetOr(std::string_view name, std::string_view fallback) const {
  const std::string* value = Get(name);
  return value ? *value : std::string(fallback);
}

std::filesystem::path Environment::Path(std::string_view p) const {
  std::filesystem::path relative(p);
  return root / relative.relative_path();
}

Environment Environment::FromProcess() {
  Environment env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view kv(*entry);
    size_t eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    env.vars.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) == 0) env.hostname = name;
  cpu_set_t mask;
  CPU_ZERO(&mask);
  env.cpu_count = sched_getaffinity(0, sizeof(mask), &mask) == 0 ? CPU_COUNT(&mask) : 1;
  env.http_get = HttpGetBlocking;
  env.cuda_not_asked = CudaDriverAbsence(env);
  if (env.cuda_not_asked.empty()) env.cuda_query = QueryCudaDriver;
  env.mpi_probe = RunMpiProbe;
  env.parent_pid = static_cast<int>(::getppid());
  std::error_code ec;
  env.program = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  return env;
}

}  // namespace distrun
