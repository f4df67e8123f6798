#pragma once
// The supervisor's narrow view of the job beyond this node (DESIGN §4): rendezvous before each round of
// workers, reports of this node's outcome, and the job's decisions (stop, restart, complete), announced on a
// descriptor the supervisor's poll loop watches. launcher/job/runtime_link.h implements it over the runtime.

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "launcher/plan/plan.h"
#include "runtime/service/types.h"

namespace distrun {

// The job could not be formed or kept: rendezvous timed out, the coordinator cannot be reached or listened
// on. The message says what happened and what to do.
class JobLinkError : public std::runtime_error {
 public:
  explicit JobLinkError(const std::string& what, int exit_code = 1)
      : std::runtime_error(what), exit_code_(exit_code) {}
  // distrun's exit code: 1, or kFencedExitCode for a node an elastic job went on without.
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

struct JobDecision {
  // kFailover: this node lost the coordinator and turned to the job's standby (`reason`); its workers end
  // now, and the standby's restart (or the job's stop) follows.
  enum class Kind { kStop, kRestart, kComplete, kNotice, kStacks, kDiagnosis, kFailover };
  Kind kind = Kind::kStop;
  int exit_code = 0;              // kStop: the root cause's
  int restart_round = 0;          // kRestart: the round to join (the next epoch)
  bool node_lost = false;         // kRestart: an elastic job goes on without a lost node
  bool node_arrived = false;      // kRestart: an elastic job's world grows by nodes that arrived
  bool coordinator_lost = false;  // kStop: this node lost the coordinator (cut off, or node 0 gone)
  // kStop, kRestart: what happened, naming rank, node and host; kNotice: what is coming; kDiagnosis: what
  // the hang watch found (node 0 prints it)
  std::string reason;
  bool warning = false;    // kDiagnosis: print `reason` as a warning, not an error
  bool info = false;       // kDiagnosis: print `reason` as an ordinary line (a recovery's account)
  uint64_t stacks_id = 0;  // kStacks: collect this node's workers' stacks and answer (SendStacks)
};

class JobLink {
 public:
  virtual ~JobLink() = default;

  // Blocks until every node joined `round` (0, then the round of a restart decision) and returns the
  // settled assignment. `fresh_local` (--recovery in-process): this node's local ranks held by processes
  // that hold no training state. Throws JobLinkError.
  virtual JobAssignment Rendezvous(int round, const JobAssignment& provisional,
                                   const std::vector<int>& fresh_local = {}) = 0;
  // Ends a Rendezvous blocked on another thread (it throws JobLinkError); nothing when none is.
  virtual void CancelRendezvous() {}
  // This node's first failed worker. Returns whether it was the job's root cause (first in the round).
  virtual bool ReportFailure(const FailedWorker& failure) = 0;
  // Every worker of this node exited 0.
  virtual void ReportSuccess() = 0;
  // This node leaves the job instead of joining `round` (its --node-check failed for `reason`); returns once
  // node 0 heard it (bounded).
  virtual void Leave(int round, const std::string& reason) = 0;

  // This node's progress (launcher/supervise/worker_watch.h), for the job's hang watch; called a few times a
  // second.
  virtual void ReportProgress(const NodeProgress& progress) = 0;
  // The answer to a kStacks decision.
  virtual void SendStacks(const StacksReply& reply) = 0;

  // Readable while decisions are waiting.
  virtual int event_fd() const = 0;
  virtual std::vector<JobDecision> TakeDecisions() = 0;

  // Variables every worker gets besides the plan's (the job token), kept out of the plan so that --detect
  // and --dry-run never print them.
  virtual std::vector<std::pair<std::string, std::string>> WorkerSecrets() const = 0;

  // The job is over on this node (its workers are gone). Returns once the rest of the job no longer needs
  // this node: node 0, which hosts the service, waits (bounded) until the other nodes have heard the end.
  virtual void Finish() {}
};

}  // namespace distrun
