#include "portable/older_glibc.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <thread>

namespace distrun::portable {
namespace {

int FunctionOfThisProgram() { return 42; }

TEST(FindLoadedObject, FindsTheObjectThatMapsAnAddressAndItsUnwindTables) {
  LoadedObject program;
  auto* here = reinterpret_cast<const void*>(&FunctionOfThisProgram);
  ASSERT_TRUE(FindLoadedObject(here, &program));
  EXPECT_LE(program.map_start, here);
  EXPECT_LT(here, program.map_end);
  ASSERT_NE(program.eh_frame, nullptr);  // GCC's link always writes PT_GNU_EH_FRAME
  EXPECT_LE(program.map_start, program.eh_frame);
  EXPECT_LT(program.eh_frame, program.map_end);

  // A function of libc is in another object, and dladdr agrees where that object begins.
  auto* in_libc = reinterpret_cast<const void*>(&::getpid);
  LoadedObject libc;
  ASSERT_TRUE(FindLoadedObject(in_libc, &libc));
  EXPECT_NE(libc.map_start, program.map_start);
  Dl_info info;
  ASSERT_NE(::dladdr(in_libc, &info), 0);
  EXPECT_EQ(libc.map_start, info.dli_fbase);
}

TEST(FindLoadedObject, NothingMapsAddressZero) {
  LoadedObject object;
  EXPECT_FALSE(FindLoadedObject(nullptr, &object));
}

TEST(FillRandom, FillsEveryByteAndLeavesErrnoAsItWas) {
  std::set<std::string> draws;
  std::set<unsigned char> seen;
  for (int i = 0; i < 64; ++i) {
    unsigned char bytes[33];
    std::memset(bytes, 0, sizeof bytes);
    errno = EAGAIN;
    FillRandom(bytes, sizeof bytes);
    EXPECT_EQ(errno, EAGAIN);
    draws.emplace(reinterpret_cast<char*>(bytes), sizeof bytes);
    seen.insert(bytes, bytes + sizeof bytes);
  }
  EXPECT_EQ(draws.size(), 64u);
  EXPECT_GT(seen.size(), 200u);  // 2,112 bytes: fewer distinct values would be a broken source, not chance
}

TEST(UniformRandom, StaysBelowTheBoundAndReachesEveryValue) {
  EXPECT_EQ(UniformRandom(0), 0u);
  EXPECT_EQ(UniformRandom(1), 0u);
  std::set<uint32_t> seen;
  for (int i = 0; i < 2000; ++i) {
    uint32_t value = UniformRandom(7);
    ASSERT_LT(value, 7u);
    seen.insert(value);
  }
  EXPECT_EQ(seen.size(), 7u);
  EXPECT_LT(UniformRandom(0x80000001u), 0x80000001u);  // the bound that rejects most often
}

struct Waiter {
  pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
  ~Waiter() {
    pthread_cond_destroy(&cond);
    pthread_mutex_destroy(&mutex);
  }
};

timespec MonotonicIn(long long ns) {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  long long at = t.tv_sec * 1000000000LL + t.tv_nsec + ns;
  return {static_cast<time_t>(at / 1000000000LL), static_cast<long>(at % 1000000000LL)};
}

TEST(ClockWait, AMonotonicDeadlineTimesOutOnceItHasPassed) {
  Waiter w;
  pthread_mutex_lock(&w.mutex);
  timespec deadline = MonotonicIn(20'000'000);
  int result = 0;
  do {  // a spurious wake-up returns 0 before the deadline
    result = ClockWait(&w.cond, &w.mutex, CLOCK_MONOTONIC, &deadline);
  } while (result == 0);
  EXPECT_EQ(result, ETIMEDOUT);
  timespec past = MonotonicIn(-1);
  EXPECT_EQ(ClockWait(&w.cond, &w.mutex, CLOCK_MONOTONIC, &past), ETIMEDOUT);
  EXPECT_EQ(pthread_mutex_unlock(&w.mutex), 0);  // still held by this thread
}

TEST(ClockWait, ASignalWakesTheWaiterBeforeItsDeadline) {
  Waiter w;
  bool ready = false;
  pthread_mutex_lock(&w.mutex);
  std::thread signaller([&] {
    pthread_mutex_lock(&w.mutex);
    ready = true;
    pthread_cond_signal(&w.cond);
    pthread_mutex_unlock(&w.mutex);
  });
  timespec deadline = MonotonicIn(600'000'000'000LL);
  int result = 0;
  while (!ready && result == 0) result = ClockWait(&w.cond, &w.mutex, CLOCK_MONOTONIC, &deadline);
  pthread_mutex_unlock(&w.mutex);
  signaller.join();
  EXPECT_EQ(result, 0);
  EXPECT_TRUE(ready);
}

TEST(ClockWait, RealtimeDeadlinesAreTimedwaitsAndOtherClocksAreRefused) {
  Waiter w;
  pthread_mutex_lock(&w.mutex);
  timespec past;
  clock_gettime(CLOCK_REALTIME, &past);
  past.tv_sec -= 1;
  EXPECT_EQ(ClockWait(&w.cond, &w.mutex, CLOCK_REALTIME, &past), ETIMEDOUT);
  EXPECT_EQ(ClockWait(&w.cond, &w.mutex, CLOCK_PROCESS_CPUTIME_ID, &past), EINVAL);
  pthread_mutex_unlock(&w.mutex);
}

}  // namespace
}  // namespace distrun::portable
