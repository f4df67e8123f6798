#include "runtime/nccl/check_report.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <iterator>
#include <limits>

namespace distrun {
namespace {

std::string Fixed(double value, int width) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%*.2f", width, value);
  return buf;
}

std::string RightAligned(const std::string& s, size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

std::string Plural(int n, const char* one) { return std::to_string(n) + " " + one + (n == 1 ? "" : "s"); }

// The result with the highest bus bandwidth (algorithm bandwidth for one rank); nullptr for none.
const AllReduceResult* Peak(const std::vector<AllReduceResult>& results, int ranks) {
  const AllReduceResult* best = nullptr;
  double best_bw = -1;
  for (const AllReduceResult& r : results) {
    double algbw = AlgorithmBandwidth(r.bytes, r.seconds);
    double bw = ranks > 1 ? BusBandwidth(algbw, ranks) : algbw;
    if (bw > best_bw) {
      best_bw = bw;
      best = &r;
    }
  }
  return best;
}

}  // namespace

double AlgorithmBandwidth(size_t bytes, double seconds) {
  if (seconds <= 0) return 0;
  return static_cast<double>(bytes) / seconds / 1e9;
}

double BusBandwidth(double algbw_gbps, int ranks) {
  if (ranks <= 1) return 0;
  return algbw_gbps * 2.0 * (ranks - 1) / ranks;
}

std::vector<size_t> MessageSizes(size_t min_bytes, size_t max_bytes, size_t factor, size_t element) {
  std::vector<size_t> out;
  if (element == 0) element = 1;
  size_t size = std::max(element, (min_bytes + element - 1) / element * element);
  if (factor < 2) factor = 2;
  while (size <= max_bytes) {
    out.push_back(size);
    if (size > std::numeric_limits<size_t>::max() / factor) break;
    size *= factor;
  }
  return out;
}

std::string FormatBytes(size_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  size_t unit = 0;
  while (unit + 1 < std::size(kUnits) && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++unit;
  }
  return std::to_string(bytes) + " " + kUnits[unit];
}

std::optional<size_t> ParseByteSize(std::string_view text) {
  size_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ptr == text.data() || ec != std::errc()) return std::nullopt;
  std::string unit(ptr, text.data() + text.size());
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  size_t shift = 0;
  if (unit.empty() || unit == "B") {
    shift = 0;
  } else if (unit == "K" || unit == "KIB") {
    shift = 10;
  } else if (unit == "M" || unit == "MIB") {
    shift = 20;
  } else if (unit == "G" || unit == "GIB") {
    shift = 30;
  } else {
    return std::nullopt;
  }
  if (value > (std::numeric_limits<size_t>::max() >> shift)) return std::nullopt;
  return value << shift;
}

std::string FormatCheckTable(const std::vector<AllReduceResult>& results, int ranks) {
  std::string out = RightAligned("size", 10) + RightAligned("time (us)", 14) +
                    RightAligned("algbw (GB/s)", 15) + RightAligned("busbw (GB/s)", 15) + "\n";
  for (const AllReduceResult& r : results) {
    double algbw = AlgorithmBandwidth(r.bytes, r.seconds);
    out += RightAligned(FormatBytes(r.bytes), 10) + Fixed(r.seconds * 1e6, 14) + Fixed(algbw, 15) +
           Fixed(BusBandwidth(algbw, ranks), 15) + (r.correct ? "" : "  wrong result") + "\n";
  }
  return out;
}

bool CheckPassed(const std::vector<AllReduceResult>& results, int ranks, double min_busbw_gbps) {
  if (results.empty()) return false;
  for (const AllReduceResult& r : results) {
    if (!r.correct) return false;
  }
  if (min_busbw_gbps > 0 && ranks > 1) {
    const AllReduceResult* peak = Peak(results, ranks);
    return BusBandwidth(AlgorithmBandwidth(peak->bytes, peak->seconds), ranks) >= min_busbw_gbps;
  }
  return true;
}

std::string CheckVerdict(const std::vector<AllReduceResult>& results, int ranks, double min_busbw_gbps) {
  const std::string gpus = Plural(ranks, "GPU");
  if (results.empty()) return "check: failed: " + gpus + ", no message size was measured";
  std::string wrong;
  for (const AllReduceResult& r : results) {
    if (!r.correct) wrong += (wrong.empty() ? "" : ", ") + FormatBytes(r.bytes);
  }
  if (!wrong.empty()) {
    return "check: failed: " + gpus + ", the all-reduce sum was wrong at " + wrong +
           " (a faulty GPU, link or NCCL set-up; rerun with NCCL_DEBUG=WARN)";
  }
  const AllReduceResult* peak = Peak(results, ranks);
  const double algbw = AlgorithmBandwidth(peak->bytes, peak->seconds);
  char figure[64];
  if (ranks <= 1) {
    std::snprintf(figure, sizeof figure, "%.2f", algbw);
    return "check: passed: " + gpus + ", peak algbw " + figure + " GB/s at " + FormatBytes(peak->bytes) +
           " (one GPU moves nothing across a bus; run on 2 or more to measure it)";
  }
  const double busbw = BusBandwidth(algbw, ranks);
  std::snprintf(figure, sizeof figure, "%.2f", busbw);
  if (min_busbw_gbps > 0 && busbw < min_busbw_gbps) {
    char wanted[64];
    std::snprintf(wanted, sizeof wanted, "%.2f", min_busbw_gbps);
    return "check: failed: " + gpus + ", peak busbw " + figure + " GB/s at " + FormatBytes(peak->bytes) +
           " is below the " + wanted + " GB/s asked for (--min-busbw)";
  }
  return "check: passed: " + gpus + ", peak busbw " + figure + " GB/s at " + FormatBytes(peak->bytes);
}

}  // namespace distrun
