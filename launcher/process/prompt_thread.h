#pragma once
// A thread of the launch path that must run at once, beside its creator. The kernel puts a new thread on
// its creator's CPU, and on a machine with few CPUs leaves it queued there for as long as the creator keeps
// busy, while another CPU idles (the project's 2-CPU VM: a thread created at the start of a 2 ms spell
// of its creator's work first ran 2.0 ms later, median of 200; placed on the other CPU, 0.06 ms). A
// PromptThread is created on the CPUs this thread may use other than the one it runs on, and its first
// act is to take this thread's CPUs back, so that what it starts (workers, the sentinel) inherits the
// process's affinity unchanged. With a single CPU to use it is an ordinary thread.

#include <pthread.h>
#include <sched.h>

#include <functional>

namespace distrun {

// Where a PromptThread of a thread running on CPU `here` with affinity `mine` is created: `mine` without
// `here`. False (an ordinary thread) when that leaves nothing, or `here` is unknown (< 0).
bool OtherCpus(const cpu_set_t& mine, int here, cpu_set_t* others);

class PromptThread {
 public:
  PromptThread() = default;
  // Starts `run` (which must not throw). Throws std::system_error if no thread can be created.
  explicit PromptThread(std::function<void()> run);
  // Joins.
  ~PromptThread();
  PromptThread(PromptThread&& other) noexcept;
  PromptThread& operator=(PromptThread&& other) noexcept;
  PromptThread(const PromptThread&) = delete;
  PromptThread& operator=(const PromptThread&) = delete;

  bool joinable() const { return started_; }
  void join();

 private:
  pthread_t thread_{};
  bool started_ = false;
};

}  // namespace distrun
