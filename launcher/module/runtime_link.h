#pragma once
// The job link over distrun's runtime (DESIGN §4): node 0's distrun hosts the coordination service on the
// coordinator address, and every distrun, node 0's and local mode's included, is an agent of it.

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "detect/environment.h"
#include "launcher/config/options.h"
#include "launcher/job/held_port.h"
#include "launcher/job/job_link.h"
#include "launcher/job/job_protection.h"
#include "launcher/plan/plan.h"

namespace spdlog {
class logger;
}

namespace distrun {

class Agent;
class CoordinationService;
class GrpcServer;
class ObserveServer;
struct ObserveConfig;
class TakeoverObserver;
class ListeningSocket;
struct FailoverTarget;
struct GrpcServerConfig;
struct ServiceConfig;

class RuntimeLink final : public JobLink {
 public:
  // Starts the service when this distrun is node 0, then this node's agent. Throws JobLinkError when the
  // service cannot listen, UsageError for a bad token file.
  // `leaving` non-empty: this node's first join says it leaves the job, for that reason (--node-check).
  // `held`: a single-host job's port and workers' token, from the link that held them until now.
  RuntimeLink(const Plan& plan, const Options& options, const Environment& env,
              std::shared_ptr<spdlog::logger> log, const std::string& leaving = "",
              const HeldPort* held = nullptr);
  // Finishes (below), then stops the agent and the service.
  ~RuntimeLink() override;

  JobAssignment Rendezvous(int round, const JobAssignment& provisional,
                           const std::vector<int>& fresh_local = {}) override;
  void CancelRendezvous() override;
  bool ReportFailure(const FailedWorker& failure) override;
  void ReportSuccess() override;
  void Leave(int round, const std::string& reason) override;
  void ReportProgress(const NodeProgress& progress) override;
  void SendStacks(const StacksReply& reply) override;
  int event_fd() const override;
  std::vector<JobDecision> TakeDecisions() override;
  std::vector<std::pair<std::string, std::string>> WorkerSecrets() const override;
  // Node 0 keeps the service up until the other nodes have heard the job's end (bounded).
  void Finish() override;

  // Where workers reach the service (host:port): node 0's, or its standby's once that took over.
  std::string worker_address() const;

 private:
  // `stacks_dir`: where a hung job's full stack dump is written (--log-dir, else TMPDIR).
  ServiceConfig MakeServiceConfig(const Plan& plan, const Options& options,
                                  const std::filesystem::path& stacks_dir) const;
  GrpcServerConfig MakeServerConfig(const Plan& plan, const Options& options) const;
  // --metrics-address and --metrics-token-file, for node 0 and a standby.
  void PrepareObserver(const Options& options);
  // Serves them beside service_: node 0's, where a port that cannot be bound or a token file that cannot be
  // read is an error (UsageError); or, `takeover_host` given (this host's address in the job), the
  // standby's after a takeover, where they are warnings and a port still in use is tried again
  // (runtime/metrics/takeover_observer.h).
  void StartObserver(const std::string& takeover_host = "");
  void StartService(const Plan& plan, const Options& options, const std::filesystem::path& stacks_dir,
                    const HeldPort* held);
  // An elastic job's node other than node 0: binds the port it would serve the job on as the epoch's
  // standby, and keeps what it needs to rebuild the service (DESIGN §4.5). Empty: it cannot (logged).
  std::string PrepareStandby(const Plan& plan, const Options& options,
                             const std::filesystem::path& stacks_dir, const std::string& host);
  // The agent's hook when the coordinator is lost (on the agent's thread): this node's own rebuilt
  // service when it is the epoch's standby, the standby's address otherwise; nullopt where there is none.
  std::optional<FailoverTarget> TurnToStandby(const std::string& why);
  // A munge credential maker for the coordinator's port (none without munge): this node's identity.
  std::function<std::string(int port)> Credential() const;
  // --join: throws UsageError where an arrival cannot work (per-task mode, no token of the job's).
  void CheckArrival(const Plan& plan, const JobToken& token) const;

  // node_rank_ of an arrival until the coordinator admits it, and of a node whose rank the coordinator
  // gives (--node-rank auto) until then.
  static constexpr int kArrivingNode = -1;
  // --node-rank auto: the coordinator's port, reserved by the distrun that serves the job.
  std::shared_ptr<ListeningSocket> served_port_;

  std::shared_ptr<spdlog::logger> log_;
  JobProtection protection_;
  std::string token_;  // the workers' (DISTRUN_TOKEN): node 0's, learnt at rendezvous where node 0 made it
  int node_rank_ = 0;
  int num_nodes_ = 1;
  bool seats_are_nodes_ = false;         // an elastic job: the epoch's node ranks are the workers'
  bool ranks_from_coordinator_ = false;  // --node-rank auto: the rendezvous gives this node its rank
  bool fresh_master_port_ = false;  // node 0 of an elastic job proposes new ports for every epoch, except
  bool fresh_jax_port_ = false;     // those the user or the MPI probe fixed
  // Shared with the agent's thread, which may start the service in a takeover: the service, its server,
  // where workers reach it, the workers' token and the epoch's standby.
  mutable std::mutex mu_;
  std::string worker_address_;
  std::unique_ptr<CoordinationService> service_;
  std::unique_ptr<GrpcServer> server_;
  // --metrics-address: what node 0 (or the standby that took the job over) serves of the job.
  std::unique_ptr<ObserveConfig> observe_config_;
  std::optional<std::string> metrics_token_file_;
  std::unique_ptr<ObserveServer> observe_;
  std::unique_ptr<TakeoverObserver> takeover_observe_;
  // The standby's side: its bound port and address, the service and server it would start, and where the
  // latest assignment says to turn (this node's own address when it is the standby; empty: nowhere).
  std::shared_ptr<ListeningSocket> standby_port_;
  std::string standby_address_;
  std::unique_ptr<ServiceConfig> standby_service_config_;
  std::unique_ptr<GrpcServerConfig> standby_server_config_;
  std::string turn_to_;
  bool is_standby_ = false;
  std::unique_ptr<Agent> agent_;
  std::string join_run_id_;  // what this node's joins say (empty where it made its run id up)
  bool finished_ = false;
  bool left_at_start_ = false;  // the first join said it leaves
};

}  // namespace distrun
