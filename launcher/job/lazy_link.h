#pragma once
// A single-host job's runtime, started when something needs it.
//
// Every worker of a one-distrun job learns the runtime's address and token before it starts, but a job that
// runs without failure needs nothing of the runtime unless a worker dials it. Loading the runtime module and
// starting its service, server and agent took 0.9 ms of a 6 ms launch of 8 workers, before the first
// worker started (bench/RESULTS.md). So this link holds the loopback port the plan named, listening, and
// makes the workers' token; the runtime starts on that port, with that token, when the first connection
// arrives (a worker's kv, barrier or store, `distrun status`), when the node first reports progress (one
// interval into the run, for the hang watch), a failure, or anything else only the runtime answers. A job
// whose workers all exit 0 before that completes without it. Until then the kernel queues connections on
// the held port, so nothing a worker sees differs.
//
// Multi-node jobs, elastic ones, arrivals and nodes that run a --node-check start the runtime at once.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "detect/environment.h"
#include "launcher/config/options.h"
#include "launcher/job/held_port.h"
#include "launcher/job/job_link.h"
#include "launcher/plan/plan.h"
#include "launcher/process/unique_fd.h"
#include "runtime/io/listening_socket.h"

namespace spdlog {
class logger;
}

namespace distrun {

class LazyLink final : public JobLink {
 public:
  // Starts the runtime on the held port (the module's link, made with `held`). Throws what it threw.
  using Starter = std::function<std::unique_ptr<JobLink>(const HeldPort& held)>;

  // Whether the job's runtime may start late: one distrun, on this host, not elastic, not arriving, no
  // --node-check. MayFit: what the options alone tell, before there is a plan.
  static bool MayFit(const Options& options);
  static bool Fits(const Plan& plan, const Options& options);
  // Holds the plan's port and makes the workers' token (throws UsageError for an unusable token, as the
  // runtime would). Null where the port cannot be held (taken since the plan picked it): the caller then
  // starts the runtime at once, on a port of its own.
  static std::unique_ptr<LazyLink> Hold(const Plan& plan, const Options& options, const Environment& env,
                                        std::shared_ptr<spdlog::logger> log, Starter start);

  // Round 0 is answered here, as the runtime would answer it (the plan's assignment on the held port).
  JobAssignment Rendezvous(int round, const JobAssignment& provisional,
                           const std::vector<int>& fresh_local = {}) override;
  void CancelRendezvous() override;
  bool ReportFailure(const FailedWorker& failure) override;
  // Before the runtime started: the job is complete (decided here, as its service would).
  void ReportSuccess() override;
  void Leave(int round, const std::string& reason) override;
  void ReportProgress(const NodeProgress& progress) override;
  void SendStacks(const StacksReply& reply) override;
  // Readable while decisions wait, or while a connection waits on the held port (which starts the runtime
  // in TakeDecisions).
  int event_fd() const override { return events_.get(); }
  std::vector<JobDecision> TakeDecisions() override;
  std::vector<std::pair<std::string, std::string>> WorkerSecrets() const override;
  void Finish() override;

  bool started() const { return runtime_ != nullptr; }
  // host:port of the held port.
  const std::string& address() const { return address_; }

 private:
  LazyLink(ListeningSocket port, std::string address, std::string token, std::shared_ptr<spdlog::logger> log,
           Starter start);
  // Starts the runtime (once) and joins it in round 0; `why` goes to the debug log.
  JobLink& Runtime(const char* why);
  bool ConnectionWaiting() const;

  ListeningSocket port_;
  std::string address_;
  std::string token_;
  std::shared_ptr<spdlog::logger> log_;
  Starter start_;
  UniqueFd events_;   // epoll: decided_, the held port until the runtime starts, then the runtime's event fd
  UniqueFd decided_;  // eventfd: readable while decided_here_ holds a decision
  std::vector<JobDecision> decided_here_;
  std::unique_ptr<JobLink> runtime_;
  JobAssignment answered_;  // round 0's answer, which the runtime's must equal
  bool answered_round0_ = false;
  bool complete_ = false;  // decided here: nothing starts the runtime any more
};

}  // namespace distrun
