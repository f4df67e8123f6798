#include "launcher/module/runtime_link.h"

#include <spdlog/logger.h>
#include <unistd.h>

#include <cctype>
#include <fstream>
#include <iterator>
#include <thread>
#include <utility>

#include "detect/errors.h"
#include "detect/parse.h"
#include "launcher/report/stacks_view.h"
#include "runtime/agent/agent.h"
#include "runtime/auth/agent_identity.h"
#include "runtime/io/listening_socket.h"
#include "runtime/metrics/observe_server.h"
#include "runtime/metrics/takeover_observer.h"
#include "runtime/service/service.h"
#include "runtime/transport/grpc_server.h"

namespace distrun {
namespace {

using namespace std::chrono_literals;

// How long node 0 keeps the service up after the job's end, for the other nodes to hear it.
constexpr auto kFinalEventWait = 3s;
// How long an elastic job's first worker failure of an epoch waits for a node loss that would explain it.
constexpr auto kElasticFailureHold = 200ms;
// Beyond a heartbeat interval, how long a silent node gets to kill its workers before the next epoch's start.
constexpr auto kFenceMargin = 100ms;
// After this process was frozen, how long the service reads what the nodes sent meanwhile before it judges
// their silence.
constexpr auto kFreezeGrace = 300ms;
// How late a node's view of its ranks may reach node 0 beyond its cadence: a board read (250 ms) and some.
constexpr auto kProgressLag = 350ms;

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

JobDecision ToDecision(const JobEvent& e) {
  JobDecision d;
  switch (e.kind) {
    case JobEvent::Kind::kStop:
      d.kind = JobDecision::Kind::kStop;
      d.exit_code = e.exit_code;
      d.coordinator_lost = e.coordinator_lost;
      d.reason = e.root_cause.node_rank < 0 ? e.root_cause.description : DescribeFailure(e.root_cause);
      break;
    case JobEvent::Kind::kRestart:
      d.kind = JobDecision::Kind::kRestart;
      d.restart_round = e.restart_round;
      d.node_lost = e.node_lost;
      d.node_arrived = e.node_arrived;
      d.reason = e.root_cause.node_rank < 0 ? e.root_cause.description : DescribeFailure(e.root_cause);
      break;
    case JobEvent::Kind::kNotice:
      d.kind = JobDecision::Kind::kNotice;
      d.reason = e.notice;
      break;
    case JobEvent::Kind::kComplete:
      d.kind = JobDecision::Kind::kComplete;
      break;
    case JobEvent::Kind::kStacks:
      d.kind = JobDecision::Kind::kStacks;
      d.stacks_id = e.stacks_id;
      break;
    case JobEvent::Kind::kDiagnosis:
      d.kind = JobDecision::Kind::kDiagnosis;
      d.reason = e.notice;
      d.warning = e.warning;
      d.info = e.info;
      break;
    case JobEvent::Kind::kFailover:
      d.kind = JobDecision::Kind::kFailover;
      d.reason = e.notice;
      break;
    case JobEvent::Kind::kHeartbeat:
    case JobEvent::Kind::kJoined:
    case JobEvent::Kind::kStandby:
      break;  // not decisions: the agent keeps join answers itself and drops the others
  }
  return d;
}

// A single-host job's port: the one its plan was made with (picked free a moment before), so that the
// rendezvous settles the plan as it is and it is not made again; else (taken meanwhile) any. A port held
// since before the workers started is theirs already.
// Where node 0's service listens: a single-host job's loopback port (its workers', MakeServerConfig), else
// every address (or --coordinator-bind-address) on the coordinator's port.
std::string ServiceAddress(const Plan& plan, const Options& options) {
  HostPort coordinator = ParseHostPort("coordinator address", plan.assignment.coordinator_address);
  if (!options.join && SingleHost(plan)) {
    return FormatHostPort(LoopbackHost(plan), plan.topology.coordinator_port.value_or(0));
  }
  std::string bind = options.coordinator_bind_address.value_or(
      coordinator.host.find(':') != std::string::npos ? "::" : "0.0.0.0");
  return FormatHostPort(bind, coordinator.port.value_or(0));
}

// --node-rank auto (torchrun's c10d rendezvous): this distrun serves the job, as node 0, when the
// coordinator's host is this machine (one of its addresses can be bound here) and the coordinator's port is
// still free where the service listens (no other distrun of this host took it). The port, listening from
// now on (so that no other distrun can take it, and lingering connections of an earlier job's do not stop
// it), is the one the service serves; null: another node serves.
std::shared_ptr<ListeningSocket> ReserveIfServing(const Plan& plan, const Options& options) {
  HostPort coordinator = ParseHostPort("coordinator address", plan.assignment.coordinator_address);
  try {
    ListeningSocket::Reserve(coordinator.host, 0);  // an address of this machine's, or it throws
  } catch (const std::exception&) {
    return nullptr;
  }
  HostPort at = ParseHostPort("service address", ServiceAddress(plan, options));
  try {
    return std::make_shared<ListeningSocket>(ListeningSocket::Open(at.host, at.port.value_or(0)));
  } catch (const std::exception&) {
    return nullptr;  // taken: a distrun of this host serves
  }
}

std::shared_ptr<ListeningSocket> ProvisionalPort(const Plan& plan, const HeldPort* held) {
  if (held) return std::make_shared<ListeningSocket>(ListeningSocket::Duplicate(held->listen_fd));
  try {
    int port = ParseHostPort("coordinator address", plan.assignment.coordinator_address).port.value_or(0);
    if (port > 0)
      return std::make_shared<ListeningSocket>(ListeningSocket::Reserve(LoopbackHost(plan), port));
  } catch (const std::exception&) {
  }
  return nullptr;
}

}  // namespace

RuntimeLink::RuntimeLink(const Plan& plan, const Options& options, const Environment& env,
                         std::shared_ptr<spdlog::logger> log, const std::string& leaving,
                         const HeldPort* held)
    : log_(std::move(log)),
      node_rank_(options.join ? kArrivingNode : plan.layout.unit_index),
      num_nodes_(plan.layout.units),
      seats_are_nodes_(options.elastic.has_value()),
      ranks_from_coordinator_(plan.topology.node_rank_auto),
      fresh_master_port_(options.elastic && !plan.topology.master_port),
      fresh_jax_port_(options.elastic && !options.jax_coordinator_port && !plan.topology.jax_port) {
  if (plan.topology.node_rank_auto && !options.join && (num_nodes_ > 1 || options.elastic)) {
    served_port_ = ReserveIfServing(plan, options);
    node_rank_ = served_port_ ? 0 : kArrivingNode;
    log_->info("{} {}", served_port_ ? "serving the job's rendezvous at" : "joining the job's rendezvous at",
               plan.assignment.coordinator_address);
  }
  protection_ = ResolveProtection(plan, options, env);
  if (!protection_.munge_socket.warning.empty()) log_->warn("{}", protection_.munge_socket.warning);
  const JobToken& token = protection_.token;
  // A single-host job's token was made up when its port was held, and its workers have it.
  if (held && protection_.token.made_up)
    protection_.token.value = protection_.worker_token = held->worker_token;
  token_ = protection_.worker_token;
  if (options.join) {
    CheckArrival(plan, token);
  } else if (num_nodes_ > 1 && !plan.topology.coordinator_port) {
    throw UsageError("a job of " + std::to_string(num_nodes_) +
                     " distrun processes needs one coordinator port that all of them know; give "
                     "--coordinator-port PORT (or HOST:PORT in --coordinator-address)");
  }
  // Per-task jobs count hosts: the distrun processes on one host are one node of the range.
  const bool per_task = plan.layout.mode == LaunchMode::kPerTask;
  const int nodes = per_task ? plan.topology.num_nodes : num_nodes_;
  if (options.elastic && !options.join &&
      (nodes < options.elastic->min_nodes || nodes > options.elastic->max_nodes)) {
    throw UsageError("--nnodes " + std::to_string(options.elastic->min_nodes) + ":" +
                     std::to_string(options.elastic->max_nodes) + " does not fit the " +
                     std::to_string(nodes) + (per_task ? " hosts" : " distrun processes") +
                     " the launcher started; start between " + std::to_string(options.elastic->min_nodes) +
                     " and " + std::to_string(options.elastic->max_nodes) + " of them, or change --nnodes");
  }
  if (protection_.kind == JobProtection::Kind::kNone) {
    log_->warn(
        "no job token (DISTRUN_TOKEN or --token-file) and no munge{}: anything that reaches {} can join or "
        "stop this job; set a token for every node, e.g. in the batch script: {}",
        protection_.munge_problem.empty() ? std::string() : " (" + protection_.munge_problem + ")",
        plan.assignment.coordinator_address, kTokenRecipe);
  } else if (node_rank_ == 0 && protection_.kind == JobProtection::Kind::kMunge) {
    log_->info("protection: {}", protection_.Describe());  // new to users who set no token; -v shows the rest
  } else if (node_rank_ == 0) {
    log_->debug("protection: {}", protection_.Describe());
  }

  const bool single_host = !options.join && SingleHost(plan);
  if (single_host) {
    // Every distrun and worker of the job is on this host: loopback only, never reachable from outside.
    worker_address_ = FormatHostPort(LoopbackHost(plan), plan.topology.coordinator_port.value_or(0));
  } else {
    worker_address_ = plan.assignment.coordinator_address;
  }
  const std::filesystem::path stacks_dir = options.log_dir
                                               ? std::filesystem::path(*options.log_dir)
                                               : std::filesystem::path(env.GetOr("TMPDIR", "/tmp"));
  PrepareObserver(options);
  if (node_rank_ == 0) {
    StartService(plan, options, stacks_dir, held);
    StartObserver();
  }
  if (options.join) log_->info("arriving at the running job at {}", *options.join);

  AgentConfig config;
  // An arrival may know several addresses (node 0's, the standbys'): its agent tries them in turn.
  config.coordinator_address = options.join ? *options.join : worker_address_;
  // Node 0's agent reaches the service in its own process without a socket; the others connect.
  if (service_) config.in_process_service = service_.get();
  // Node 0's agent calls the service in-process with the workers' token; the others say the agents' in their
  // hello and, with munge, prove their user.
  config.token = node_rank_ == 0 ? token_ : token.value;
  config.join.node_rank = node_rank_;
  config.join.num_nodes = num_nodes_;
  config.join.host = node_rank_ == 0 ? plan.assignment.process0_host : env.hostname;
  config.join.machine = env.hostname;
  config.join.recovers_in_place = options.recovery == RecoveryMode::kInProcess;
  config.join.local_workers = plan.layout.local_workers;
  config.join.device_tokens = plan.layout.node_devices;
  // A run id this distrun made up is its own: node 0's is the job's. One from the launcher or --run-id is
  // checked, so that a distrun of another job is refused.
  if (options.run_id || !plan.topology.job_id.empty() || node_rank_ == 0) {
    config.join.run_id = plan.assignment.run_id;
  }
  if (node_rank_ == 0) {
    config.join.proposed_master_port = plan.assignment.master_port.value_or(0);
    config.join.proposed_jax_port = plan.assignment.jax_port.value_or(0);
  }
  join_run_id_ = config.join.run_id;
  if (node_rank_ != 0) config.credential = Credential();
  if (options.elastic && node_rank_ != 0) {
    // Every node but node 0 may be an epoch's standby, and turns to the standby when node 0 is lost.
    config.join.standby_address = PrepareStandby(plan, options, stacks_dir, config.join.host);
    config.on_coordinator_lost = [this](const std::string& why) { return TurnToStandby(why); };
  }
  config.join.leaving = leaving;
  config.join.arriving = options.join.has_value();
  config.join.claims_seat = plan.topology.node_rank_auto && node_rank_ == kArrivingNode && !options.join;
  left_at_start_ = !leaving.empty();
  config.initialization_timeout = Millis(options.initialization_timeout_s);
  config.heartbeat_timeout = Millis(options.heartbeat_timeout_s);
  config.heartbeat_interval = HeartbeatInterval(config.heartbeat_timeout, num_nodes_);
  agent_ = std::make_unique<Agent>(std::move(config));
}

ServiceConfig RuntimeLink::MakeServiceConfig(const Plan& plan, const Options& options,
                                             const std::filesystem::path& stacks_dir) const {
  ServiceConfig sc;
  sc.num_nodes = num_nodes_;
  sc.max_restarts = options.max_restarts;
  sc.recovery_in_place = options.recovery == RecoveryMode::kInProcess;
  sc.run_id = plan.assignment.run_id;
  if (plan.layout.mode == LaunchMode::kPerNode &&
      static_cast<int>(plan.topology.hosts.size()) == num_nodes_) {
    sc.expected_hosts = plan.topology.hosts;
  }
  sc.initialization_timeout = Millis(options.initialization_timeout_s);
  sc.heartbeat_timeout = Millis(options.heartbeat_timeout_s);
  sc.elastic = options.elastic;
  sc.agents_share_hosts = plan.layout.mode == LaunchMode::kPerTask;
  sc.scale_up_notice = Millis(options.scale_up_notice_s);
  if (options.hang_timeout_s) {
    sc.hang.off = *options.hang_timeout_s <= 0;
    sc.hang.timeout = Millis(*options.hang_timeout_s);
  }
  sc.hang.stall = Millis(options.stall_warning_s);
  // A node reads its board every 250 ms and sends news of progress at most every ProgressNewsInterval;
  // it reports at every heartbeat, so one silent for an interval and the same margin is overdue and its
  // last report no evidence (hang_watch.h): node 0 never ages a report by more than the margin beyond
  // what its node saw.
  const std::chrono::milliseconds heartbeat = HeartbeatInterval(sc.heartbeat_timeout, num_nodes_);
  sc.hang.staleness = ProgressNewsInterval(heartbeat) + kProgressLag;
  sc.hang.overdue = heartbeat + kProgressLag;
  // On a hang, the host's distrun prints one screen of the merged stacks; the whole dump goes beside the
  // logs.
  sc.explain = [stacks_dir](const std::string& verdict, const StacksReply& stacks) {
    StacksPicture picture = DrawStacks(stacks, kStacksScreenLines);
    std::string problem;
    std::string path = WriteStacksFile(stacks_dir, verdict + "\n\n" + picture.full, &problem);
    HangExplanation e;
    e.text = verdict + "\n" + picture.screen +
             (path.empty() ? "the full dump was not written: " + problem : "every stack: " + path);
    e.odd_ranks = std::move(picture.odd_ranks);
    e.odd_summary = std::move(picture.odd_summary);
    return e;
  };
  // A dying node's peers see their collectives fail within milliseconds of its connection's close.
  if (options.elastic) {
    sc.failure_hold = kElasticFailureHold;
    // A silent node's sentinel or agent gives up on its own last contact, which lags node 0's by up to a
    // heartbeat interval; then it needs a moment to kill its workers.
    sc.fence_wait = heartbeat + kFenceMargin;
  }
  sc.freeze_grace = kFreezeGrace;
  sc.straggler.threshold = options.straggler_threshold;
  return sc;
}

void RuntimeLink::PrepareObserver(const Options& options) {
  if (!options.metrics_address) return;
  auto config = std::make_unique<ObserveConfig>();
  config->host = options.metrics_address->host;
  config->port = options.metrics_address->port.value_or(0);
  metrics_token_file_ = options.metrics_token_file;  // read where it is served, which may be elsewhere later
  config->job_token = token_;
  config->stacks_json = [](const StacksReply& reply) { return StacksTreeJson(reply); };
  observe_config_ = std::move(config);
}

void RuntimeLink::StartObserver(const std::string& takeover_host) {
  if (!observe_config_ || !service_) return;
  const bool takeover = !takeover_host.empty();
  ObserveConfig config = *observe_config_;
  if (metrics_token_file_) {
    std::ifstream in(*metrics_token_file_);
    std::string token((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
    if (token.empty()) {
      const std::string what = "--metrics-token-file " + *metrics_token_file_ +
                               ": cannot read a token from it; give a readable file that holds one line";
      // Never served without the token it was given.
      if (!takeover) throw UsageError(what);
      log_->warn("{}; this coordinator serves no metrics or page", what);
      return;
    }
    config.bearer_token = std::move(token);
  }
  const std::string where = FormatHostPort(config.host, config.port);
  if (takeover) {
    TakeoverObserver::Hooks hooks;
    hooks.served = [log = log_](const std::string& url) { log->info("job page and metrics at {}", url); };
    hooks.waiting = [log = log_, where](const std::string& why) {
      log->warn("cannot serve the job's metrics and page at {} yet ({}): trying again until it is free",
                where, why);
    };
    hooks.given_up = [log = log_, where](const std::string& why) {
      log->warn("cannot serve the job's metrics and page at {}: {}; this coordinator goes on without them",
                where, why);
    };
    takeover_observe_ =
        std::make_unique<TakeoverObserver>(*service_, std::move(config), takeover_host, std::move(hooks));
    return;
  }
  try {
    observe_ = std::make_unique<ObserveServer>(*service_, std::move(config));
  } catch (const std::exception& e) {
    throw UsageError("cannot serve the job's metrics and page at " + where + ": " + e.what() +
                     "; choose another --metrics-address");
  }
  log_->info("job page and metrics at {}", observe_->url());
}

GrpcServerConfig RuntimeLink::MakeServerConfig(const Plan& plan, const Options& options) const {
  GrpcServerConfig gc;
  gc.token = token_;
  gc.agent_token = protection_.token.value;
  gc.log = log_;
  if (protection_.kind == JobProtection::Kind::kMunge) {
    gc.munge = protection_.munge;
    gc.admission.uid = ::geteuid();
    gc.admission.run_id = plan.assignment.run_id;
    gc.munge_alone = protection_.token.made_up;
  }
  gc.torch_store = options.torch_store == TorchStoreHost::kDistrun;
  if (!options.join && SingleHost(plan)) {
    gc.address = worker_address_;
    gc.loopback_only = true;
  } else {
    gc.torch_store_job_hosts_only = true;  // TCPStore has no credentials: this host and the agents' only
    gc.address = ServiceAddress(plan, options);
  }
  return gc;
}

void RuntimeLink::StartService(const Plan& plan, const Options& options,
                               const std::filesystem::path& stacks_dir, const HeldPort* held) {
  ServiceConfig sc = MakeServiceConfig(plan, options, stacks_dir);
  if (token_ != protection_.token.value) sc.worker_token = token_;  // made here: every node learns it
  service_ = std::make_unique<CoordinationService>(std::move(sc));
  GrpcServerConfig gc = MakeServerConfig(plan, options);
  if (gc.loopback_only && (held || !plan.topology.coordinator_port)) gc.listen = ProvisionalPort(plan, held);
  if (served_port_) gc.listen = std::exchange(served_port_, nullptr);
  try {
    server_ = std::make_unique<GrpcServer>(*service_, gc);
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    throw JobLinkError(std::string(e.what()) +
                       "; another job may use that port: choose another with --coordinator-port");
  }
  if (gc.loopback_only) worker_address_ = server_->address();
  log_->debug("runtime service listening on {} for {} node(s)", server_->address(), num_nodes_);
}

std::string RuntimeLink::PrepareStandby(const Plan& plan, const Options& options,
                                        const std::filesystem::path& stacks_dir, const std::string& host) {
  GrpcServerConfig gc = MakeServerConfig(plan, options);
  HostPort bind = ParseHostPort("coordinator address", gc.address);
  // Loopback jobs stay on loopback; otherwise the others reach this node by the name it joins with,
  // unless --coordinator-bind-address names one address.
  const bool wildcard = bind.host == "0.0.0.0" || bind.host == "::";
  const std::string reachable = gc.loopback_only || !wildcard ? bind.host : host;
  // A per-task job's standby is a host's first task (its lowest agent number): a fixed port is its own.
  const bool first_on_host = plan.layout.mode != LaunchMode::kPerTask || plan.topology.local_task == 0;
  const int port = first_on_host ? options.standby_port.value_or(0) : 0;
  try {
    standby_port_ = std::make_shared<ListeningSocket>(ListeningSocket::Reserve(bind.host, port));
  } catch (const std::exception& e) {
    log_->warn(
        "this node cannot be the job's standby coordinator ({}): were it the standby when node 0 is "
        "lost, the job would end",
        e.what());
    return "";
  }
  standby_address_ = FormatHostPort(reachable, standby_port_->port());
  gc.address = FormatHostPort(bind.host, standby_port_->port());
  gc.listen = standby_port_;
  standby_server_config_ = std::make_unique<GrpcServerConfig>(std::move(gc));
  ServiceConfig sc = MakeServiceConfig(plan, options, stacks_dir);
  sc.expected_hosts.clear();  // the copy knows the job's hosts
  standby_service_config_ = std::make_unique<ServiceConfig>(std::move(sc));
  log_->debug("this node would serve the job as its standby on {}", standby_address_);
  return standby_address_;
}

std::function<std::string(int port)> RuntimeLink::Credential() const {
  if (protection_.kind != JobProtection::Kind::kMunge) return nullptr;
  AgentIdentity identity;
  identity.node_rank = node_rank_;
  identity.run_id = join_run_id_;
  return [munge = protection_.munge, identity, log = log_](int port) {
    AgentIdentity made = identity;
    made.port = port;
    std::string why;
    std::optional<std::string> credential = munge->Encode(AgentIdentityPayload(made), &why);
    if (!credential) log->error("this node cannot prove its user to the job's coordinator: {}", why);
    return credential.value_or("");
  };
}

std::optional<FailoverTarget> RuntimeLink::TurnToStandby(const std::string& why) {
  std::lock_guard lock(mu_);
  const std::string address = std::exchange(turn_to_, "");
  if (service_ || address.empty()) return std::nullopt;  // this node hosts the job, or there is no standby
  if (!is_standby_) {
    log_->warn("lost the job's coordinator at {} ({}); turning to its standby at {}", worker_address_, why,
               address);
    worker_address_ = address;
    return FailoverTarget{address, nullptr, Credential()};
  }
  std::optional<ServiceSnapshot> copy = agent_->StandbyCopy();
  if (!copy) {
    log_->error(
        "lost the job's coordinator at {} ({}); this node is its standby but holds no copy of the job",
        worker_address_, why);
    return std::nullopt;
  }
  ServiceConfig sc = *standby_service_config_;
  sc.run_id = copy->run_id;  // node 0's, where this node made up its own
  sc.worker_token.clear();   // the copy's
  sc.host_agent = node_rank_;
  sc.resume = std::move(copy);
  GrpcServerConfig gc = *standby_server_config_;
  gc.token = token_;
  if (gc.munge) gc.admission.run_id = sc.run_id;
  try {
    auto service = std::make_unique<CoordinationService>(std::move(sc));
    server_ = std::make_unique<GrpcServer>(*service, gc);
    service_ = std::move(service);
  } catch (const std::exception& e) {
    log_->error("lost the job's coordinator at {} ({}); this node, its standby, cannot serve the job: {}",
                worker_address_, why, e.what());
    return std::nullopt;
  }
  if (observe_config_) observe_config_->job_token = token_;
  StartObserver(/*takeover_host=*/ParseHostPort("the standby's address", address).host);
  log_->warn(
      "lost the job's coordinator at {} ({}); this node, its standby, serves the job on {} and takes it over "
      "once a majority of the last epoch's nodes reach it",
      worker_address_, why, address);
  worker_address_ = address;
  return FailoverTarget{address, service_.get(), nullptr};
}

std::string RuntimeLink::worker_address() const {
  std::lock_guard lock(mu_);
  return worker_address_;
}

void RuntimeLink::Finish() {
  CoordinationService* service = nullptr;
  {
    std::lock_guard lock(mu_);
    service = service_.get();
  }
  if (finished_ || service == nullptr) return;
  finished_ = true;
  if (std::string history = service->History(); !history.empty()) log_->info("the job ran {}", history);
  JobState state = service->State();
  // A host that fenced itself told nobody else: they turn to the standby once its port closes.
  const bool fenced = service->ExitCode() == kFencedExitCode;
  if ((state == JobState::kSucceeded || state == JobState::kStopped) && !fenced) {
    // The others hear the end on their streams and close them; this node's own stream stays open.
    auto deadline = std::chrono::steady_clock::now() + kFinalEventWait;
    while (service->AttachedAgents() > 1 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(2ms);
    }
  }
}

RuntimeLink::~RuntimeLink() {
  Finish();
  agent_.reset();
  takeover_observe_.reset();
  observe_.reset();
  server_.reset();
  service_.reset();
}

void RuntimeLink::CheckArrival(const Plan& plan, const JobToken& token) const {
  if (plan.layout.mode != LaunchMode::kPerNode) {
    throw UsageError(
        "--join works in per-node mode (one distrun per host, --launch-mode per-node); a late "
        "task of a per-task job cannot take ranks of its own");
  }
  if (token.made_up && protection_.kind != JobProtection::Kind::kMunge) {
    throw UsageError(
        "--join needs the job's token: set DISTRUN_TOKEN (or --token-file) to the one the job's "
        "other distrun processes use");
  }
}

JobAssignment RuntimeLink::Rendezvous(int round, const JobAssignment& provisional,
                                      const std::vector<int>& fresh_local) {
  NodeAssignment na;
  std::optional<ProposedPorts> ports;
  bool hosting = false;
  {
    std::lock_guard lock(mu_);
    hosting = service_ != nullptr;
  }
  if (hosting && round > 0 && (fresh_master_port_ || fresh_jax_port_)) {
    // An elastic epoch gets ports no worker of an earlier epoch still holds or dials (a fenced node's).
    ports = ProposedPorts{fresh_master_port_ ? PickFreePort() : provisional.master_port.value_or(0),
                          fresh_jax_port_ ? PickFreePort() : provisional.jax_port.value_or(0)};
  }
  Status s = agent_->Join(round, &na, ports, fresh_local);
  if (!s.ok()) {
    // Lost while it waited (frozen, cut off), the node is fenced: it leaves as fenced nodes do.
    const bool fenced = s.code == StatusCode::kAborted && s.message.starts_with(kFencedPrefix);
    throw JobLinkError("rendezvous failed: " + s.message, fenced ? kFencedExitCode : 1);
  }
  if (node_rank_ == kArrivingNode) {
    std::lock_guard lock(mu_);                        // the failover's credential names it
    node_rank_ = na.agent;                            // what its failure reports name from now on
    worker_address_ = agent_->coordinator_address();  // of several, the one that admitted it
    if (ranks_from_coordinator_)
      log_->info("this is node {}, as the coordinator at {} gave it", node_rank_, worker_address_);
    else
      log_->info("admitted as node {}", node_rank_);
  }
  JobAssignment a = provisional;
  a.rank_offset = na.rank_offset;
  a.num_processes = na.num_processes;
  if (!na.process0_host.empty()) a.process0_host = na.process0_host;
  if (na.master_port > 0) a.master_port = na.master_port;
  if (na.jax_port > 0) a.jax_port = na.jax_port;
  if (!na.run_id.empty()) a.run_id = na.run_id;
  a.restart_count = na.restart_round;
  a.change = na.change;
  // The epoch's world: an elastic job's node ranks change as nodes are lost; a spare gets no seat. (In
  // per-task mode a node is a host with all of its distrun processes.)
  a.spare = na.spare;
  if (seats_are_nodes_ || ranks_from_coordinator_) {
    a.num_nodes = na.num_nodes;
    if (!na.spare) a.node_rank = na.node_rank;
  }
  std::lock_guard lock(mu_);
  if (!na.worker_token.empty()) token_ = na.worker_token;
  // Where to turn if the service's host is lost: the epoch's standby, this node's own service when it is
  // that standby, nowhere for the host itself.
  is_standby_ = !service_ && na.standby_agent == na.agent;
  turn_to_ = service_ ? "" : is_standby_ ? standby_address_ : na.standby_address;
  if (!na.standby_address.empty()) {
    // Where a --join arrival finds the job should node 0 be lost.
    log_->debug("epoch {}: the standby coordinator is node {} at {}{}", na.restart_round,
                na.standby_agent.value_or(-1), na.standby_address, is_standby_ ? " (this node)" : "");
  }
  a.coordinator_address = worker_address_;
  return a;
}

void RuntimeLink::CancelRendezvous() { agent_->CancelJoin(); }

bool RuntimeLink::ReportFailure(const FailedWorker& failure) {
  FailedWorker f = failure;
  f.node_rank = node_rank_;
  bool root_cause = true;
  Status s = agent_->ReportFailure(f, &root_cause);
  if (!s.ok()) log_->warn("cannot report the failure to the runtime: {}", s.message);
  return root_cause;
}

void RuntimeLink::Leave(int round, const std::string& reason) {
  if (left_at_start_) {
    NodeAssignment ignored;
    agent_->Join(0, &ignored);  // the first join said so already: wait for its answer
    return;
  }
  agent_->Leave(round, reason);
}

void RuntimeLink::ReportSuccess() {
  Status s = agent_->ReportSuccess();
  if (!s.ok()) log_->warn("cannot report this node's success to the runtime: {}", s.message);
}

int RuntimeLink::event_fd() const { return agent_->event_fd(); }

void RuntimeLink::ReportProgress(const NodeProgress& progress) { agent_->SetProgress(progress); }

void RuntimeLink::SendStacks(const StacksReply& reply) { agent_->SendStacks(reply); }

std::vector<JobDecision> RuntimeLink::TakeDecisions() {
  std::vector<JobDecision> out;
  for (const JobEvent& e : agent_->TakeEvents()) {
    if (e.kind != JobEvent::Kind::kHeartbeat && e.kind != JobEvent::Kind::kJoined)
      out.push_back(ToDecision(e));
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> RuntimeLink::WorkerSecrets() const {
  std::lock_guard lock(mu_);
  return {{"DISTRUN_TOKEN", token_}};
}

}  // namespace distrun
