#pragma once
// What distrun gives every worker so that it can be watched (DESIGN §4.2), and what it reads back: each
// worker's slot of the progress board, a stack dump on request (launcher/supervise/stack_collector.h), and
// the signs of life distrun sees itself (CPU time of the worker's process group, output). Everything lives in
// a private directory of this distrun, removed when it ends.

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "launcher/process/unique_fd.h"
#include "launcher/supervise/progress_tracker.h"
#include "runtime/progress/progress_board.h"
#include "runtime/service/types.h"

namespace distrun {

class PythonSite;
class StackCollector;

class WorkerWatch {
 public:
  using Clock = std::chrono::steady_clock;
  using Variables = std::map<std::string, std::string, std::less<>>;

  // `slots`: the node's workers. Never throws for the directory: problem() then says why the workers cannot
  // be watched, and the job runs without it.
  // `tool_env`: the environment gdb runs with (distrun's own).
  WorkerWatch(size_t slots, const std::filesystem::path& temp_dir, std::string host,
              std::chrono::milliseconds stacks_timeout, std::vector<std::string> tool_env);
  ~WorkerWatch();
  WorkerWatch(const WorkerWatch&) = delete;
  WorkerWatch& operator=(const WorkerWatch&) = delete;

  const std::string& problem() const { return problem_; }
  // The private directory (empty when it could not be made).
  const std::filesystem::path& directory() const { return dir_; }

  // The variables worker `slot` gets: its progress slot, distrun's Python site (PYTHONPATH is extended)
  // and the stack hooks.
  void AddVariables(size_t slot, Variables& vars) const;
  // Empties the slot's progress before its worker is spawned: a worker may report before the supervisor
  // adopts it (Started), and those reports must stay.
  void Starting(size_t slot);
  void Started(size_t slot, int rank, pid_t pid, std::string gpu, Clock::time_point now);
  void Exited(size_t slot);
  void Output(size_t slot, Clock::time_point now);
  // The node's progress now: reads the board (and, every few seconds, the workers' CPU time).
  NodeProgress Sample(int epoch, Clock::time_point now);
  // Each slot's progress reports as the board holds them now (none without a board).
  std::vector<ProgressSample> Reports() const;

  // Collects the running workers' stacks on a thread of its own; stacks_fd() turns readable when the
  // answer to `id` (and to any request that came while it ran) is ready.
  void CollectStacks(uint64_t id);
  int stacks_fd() const { return stacks_ready_.get(); }
  std::vector<StacksReply> TakeStacks();

 private:
  struct Worker {
    bool running = false;
    int rank = 0;
    pid_t pid = 0;
    std::string gpu;
  };
  void ReadCpu(Clock::time_point now);

  std::string host_;
  std::string problem_;
  std::filesystem::path dir_;  // empty: none
  std::optional<ProgressBoard> board_;
  std::unique_ptr<PythonSite> python_site_;
  std::unique_ptr<StackCollector> collector_;
  ProgressTracker tracker_;
  std::vector<Worker> workers_;
  Clock::time_point next_cpu_read_{};

  UniqueFd stacks_ready_;  // an eventfd
  std::mutex mu_;
  std::vector<uint64_t> asked_;        // requests the running collection will answer
  std::vector<StacksReply> answered_;  // ready for TakeStacks
  std::thread collecting_;
  bool collecting_done_ = true;
};

}  // namespace distrun
