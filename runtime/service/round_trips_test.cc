#include "runtime/service/round_trips.h"

#include <gtest/gtest.h>

namespace distrun {
namespace {

using std::chrono::microseconds;

TEST(RoundTrips, CountsEachRoundTripInTheFirstBucketThatHoldsIt) {
  RoundTrips r;
  r.Add(microseconds(50));          // <= 0.1 ms
  r.Add(microseconds(100));         // <= 0.1 ms: a bound holds what equals it
  r.Add(microseconds(101));         // <= 0.2 ms
  r.Add(microseconds(300'000));     // <= 0.5 s
  r.Add(microseconds(60'000'000));  // above 10 s: +Inf only
  EXPECT_EQ(r.count(), 5u);
  EXPECT_EQ(r.AtMost(0), 2u);
  EXPECT_EQ(r.AtMost(1), 3u);
  EXPECT_EQ(r.AtMost(10), 3u);  // 0.2 s
  EXPECT_EQ(r.AtMost(11), 4u);  // 0.5 s
  EXPECT_EQ(r.AtMost(RoundTrips::kBounds.size() - 1), 4u);
  EXPECT_EQ(r.AtMost(RoundTrips::kBounds.size()), 5u);
  EXPECT_NEAR(r.sum_seconds(), 60.300251, 1e-9);
}

TEST(RoundTrips, BoundsRise) {
  for (size_t i = 1; i < RoundTrips::kBounds.size(); ++i)
    EXPECT_LT(RoundTrips::kBounds[i - 1], RoundTrips::kBounds[i]);
}

}  // namespace
}  // namespace distrun
