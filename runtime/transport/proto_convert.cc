#include "runtime/transport/proto_convert.h"

namespace distrun {
namespace {

// A status code off the wire, any int32: grpc::StatusCode holds only gRPC's own codes (casting any other
// to it is undefined), and one this side does not know is UNKNOWN, which FromGrpc reads as transport
// trouble.
grpc::Status WireStatus(int32_t code, const std::string& message) {
  const bool known = code >= grpc::StatusCode::OK && code <= grpc::StatusCode::UNAUTHENTICATED;
  return {known ? static_cast<grpc::StatusCode>(code) : grpc::StatusCode::UNKNOWN, message};
}

}  // namespace

grpc::Status ToGrpc(const Status& status) {
  switch (status.code) {
    case StatusCode::kOk:
      return grpc::Status::OK;
    case StatusCode::kInvalidArgument:
      return {grpc::StatusCode::INVALID_ARGUMENT, status.message};
    case StatusCode::kNotFound:
      return {grpc::StatusCode::NOT_FOUND, status.message};
    case StatusCode::kAlreadyExists:
      return {grpc::StatusCode::ALREADY_EXISTS, status.message};
    case StatusCode::kFailedPrecondition:
      return {grpc::StatusCode::FAILED_PRECONDITION, status.message};
    case StatusCode::kOutOfRange:
      return {grpc::StatusCode::OUT_OF_RANGE, status.message};
    case StatusCode::kDeadlineExceeded:
      return {grpc::StatusCode::DEADLINE_EXCEEDED, status.message};
    case StatusCode::kResourceExhausted:
      return {grpc::StatusCode::RESOURCE_EXHAUSTED, status.message};
    case StatusCode::kAborted:
      return {grpc::StatusCode::ABORTED, status.message};
    case StatusCode::kUnavailable:
      return {grpc::StatusCode::UNAVAILABLE, status.message};
    case StatusCode::kUnauthenticated:
      return {grpc::StatusCode::UNAUTHENTICATED, status.message};
    case StatusCode::kCancelled:
      return {grpc::StatusCode::CANCELLED, status.message};
  }
  return {grpc::StatusCode::UNKNOWN, status.message};
}

Status FromGrpc(const grpc::Status& status) {
  std::string message = status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return Status::Ok();
    case grpc::StatusCode::INVALID_ARGUMENT:
      return {StatusCode::kInvalidArgument, message};
    case grpc::StatusCode::NOT_FOUND:
      return {StatusCode::kNotFound, message};
    case grpc::StatusCode::ALREADY_EXISTS:
      return {StatusCode::kAlreadyExists, message};
    case grpc::StatusCode::FAILED_PRECONDITION:
      return {StatusCode::kFailedPrecondition, message};
    case grpc::StatusCode::OUT_OF_RANGE:
      return {StatusCode::kOutOfRange, message};
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return {StatusCode::kDeadlineExceeded, message};
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return {StatusCode::kResourceExhausted, message};
    case grpc::StatusCode::ABORTED:
      return {StatusCode::kAborted, message};
    case grpc::StatusCode::UNAUTHENTICATED:
      return {StatusCode::kUnauthenticated, message};
    case grpc::StatusCode::CANCELLED:
      return {StatusCode::kCancelled, message};
    default:
      return {StatusCode::kUnavailable, message};  // transport trouble: UNAVAILABLE, INTERNAL, ...
  }
}

void ToProto(const Status& in, v1::CallStatus* out) {
  grpc::Status status = ToGrpc(in);
  out->set_code(static_cast<int32_t>(status.error_code()));
  out->set_message(status.error_message());
}

Status FromProto(const v1::CallStatus& in) { return FromGrpc(WireStatus(in.code(), in.message())); }

void ToProto(const NodeJoin& in, v1::JoinRequest* out) {
  out->set_node_rank(in.node_rank);
  out->set_num_nodes(in.num_nodes);
  out->set_host(in.host);
  out->set_local_workers(in.local_workers);
  for (const auto& t : in.device_tokens) out->add_device_tokens(t);
  out->set_run_id(in.run_id);
  out->set_restart_round(in.restart_round);
  out->set_proposed_master_port(in.proposed_master_port);
  out->set_proposed_jax_port(in.proposed_jax_port);
  out->set_leaving(in.leaving);
  out->set_arriving(in.arriving);
  out->set_claims_seat(in.claims_seat);
  out->set_machine(in.machine);
  out->set_replicates(in.replicates);
  out->set_standby_address(in.standby_address);
  out->set_recovers_in_place(in.recovers_in_place);
  for (int local : in.fresh_local) out->add_fresh_local(local);
}

NodeJoin FromProto(const v1::JoinRequest& in) {
  NodeJoin j;
  j.node_rank = in.node_rank();
  j.num_nodes = in.num_nodes();
  j.host = in.host();
  j.local_workers = in.local_workers();
  j.device_tokens.assign(in.device_tokens().begin(), in.device_tokens().end());
  j.run_id = in.run_id();
  j.restart_round = in.restart_round();
  j.proposed_master_port = in.proposed_master_port();
  j.proposed_jax_port = in.proposed_jax_port();
  j.leaving = in.leaving();
  j.arriving = in.arriving();
  j.claims_seat = in.claims_seat();
  j.machine = in.machine();
  j.replicates = in.replicates();
  j.standby_address = in.standby_address();
  j.recovers_in_place = in.recovers_in_place();
  j.fresh_local.assign(in.fresh_local().begin(), in.fresh_local().end());
  return j;
}

void ToProto(const NodeAssignment& in, v1::Assignment* out) {
  out->set_rank_offset(in.rank_offset);
  out->set_num_processes(in.num_processes);
  out->set_num_nodes(in.num_nodes);
  out->set_node_rank(in.node_rank);
  out->set_process0_host(in.process0_host);
  out->set_master_port(in.master_port);
  out->set_jax_port(in.jax_port);
  out->set_run_id(in.run_id);
  out->set_restart_round(in.restart_round);
  out->set_spare(in.spare);
  out->set_agent(in.agent);
  out->set_worker_token(in.worker_token);
  if (in.standby_agent) out->set_standby_agent(*in.standby_agent);
  out->set_standby_address(in.standby_address);
  if (in.change.source >= 0) out->set_source_rank(in.change.source);
  for (int r : in.change.lost) out->add_lost_ranks(r);
  for (int r : in.change.joined) out->add_joined_ranks(r);
}

NodeAssignment FromProto(const v1::Assignment& in) {
  NodeAssignment a;
  a.rank_offset = in.rank_offset();
  a.num_processes = in.num_processes();
  a.num_nodes = in.num_nodes();
  a.node_rank = in.node_rank();
  a.process0_host = in.process0_host();
  a.master_port = in.master_port();
  a.jax_port = in.jax_port();
  a.run_id = in.run_id();
  a.restart_round = in.restart_round();
  a.spare = in.spare();
  a.agent = in.agent();
  a.worker_token = in.worker_token();
  if (in.has_standby_agent()) a.standby_agent = in.standby_agent();
  a.standby_address = in.standby_address();
  a.change.source = in.has_source_rank() ? in.source_rank() : -1;
  a.change.lost.assign(in.lost_ranks().begin(), in.lost_ranks().end());
  a.change.joined.assign(in.joined_ranks().begin(), in.joined_ranks().end());
  return a;
}

void ToProto(const FailedWorker& in, v1::FailedWorker* out) {
  out->set_node_rank(in.node_rank);
  out->set_host(in.host);
  out->set_process_id(in.process_id);
  out->set_exit_code(in.exit_code);
  out->set_description(in.description);
}

FailedWorker FromProto(const v1::FailedWorker& in) {
  return FailedWorker{in.node_rank(), in.host(), in.process_id(), in.exit_code(), in.description()};
}

void ToProto(const JobEvent& in, v1::JobEvent* out) {
  switch (in.kind) {
    case JobEvent::Kind::kHeartbeat:
    case JobEvent::Kind::kFailover:  // never sent: an agent's own
      out->mutable_heartbeat();
      break;
    case JobEvent::Kind::kStop:
      out->mutable_stop()->set_exit_code(in.exit_code);
      ToProto(in.root_cause, out->mutable_stop()->mutable_root_cause());
      break;
    case JobEvent::Kind::kRestart:
      out->mutable_restart()->set_restart_round(in.restart_round);
      out->mutable_restart()->set_node_lost(in.node_lost);
      out->mutable_restart()->set_node_arrived(in.node_arrived);
      ToProto(in.root_cause, out->mutable_restart()->mutable_root_cause());
      break;
    case JobEvent::Kind::kComplete:
      out->mutable_complete();
      break;
    case JobEvent::Kind::kNotice:
      out->mutable_notice()->set_message(in.notice);
      break;
    case JobEvent::Kind::kStacks:
      out->mutable_stacks()->set_id(in.stacks_id);
      break;
    case JobEvent::Kind::kDiagnosis:
      out->mutable_diagnosis()->set_text(in.notice);
      out->mutable_diagnosis()->set_warning(in.warning);
      out->mutable_diagnosis()->set_info(in.info);
      break;
    case JobEvent::Kind::kStandby: {
      v1::StandbyUpdate* u = out->mutable_standby();
      const StandbyUpdate& update = in.standby_update.value();
      u->set_seq(update.seq);
      if (update.snapshot) ToProto(*update.snapshot, u->mutable_snapshot());
      u->set_key(update.key);
      if (update.value) u->set_value(*update.value);
      break;
    }
    case JobEvent::Kind::kJoined: {
      grpc::Status status = ToGrpc(in.join_status);
      v1::JoinAnswer* answer = out->mutable_joined();
      answer->set_code(static_cast<int32_t>(status.error_code()));
      answer->set_message(status.error_message());
      if (in.join_status.ok()) ToProto(in.assignment, answer->mutable_assignment());
      break;
    }
  }
}

JobEvent FromProto(const v1::JobEvent& in) {
  JobEvent e;
  switch (in.event_case()) {
    case v1::JobEvent::kStop:
      e.kind = JobEvent::Kind::kStop;
      e.exit_code = in.stop().exit_code();
      e.root_cause = FromProto(in.stop().root_cause());
      break;
    case v1::JobEvent::kRestart:
      e.kind = JobEvent::Kind::kRestart;
      e.restart_round = in.restart().restart_round();
      e.node_lost = in.restart().node_lost();
      e.node_arrived = in.restart().node_arrived();
      e.root_cause = FromProto(in.restart().root_cause());
      break;
    case v1::JobEvent::kComplete:
      e.kind = JobEvent::Kind::kComplete;
      break;
    case v1::JobEvent::kJoined:
      e.kind = JobEvent::Kind::kJoined;
      e.join_status = FromGrpc(WireStatus(in.joined().code(), in.joined().message()));
      if (e.join_status.ok()) e.assignment = FromProto(in.joined().assignment());
      break;
    case v1::JobEvent::kNotice:
      e.kind = JobEvent::Kind::kNotice;
      e.notice = in.notice().message();
      break;
    case v1::JobEvent::kStacks:
      e.kind = JobEvent::Kind::kStacks;
      e.stacks_id = in.stacks().id();
      break;
    case v1::JobEvent::kDiagnosis:
      e.kind = JobEvent::Kind::kDiagnosis;
      e.notice = in.diagnosis().text();
      e.warning = in.diagnosis().warning();
      e.info = in.diagnosis().info();
      break;
    case v1::JobEvent::kStandby: {
      e.kind = JobEvent::Kind::kStandby;
      StandbyUpdate& update = e.standby_update.emplace();
      update.seq = in.standby().seq();
      if (in.standby().has_snapshot()) update.snapshot = FromProto(in.standby().snapshot());
      update.key = in.standby().key();
      if (in.standby().has_value()) update.value = in.standby().value();
      break;
    }
    default:
      e.kind = JobEvent::Kind::kHeartbeat;
      break;  // also events of a newer minor version
  }
  return e;
}

void ToProto(const RankProgress& in, v1::RankProgress* out) {
  out->set_rank(in.rank);
  out->set_step(in.step);
  out->set_advanced_ms_ago(in.advanced_ms_ago);
  out->set_reported_ms_ago(in.reported_ms_ago);
  out->set_steps_per_second(in.steps_per_second);
  out->set_pid(in.pid);
  out->set_host(in.host);
}

RankProgress FromProto(const v1::RankProgress& in) {
  RankProgress r{in.rank(), in.step(), in.advanced_ms_ago(), in.reported_ms_ago(), in.steps_per_second(),
                 in.pid(),  in.host()};
  return r;
}

namespace {

void ToProto(const std::vector<RankSectionMedians>& in,
             google::protobuf::RepeatedPtrField<v1::RankSections>* out) {
  for (const RankSectionMedians& r : in) {
    v1::RankSections* o = out->Add();
    o->set_rank(r.rank);
    for (const auto& [name, median] : r.median_s) (*o->mutable_median_s())[name] = median;
    o->set_host(r.host);
    o->set_score(r.score);
    o->set_straggler(r.straggler);
    o->set_section(r.section);
  }
}

std::vector<RankSectionMedians> FromProto(const google::protobuf::RepeatedPtrField<v1::RankSections>& in) {
  std::vector<RankSectionMedians> out;
  for (const v1::RankSections& r : in) {
    RankSectionMedians m;
    m.rank = r.rank();
    m.median_s.insert(r.median_s().begin(), r.median_s().end());
    m.host = r.host();
    m.score = r.score();
    m.straggler = r.straggler();
    m.section = r.section();
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

void ToProto(const NodeProgress& in, v1::NodeProgress* out) {
  for (const RankProgress& r : in.ranks) ToProto(r, out->add_ranks());
  out->set_slowest_interval_ms(in.slowest_interval_ms);
  out->set_quiet_ms(in.quiet_ms);
  out->set_workers(in.workers);
  out->set_epoch(in.epoch);
  ToProto(in.sections, out->mutable_sections());
  if (in.recovery) {
    v1::NodeRecovery* r = out->mutable_recovery();
    r->set_generation(in.recovery->generation);
    r->set_notified_ms(in.recovery->notified_ms);
    r->set_ready_ms(in.recovery->ready_ms);
    r->set_world_ms(in.recovery->world_ms);
    r->set_up_ms(in.recovery->up_ms);
    r->set_first_step_ms(in.recovery->first_step_ms);
  }
}

NodeProgress FromProto(const v1::NodeProgress& in) {
  NodeProgress out;
  for (const auto& r : in.ranks()) out.ranks.push_back(FromProto(r));
  out.slowest_interval_ms = in.slowest_interval_ms();
  out.quiet_ms = in.quiet_ms();
  out.workers = in.workers();
  out.epoch = in.epoch();
  out.sections = FromProto(in.sections());
  if (in.has_recovery()) {
    const v1::NodeRecovery& r = in.recovery();
    out.recovery = NodeRecovery{r.generation(), r.notified_ms(), r.ready_ms(),
                                r.world_ms(),   r.up_ms(),       r.first_step_ms()};
  }
  return out;
}

void ToProto(const StacksReply& in, v1::StacksReply* out) {
  out->set_id(in.id);
  for (const WorkerStack& w : in.workers) {
    v1::WorkerStack* o = out->add_workers();
    o->set_rank(w.rank);
    o->set_host(w.host);
    o->set_pid(w.pid);
    o->set_gpu(w.gpu);
    o->set_mechanism(w.mechanism);
    o->set_text(w.text);
    o->set_error(w.error);
  }
  for (const std::string& m : in.missing) out->add_missing(m);
}

StacksReply FromProto(const v1::StacksReply& in) {
  StacksReply out;
  out.id = in.id();
  for (const auto& w : in.workers()) {
    out.workers.push_back(
        WorkerStack{w.rank(), w.host(), w.pid(), w.gpu(), w.mechanism(), w.text(), w.error()});
  }
  out.missing.assign(in.missing().begin(), in.missing().end());
  return out;
}

void ToProto(const JobStatusView& in, v1::JobStatus* out) {
  out->set_state(JobStateName(in.state));
  out->set_epoch(in.epoch);
  out->set_num_nodes(in.num_nodes);
  out->set_history(in.history);
  for (const RankProgress& r : in.ranks) ToProto(r, out->add_ranks());
  out->set_hang_timeout_ms(in.hang_timeout ? in.hang_timeout->count() : 0);
  out->set_hang_timeout_learned(in.hang_timeout_learned);
  for (const std::string& n : in.nodes) out->add_nodes(n);
  ToProto(in.sections, out->mutable_sections());
  out->set_straggler_threshold(in.straggler_threshold);
  out->set_restarts(in.restarts);
  out->set_nodes_lost(in.nodes_lost);
  out->set_recoveries_in_place(in.recoveries_in_place);
  out->set_recoveries_restart(in.recoveries_restart);
  for (const RecoveryRecord& r : in.recoveries) {
    v1::Recovery* o = out->add_recoveries();
    o->set_generation(r.generation);
    o->set_in_place(r.in_place);
    o->set_cause(r.cause);
    o->set_decided_ms(r.decided_ms);
    if (r.change.source >= 0) o->set_source_rank(r.change.source);
    for (int rank : r.change.lost) o->add_lost_ranks(rank);
    for (int rank : r.change.joined) o->add_joined_ranks(rank);
    o->set_notified_ms(r.phases.notified);
    o->set_ready_ms(r.phases.ready);
    o->set_agreed_ms(r.phases.agreed);
    o->set_up_ms(r.phases.up);
    o->set_first_step_ms(r.phases.first_step);
    o->set_complete(r.complete);
  }
  out->set_hung(in.hung);
}

JobStatusView FromProto(const v1::JobStatus& in) {
  JobStatusView v;
  for (JobState s : {JobState::kRendezvous, JobState::kRunning, JobState::kSucceeded, JobState::kStopped}) {
    if (in.state() == JobStateName(s)) v.state = s;
  }
  v.epoch = in.epoch();
  v.num_nodes = in.num_nodes();
  v.history = in.history();
  for (const auto& r : in.ranks()) v.ranks.push_back(FromProto(r));
  if (in.hang_timeout_ms() > 0) v.hang_timeout = std::chrono::milliseconds(in.hang_timeout_ms());
  v.hang_timeout_learned = in.hang_timeout_learned();
  v.nodes.assign(in.nodes().begin(), in.nodes().end());
  v.sections = FromProto(in.sections());
  v.straggler_threshold = in.straggler_threshold();
  v.restarts = in.restarts();
  v.nodes_lost = in.nodes_lost();
  v.hung = in.hung();
  v.recoveries_in_place = in.recoveries_in_place();
  v.recoveries_restart = in.recoveries_restart();
  for (const v1::Recovery& o : in.recoveries()) {
    RecoveryRecord r;
    r.generation = o.generation();
    r.in_place = o.in_place();
    r.cause = o.cause();
    r.decided_ms = o.decided_ms();
    r.change.source = o.has_source_rank() ? o.source_rank() : -1;
    r.change.lost.assign(o.lost_ranks().begin(), o.lost_ranks().end());
    r.change.joined.assign(o.joined_ranks().begin(), o.joined_ranks().end());
    r.phases = RecoveryPhases{o.notified_ms(), o.ready_ms(), o.agreed_ms(), o.up_ms(), o.first_step_ms()};
    r.complete = o.complete();
    v.recoveries.push_back(std::move(r));
  }
  return v;
}

void ToProto(const ServiceSnapshot& in, v1::ServiceSnapshot* out) {
  out->set_num_nodes(in.num_nodes);
  out->set_run_id(in.run_id);
  out->set_worker_token(in.worker_token);
  out->set_host_agent(in.host_agent);
  out->set_round(in.round);
  out->set_restarts(in.restarts);
  out->set_seq(in.seq);
  for (auto [agent, epoch] : in.losses) {
    v1::AgentEpoch* e = out->add_losses();
    e->set_agent(agent);
    e->set_epoch(epoch);
  }
  for (auto [agent, epoch] : in.arrivals) {
    v1::AgentEpoch* e = out->add_arrivals();
    e->set_agent(agent);
    e->set_epoch(epoch);
  }
  for (const std::string& h : in.hosts) out->add_hosts(h);
  const MembershipState& m = in.membership;
  v1::MembershipState* pm = out->mutable_membership();
  pm->set_min_nodes(m.range.min_nodes);
  pm->set_max_nodes(m.range.max_nodes);
  pm->set_policy(static_cast<v1::ElasticPolicy>(m.range.policy));
  pm->set_scale_up(static_cast<v1::ScaleUp>(m.range.scale_up));
  pm->set_epoch(m.epoch);
  for (int n : m.node_of) pm->add_node_of(n);
  for (bool b : m.lost) pm->add_lost(b);
  for (bool b : m.waiting) pm->add_waiting(b);
  for (int n : m.seated) pm->add_seated(n);
  for (int a : m.lost_order) pm->add_lost_order(a);
  for (const auto& [key, value] : in.job_keys) {
    v1::KvEntry* e = out->add_job_keys();
    e->set_key(key);
    e->set_value(value);
  }
  for (const auto& [agent, ranks] : in.world_ranks) {
    v1::AgentRanks* r = out->add_world_ranks();
    r->set_agent(agent);
    r->set_rank_offset(ranks.rank_offset);
    r->set_workers(ranks.workers);
  }
}

ServiceSnapshot FromProto(const v1::ServiceSnapshot& in) {
  ServiceSnapshot s;
  s.num_nodes = in.num_nodes();
  s.run_id = in.run_id();
  s.worker_token = in.worker_token();
  s.host_agent = in.host_agent();
  s.round = in.round();
  s.restarts = in.restarts();
  s.seq = in.seq();
  for (const auto& e : in.losses()) s.losses.emplace_back(e.agent(), e.epoch());
  for (const auto& e : in.arrivals()) s.arrivals.emplace_back(e.agent(), e.epoch());
  s.hosts.assign(in.hosts().begin(), in.hosts().end());
  const v1::MembershipState& pm = in.membership();
  MembershipState& m = s.membership;
  m.range.min_nodes = pm.min_nodes();
  m.range.max_nodes = pm.max_nodes();
  m.range.policy = static_cast<ElasticPolicy>(pm.policy());
  m.range.scale_up = static_cast<ScaleUp>(pm.scale_up());
  m.epoch = pm.epoch();
  m.node_of.assign(pm.node_of().begin(), pm.node_of().end());
  m.lost.assign(pm.lost().begin(), pm.lost().end());
  m.waiting.assign(pm.waiting().begin(), pm.waiting().end());
  m.seated.assign(pm.seated().begin(), pm.seated().end());
  m.lost_order.assign(pm.lost_order().begin(), pm.lost_order().end());
  for (const auto& e : in.job_keys()) s.job_keys[e.key()] = e.value();
  for (const auto& r : in.world_ranks()) s.world_ranks[r.agent()] = {r.rank_offset(), r.workers()};
  return s;
}

}  // namespace distrun
