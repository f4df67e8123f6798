#include "launcher/process/prompt_thread.h"

#include <sched.h>

#include <memory>
#include <system_error>
#include <utility>

namespace distrun {
namespace {

struct Start {
  std::function<void()> run;
  cpu_set_t cpus;       // the creator's
  bool placed = false;  // created on the others: take `cpus` back first
};

void* Trampoline(void* arg) {
  std::unique_ptr<Start> start(static_cast<Start*>(arg));
  // Should the kernel refuse (the CPUs taken away meanwhile), the thread keeps the others: still the
  // process's CPUs, and its children at worst bound to fewer of them.
  if (start->placed) ::sched_setaffinity(0, sizeof start->cpus, &start->cpus);
  start->run();
  return nullptr;
}

}  // namespace

bool OtherCpus(const cpu_set_t& mine, int here, cpu_set_t* others) {
  if (here < 0 || here >= CPU_SETSIZE) return false;
  *others = mine;
  CPU_CLR(here, others);
  return CPU_COUNT(others) > 0;
}

PromptThread::PromptThread(std::function<void()> run) {
  auto start = std::make_unique<Start>();
  start->run = std::move(run);
  pthread_attr_t attr;
  if (int rc = ::pthread_attr_init(&attr); rc != 0) throw std::system_error(rc, std::generic_category());
  // sched_getaffinity fails on a machine with more CPUs than a cpu_set_t holds (1024): no placement then.
  cpu_set_t others;
  if (::sched_getaffinity(0, sizeof start->cpus, &start->cpus) == 0 &&
      OtherCpus(start->cpus, ::sched_getcpu(), &others) &&
      ::pthread_attr_setaffinity_np(&attr, sizeof others, &others) == 0) {
    start->placed = true;
  }
  int rc = ::pthread_create(&thread_, &attr, Trampoline, start.get());
  ::pthread_attr_destroy(&attr);
  if (rc != 0 && start->placed) {
    // The placement refused (a CPU set changed meanwhile, a sandbox without sched_setaffinity): the
    // launch needs the thread more than its placement.
    start->placed = false;
    rc = ::pthread_create(&thread_, nullptr, Trampoline, start.get());
  }
  if (rc != 0) throw std::system_error(rc, std::generic_category(), "cannot start a thread");
  start.release();  // the thread's now
  started_ = true;
}

PromptThread::~PromptThread() { join(); }

PromptThread::PromptThread(PromptThread&& other) noexcept
    : thread_(other.thread_), started_(std::exchange(other.started_, false)) {}

PromptThread& PromptThread::operator=(PromptThread&& other) noexcept {
  if (this != &other) {
    join();
    thread_ = other.thread_;
    started_ = std::exchange(other.started_, false);
  }
  return *this;
}

void PromptThread::join() {
  if (!started_) return;
  ::pthread_join(thread_, nullptr);
  started_ = false;
}

}  // namespace distrun
