#include "launcher/process/cpu_set.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

#include "detect/parse.h"

namespace distrun {
namespace {

// Beyond any machine Linux runs on (NR_CPUS is at most 8192); keeps a corrupt file from sizing a mask.
constexpr int kMaxCpu = 1 << 16;

}  // namespace

std::optional<int> ParseCpuNumber(std::string_view s) {
  int n = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || n < 0 || n > kMaxCpu)
    return std::nullopt;
  return n;
}

std::optional<std::vector<int>> ParseCpuList(std::string_view text) {
  std::vector<int> cpus;
  std::string_view all = Trim(text);
  if (all.empty()) return cpus;
  for (const std::string& field : Split(all, ',')) {
    std::string_view range = Trim(field);
    size_t dash = range.find('-');
    std::optional<int> lo = ParseCpuNumber(range.substr(0, dash));
    std::optional<int> hi = dash == std::string_view::npos ? lo : ParseCpuNumber(range.substr(dash + 1));
    if (!lo || !hi || *hi < *lo) return std::nullopt;
    for (int cpu = *lo; cpu <= *hi; ++cpu) cpus.push_back(cpu);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

std::vector<unsigned long> CpuMaskWords(const std::vector<int>& cpus) {
  constexpr int kBits = static_cast<int>(8 * sizeof(unsigned long));
  std::vector<unsigned long> words;
  for (int cpu : cpus) {
    if (cpu < 0) continue;
    size_t word = static_cast<size_t>(cpu / kBits);
    if (words.size() <= word) words.resize(word + 1, 0);
    words[word] |= 1UL << (cpu % kBits);
  }
  return words;
}

int ApplyCpuMask(const std::vector<unsigned long>& words) {
  // glibc's cpu_set_t is this array of unsigned long, which is also the kernel's layout.
  if (::sched_setaffinity(0, words.size() * sizeof(unsigned long),
                          reinterpret_cast<const cpu_set_t*>(words.data())) != 0) {
    return errno;
  }
  return 0;
}

}  // namespace distrun
