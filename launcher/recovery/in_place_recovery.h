#pragma once
// One node's part of recovering in place (ARCHITECTURE.md, "Recovering in place"): which world each of its
// workers holds, the notice of a change, who said ready, the deadline and its escalation, the join once the
// node is ready, and the world handed to each worker. The supervisor drives it (the worker channel's
// messages, its workers' starts and exits, the job's restarts, the rendezvous's answer) and carries out
// what it asks through RecoveryActions. No sockets, no processes: unit-tested with a fake clock.

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/recovery/recovery_ledger.h"
#include "runtime/recovery/worker_message.h"

namespace spdlog {
class logger;
}

namespace distrun {

class RecoveryActions {
 public:
  virtual ~RecoveryActions() = default;
  // Sends `message` to the worker in `slot`; false when it has no connection.
  virtual bool Send(size_t slot, const WorkerMessage& message) = 0;
  // Kills the worker in `slot` if it runs and starts it again (the caller then calls Started); `why` is
  // the log's line.
  virtual void Restart(size_t slot, const std::string& why) = 0;
  // Joins `generation`'s rendezvous, saying which local ranks are held by new processes; returns at once
  // (Handout follows, or the job's stop).
  virtual void Join(int generation, const std::vector<int>& fresh_local) = 0;
};

class InPlaceRecovery {
 public:
  using Clock = std::chrono::steady_clock;

  // `slots`: the node's workers; `timeout`: --recovery-timeout.
  InPlaceRecovery(size_t slots, std::chrono::milliseconds timeout, RecoveryActions& actions,
                  std::shared_ptr<spdlog::logger> log);

  // A worker process started in `slot` (the job's start, or again): it holds no world until handed one.
  void Started(size_t slot, pid_t pid, int rank, Clock::time_point now);
  // Its process ended.
  void Exited(size_t slot);
  // A message from the worker in `slot`. Throws WorkerMessageError for one that is not what its name says.
  void OnMessage(size_t slot, const WorkerMessage& message, Clock::time_point now);
  void Disconnected(size_t slot);

  // The job's restart into `generation` (a lost node, a failed worker, an arrival, a takeover): tells every
  // worker that holds a world, starts again those that never spoke to the channel, and joins once every
  // worker is ready or new. An older or repeated generation changes nothing.
  void Change(int generation, Clock::time_point now);
  // `generation`'s world, one message per slot (is_new is set here), sent now to the workers that are
  // connected and on `hello` to the others. Empty: this node is a spare and its workers wait.
  void Handout(int generation, std::vector<WorldMessage> worlds, Clock::time_point now);
  // Deadlines: a worker that did not say ready in time, or a spare's that did not say hello within the
  // timeout of the world that seated it, is started again.
  void Tick(Clock::time_point now);
  std::optional<Clock::time_point> NextDeadline() const;

  // The generation the node's workers hold (the last handed out), and the one being formed, if any.
  int generation() const { return generation_; }
  std::optional<int> changing() const { return pending_; }
  bool joining() const { return joining_; }
  // Local ranks whose processes hold no training state: never handed a world, or not running.
  std::vector<int> FreshSlots() const;

  // The workers' progress reports, by slot: how many so far and the last one's time (CLOCK_MONOTONIC, as
  // steady_clock). A slot's first report after the world was handed out is its first step there.
  struct Reports {
    uint64_t count = 0;
    int64_t time_ns = 0;
  };
  void Progress(const std::vector<Reports>& reports);
  // Whether first steps are awaited (the caller reads the reports often then).
  bool WatchingFirstSteps() const { return watching_; }
  // This node's phases of the latest recovery (generation -1: none yet).
  NodeRecovery Last() const { return last_; }

 private:
  struct Slot {
    bool running = false;
    pid_t pid = 0;
    int rank = 0;
    bool connected = false;
    bool spoke = false;          // said hello since it started
    int world = -1;              // the generation of the world it was handed; -1: none (a new process)
    int ready_for = -1;          // the newest generation it said it is ready for
    int up = -1;                 // the newest generation whose group it said is formed
    bool after_handout = false;  // started after the last world was handed out: still starting, not mute
    // Started while the node held no seat (a warm spare's worker): until it speaks it is taken to be still
    // importing, not mute, and gets its world on hello.
    bool seatless = false;
  };

  // Whether `slot` lets the node join `generation`: ready for it, new, or gone.
  bool Settled(const Slot& slot, int generation) const;
  void JoinIfReady(Clock::time_point now);
  // Starts again the seated spare's workers that stayed silent past the hello deadline.
  void RestartSilentSpares(Clock::time_point now);
  void SendWorld(size_t slot);
  // The recovery's log line, once every handed-out worker said its group is up.
  void ReportIfUp(Clock::time_point now);

  std::vector<Slot> slots_;
  std::chrono::milliseconds timeout_;
  RecoveryActions& actions_;
  std::shared_ptr<spdlog::logger> log_;

  int generation_ = -1;
  std::vector<WorldMessage> worlds_;  // the last handed out, by slot; empty: a spare's
  std::optional<int> pending_;
  bool joining_ = false;
  Clock::time_point deadline_{};
  // A seated spare's workers that have not spoken yet must by then.
  std::optional<Clock::time_point> hello_deadline_;
  // The phases of the change being formed or just handed out, for its log line.
  Clock::time_point noticed_{}, ready_at_{}, handed_at_{};
  bool reported_ = true;
  NodeRecovery last_;
  // First steps: each slot's report count when the world was handed out, and whether it stepped since.
  std::vector<Reports> reports_;
  std::vector<uint64_t> baseline_;
  std::vector<std::optional<Clock::time_point>> first_step_;
  bool watching_ = false;
};

}  // namespace distrun
