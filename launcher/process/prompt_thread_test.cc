#include "launcher/process/prompt_thread.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <vector>

namespace distrun {
namespace {

cpu_set_t Cpus(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  return set;
}

cpu_set_t MyCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(::sched_getaffinity(0, sizeof set, &set), 0);
  return set;
}

// The CPUs the thread had when its function began.
cpu_set_t CpusOfANewThread() {
  cpu_set_t seen;
  CPU_ZERO(&seen);
  PromptThread([&] { seen = MyCpus(); }).join();
  return seen;
}

TEST(PromptThread, IsPlacedOnTheCreatorsOtherCpus) {
  cpu_set_t others;
  ASSERT_TRUE(OtherCpus(Cpus({0, 1, 3}), 1, &others));
  const cpu_set_t want = Cpus({0, 3});
  EXPECT_TRUE(CPU_EQUAL(&others, &want));
  // Nothing else to run on, or no idea where this runs: an ordinary thread.
  EXPECT_FALSE(OtherCpus(Cpus({2}), 2, &others));
  EXPECT_FALSE(OtherCpus(Cpus({0, 1}), -1, &others));
  EXPECT_FALSE(OtherCpus(Cpus({0, 1}), CPU_SETSIZE, &others));
}

TEST(PromptThread, RunsWithItsCreatorsCpus) {
  // What it starts (a worker, the sentinel) inherits its affinity: the process's, not the placement's.
  const cpu_set_t mine = MyCpus();
  cpu_set_t seen = CpusOfANewThread();
  EXPECT_TRUE(CPU_EQUAL(&seen, &mine)) << CPU_COUNT(&seen) << " of " << CPU_COUNT(&mine) << " CPUs";
  // A creator bound to one CPU makes an ordinary thread, with that CPU.
  const int here = ::sched_getcpu();
  ASSERT_GE(here, 0);
  const cpu_set_t one = Cpus({here});
  ASSERT_EQ(::sched_setaffinity(0, sizeof one, &one), 0);
  seen = CpusOfANewThread();
  ASSERT_EQ(::sched_setaffinity(0, sizeof mine, &mine), 0);
  EXPECT_TRUE(CPU_EQUAL(&seen, &one));
}

TEST(PromptThread, JoinsOnceWhereverItEnds) {
  std::atomic<int> runs = 0;
  PromptThread a([&] { ++runs; });
  PromptThread b(std::move(a));
  EXPECT_FALSE(a.joinable());
  EXPECT_TRUE(b.joinable());
  a = PromptThread([&] { ++runs; });
  a = std::move(b);  // joins a's first thread, then owns b's
  a.join();
  a.join();
  EXPECT_FALSE(a.joinable());
  {
    PromptThread c([&] { ++runs; });
  }  // joined by its destructor
  EXPECT_EQ(runs.load(), 3);
}

}  // namespace
}  // namespace distrun
