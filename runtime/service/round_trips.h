#pragma once
// How long a node's heartbeats waited for node 0's answer: the round trips its agent measured and reported
// (AgentHeartbeat.round_trip_us), counted in fixed buckets as a Prometheus histogram counts them. Node 0's
// liveness decisions read the absence of answers; this says how close to that a node's link and node 0's
// event loop run (a busy coordinator, a lossy link, hostile clients on the port).

#include <array>
#include <chrono>
#include <cstdint>

namespace distrun {

class RoundTrips {
 public:
  // Upper bounds of the buckets, in seconds (1-2-5 steps from 0.1 ms to 10 s); +Inf after them.
  static constexpr std::array<double, 16> kBounds = {0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02,
                                                     0.05,   0.1,    0.2,    0.5,   1,     2,     5,    10};

  void Add(std::chrono::microseconds round_trip) {
    const double s = static_cast<double>(round_trip.count()) / 1e6;
    size_t i = 0;
    while (i < kBounds.size() && s > kBounds[i]) ++i;
    ++counts_[i];
    ++count_;
    sum_ += s;
  }

  // Round trips at most kBounds[i] (i == kBounds.size(): all of them), as a histogram's `le` buckets.
  uint64_t AtMost(size_t i) const {
    uint64_t n = 0;
    for (size_t j = 0; j <= i && j < counts_.size(); ++j) n += counts_[j];
    return n;
  }
  uint64_t count() const { return count_; }
  double sum_seconds() const { return sum_; }

 private:
  std::array<uint64_t, kBounds.size() + 1> counts_{};
  uint64_t count_ = 0;
  double sum_ = 0;
};

}  // namespace distrun
