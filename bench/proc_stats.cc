#include "proc_stats.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace distrun::bench {
namespace {

// "VmRSS:     1234 kB" → 1234
int64_t FieldKb(const std::string& text, const std::string& name) {
  size_t at = text.find("\n" + name + ":");
  if (at == std::string::npos) return 0;
  return std::strtoll(text.c_str() + at + name.size() + 2, nullptr, 10);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path + " (is the process gone?)");
  std::stringstream s;
  s << in.rdbuf();
  return "\n" + s.str();
}

}  // namespace

MemoryStats ReadMemory(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid);
  std::string status = ReadAll(dir + "/status");
  MemoryStats m;
  m.rss_kb = FieldKb(status, "VmRSS");
  m.hwm_kb = FieldKb(status, "VmHWM");
  m.anon_kb = FieldKb(status, "RssAnon");
  m.file_kb = FieldKb(status, "RssFile");
  m.threads = static_cast<int>(FieldKb(status, "Threads"));
  try {
    m.pss_kb = FieldKb(ReadAll(dir + "/smaps_rollup"), "Pss");
  } catch (const std::runtime_error&) {
    m.pss_kb = 0;  // older kernels have no rollup
  }
  return m;
}

double ReadCpuSeconds(pid_t pid) {
  std::string stat = ReadAll("/proc/" + std::to_string(pid) + "/stat");
  // The command name may hold spaces; fields restart after its closing parenthesis.
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::vector<std::string> fields;
  for (std::string f; rest >> f;) fields.push_back(f);
  // After ')': state is field 3, utime field 14, stime field 15 (man 5 proc).
  if (fields.size() < 13) throw std::runtime_error("unexpected /proc/" + std::to_string(pid) + "/stat");
  double ticks = static_cast<double>(std::stoll(fields[11]) + std::stoll(fields[12]));
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

uint64_t RaiseFdLimit(uint64_t wanted) {
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur >= wanted) return lim.rlim_cur;
  rlimit raised = lim;
  raised.rlim_cur = wanted;
  raised.rlim_max = std::max<rlim_t>(lim.rlim_max, wanted);
  if (::setrlimit(RLIMIT_NOFILE, &raised) != 0) {
    // Without the privilege to raise the hard limit, take what the hard limit allows.
    raised.rlim_cur = lim.rlim_max;
    raised.rlim_max = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &raised);
  }
  ::getrlimit(RLIMIT_NOFILE, &lim);
  return lim.rlim_cur;
}

std::string SelfPath() {
  std::vector<char> buf(4096);
  ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) throw std::runtime_error(std::string("readlink /proc/self/exe: ") + std::strerror(errno));
  return std::string(buf.data(), static_cast<size_t>(n));
}

int64_t MonotonicNanos() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

double MonotonicSeconds() { return static_cast<double>(MonotonicNanos()) * 1e-9; }

}  // namespace distrun::bench
