#pragma once
// Conversions between runtime/service/types.h values and their wire form (runtime/distrun.proto), shared by
// the server and client transports only.

#include <grpcpp/support/status.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

#include "runtime/distrun.pb.h"
#include "runtime/service/service_snapshot.h"
#include "runtime/service/types.h"

namespace distrun {

// The metadata header that carries the job token on every call.
inline constexpr char kTokenHeader[] = "x-distrun-token";
// The epoch a worker's call belongs to (DISTRUN_EPOCH), where it knows one: calls of an earlier epoch are
// refused (fenced), so that a worker the job went on without cannot change the new epoch's store.
inline constexpr char kEpochHeader[] = "x-distrun-epoch";

// AgentHeartbeat.unanswered_ms and round_trip_us (capped: an agent that heard nothing for 49 days says so).
inline void SetLinkNews(const LinkNews& news, v1::AgentHeartbeat* out) {
  out->set_unanswered_ms(static_cast<uint32_t>(std::clamp<int64_t>(news.unanswered.count(), 0, UINT32_MAX)));
  out->set_round_trip_us(static_cast<uint32_t>(std::clamp<int64_t>(news.round_trip.count(), 0, UINT32_MAX)));
}

grpc::Status ToGrpc(const Status& status);
Status FromGrpc(const grpc::Status& status);

// A status as the agent channel carries it (CallStatus: a gRPC code and message).
void ToProto(const Status& in, v1::CallStatus* out);
Status FromProto(const v1::CallStatus& in);

void ToProto(const NodeJoin& in, v1::JoinRequest* out);
NodeJoin FromProto(const v1::JoinRequest& in);
void ToProto(const NodeAssignment& in, v1::Assignment* out);
NodeAssignment FromProto(const v1::Assignment& in);
void ToProto(const FailedWorker& in, v1::FailedWorker* out);
FailedWorker FromProto(const v1::FailedWorker& in);
void ToProto(const JobEvent& in, v1::JobEvent* out);
JobEvent FromProto(const v1::JobEvent& in);
void ToProto(const NodeProgress& in, v1::NodeProgress* out);
NodeProgress FromProto(const v1::NodeProgress& in);
void ToProto(const RankProgress& in, v1::RankProgress* out);
RankProgress FromProto(const v1::RankProgress& in);
void ToProto(const StacksReply& in, v1::StacksReply* out);
StacksReply FromProto(const v1::StacksReply& in);
void ToProto(const JobStatusView& in, v1::JobStatus* out);
JobStatusView FromProto(const v1::JobStatus& in);
void ToProto(const ServiceSnapshot& in, v1::ServiceSnapshot* out);
// Values out of their range (an unknown policy) come back as they are: Membership::FromState and the
// service's restore refuse what cannot be.
ServiceSnapshot FromProto(const v1::ServiceSnapshot& in);

}  // namespace distrun
