// The wire form of what a standby holds (runtime/distrun.proto, ServiceSnapshot): every field comes back.
#include "runtime/transport/proto_convert.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace distrun {
namespace {

TEST(ProtoConvert, AServiceSnapshotComesBackWhole) {
  ServiceSnapshot s;
  s.num_nodes = 3;
  s.run_id = "run1";
  s.worker_token = "t0ken";
  s.host_agent = 0;
  s.round = 2;
  s.restarts = 1;
  s.seq = 123456789012;
  s.losses = {{2, 0}};
  s.arrivals = {{3, 1}};
  s.hosts = {"host-a", "host-b", "", "host-d"};
  s.membership.range = {2, 4, ElasticPolicy::kSpares, ScaleUp::kNow};
  s.membership.epoch = 2;
  s.membership.node_of = {0, 1, 2, 3};
  s.membership.lost = {false, false, true, false};
  s.membership.waiting = {false, false, false, false};
  s.membership.seated = {0, 1};
  s.membership.lost_order = {2};
  s.job_keys = {{"job/step", "1200"}, {"job/bytes", std::string("\0\xff", 2)}};
  v1::ServiceSnapshot wire;
  ToProto(s, &wire);
  v1::ServiceSnapshot parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire.SerializeAsString()));
  EXPECT_EQ(FromProto(parsed), s);
  // Each policy and scale-up keeps its meaning on the wire.
  for (ScaleUp up : {ScaleUp::kNever, ScaleUp::kNextRestart, ScaleUp::kNow}) {
    s.membership.range.scale_up = up;
    s.membership.range.policy = ElasticPolicy::kResize;
    ToProto(s, &wire);
    EXPECT_EQ(FromProto(wire).membership.range.scale_up, up);
    EXPECT_EQ(FromProto(wire).membership.range.policy, ElasticPolicy::kResize);
  }
}

TEST(ProtoConvert, AnAssignmentSaysWhetherItHasAStandby) {
  NodeAssignment a;
  v1::Assignment wire;
  ToProto(a, &wire);
  EXPECT_FALSE(FromProto(wire).standby_agent);
  a.standby_agent = 0;  // agent 0 is a standby like any other, after a takeover
  a.standby_address = "[fd00::2]:40123";
  ToProto(a, &wire);
  EXPECT_EQ(FromProto(wire).standby_agent, 0);
  EXPECT_EQ(FromProto(wire).standby_address, "[fd00::2]:40123");
}

TEST(ProtoConvert, AStandbyUpdateAndAReplicatingJoinComeBackWhole) {
  JobEvent e;
  e.kind = JobEvent::Kind::kStandby;
  e.standby_update = StandbyUpdate{7, std::nullopt, "job/gone", std::nullopt};
  v1::JobEvent wire;
  ToProto(e, &wire);
  EXPECT_EQ(FromProto(wire).standby_update, e.standby_update);
  e.standby_update = StandbyUpdate{8, std::nullopt, "job/empty", ""};  // an empty value is not a delete
  wire.Clear();
  ToProto(e, &wire);
  EXPECT_EQ(FromProto(wire).standby_update, e.standby_update);
  ServiceSnapshot s;
  s.run_id = "r";
  s.job_keys["job/k"] = "v";
  e.standby_update = StandbyUpdate{9, s, {}, {}};
  wire.Clear();
  ToProto(e, &wire);
  EXPECT_EQ(FromProto(wire).kind, JobEvent::Kind::kStandby);
  EXPECT_EQ(FromProto(wire).standby_update, e.standby_update);

  NodeJoin j;
  j.replicates = true;
  j.standby_address = "host-b:40123";
  v1::JoinRequest join;
  ToProto(j, &join);
  EXPECT_TRUE(FromProto(join).replicates);
  EXPECT_EQ(FromProto(join).standby_address, "host-b:40123");
}

// A status code is any int32 on the wire; one gRPC does not have is transport trouble, as an unknown one is
// (found by tests/fuzz/agent_channel_fuzz.cc: the cast to grpc::StatusCode was undefined).
TEST(ProtoConvert, AStatusCodeGrpcDoesNotHaveReadsAsUnavailable) {
  v1::CallStatus status;
  status.set_code(5);
  status.set_message("gone");
  EXPECT_EQ(FromProto(status).code, StatusCode::kNotFound);
  for (int32_t code : {80, -1, 17, INT32_MAX, INT32_MIN}) {
    status.set_code(code);
    EXPECT_EQ(FromProto(status).code, StatusCode::kUnavailable) << code;
    EXPECT_EQ(FromProto(status).message, "gone");
    v1::JobEvent event;
    event.mutable_joined()->set_code(code);
    EXPECT_EQ(FromProto(event).join_status.code, StatusCode::kUnavailable) << code;
  }
}

}  // namespace
}  // namespace distrun
