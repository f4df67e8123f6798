#pragma once
// The numbers and the table of `distrun check` (DESIGN §4, NCCL): bandwidth as nccl-tests defines it, the
// message sizes, and the lines rank 0 prints. Pure, so that the check worker (built only with CUDA and
// NCCL) and the unit tests share it.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace distrun {

// One message size of the all-reduce sweep: the mean time of one all-reduce (the slowest rank's) and
// whether every rank got the right sum.
struct AllReduceResult {
  size_t bytes = 0;
  double seconds = 0;
  bool correct = true;
};

// Bytes moved per second as the user sees it, in GB/s (10^9 bytes): bytes / seconds.
double AlgorithmBandwidth(size_t bytes, double seconds);
// What each link carries in a ring all-reduce, comparable to the hardware's peak: algbw × 2(n−1)/n, the
// factor nccl-tests uses for all-reduce (0 for one rank: nothing crosses a bus).
double BusBandwidth(double algbw_gbps, int ranks);

// min, min×factor, ... up to max (inclusive when reached); min is rounded up to a multiple of
// `element` (4 for float) and sizes stay multiples of it.
std::vector<size_t> MessageSizes(size_t min_bytes, size_t max_bytes, size_t factor, size_t element = 4);

// "8 B", "32 KiB", "1 GiB"; sizes that are not a whole number of the unit stay in bytes.
std::string FormatBytes(size_t bytes);
// "1G", "64M", "512K", "1GiB", "8" (bytes; K/M/G are powers of 1024); nullopt when it is not one.
std::optional<size_t> ParseByteSize(std::string_view text);

// The table: a header line, then one line per size: size, time (us), algbw (GB/s), busbw (GB/s).
std::string FormatCheckTable(const std::vector<AllReduceResult>& results, int ranks);
// The last line: "check: passed: 8 GPUs, peak busbw 181.20 GB/s (at 1 GiB)" or "check: failed: ...".
// `min_busbw_gbps` > 0 makes a lower peak a failure.
std::string CheckVerdict(const std::vector<AllReduceResult>& results, int ranks, double min_busbw_gbps);
bool CheckPassed(const std::vector<AllReduceResult>& results, int ranks, double min_busbw_gbps);

}  // namespace distrun
