// The standby's side of CoordinationService (DESIGN §4.5): the snapshot node 0 writes through, a service
// rebuilt from it, and the takeover that begins the next epoch without the old coordinator, decided by
// runtime/service/takeover.h's rules. In process, with a fake clock.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/service/service.h"

namespace distrun {
namespace {

using namespace std::chrono_literals;
using TimePoint = std::chrono::steady_clock::time_point;

struct Joined {
  std::optional<Status> status;
  NodeAssignment assignment;
};

struct Stream {
  uint64_t id = 0;
  std::shared_ptr<std::vector<JobEvent>> events = std::make_shared<std::vector<JobEvent>>();
};

class StandbyTest : public ::testing::Test {
 protected:
  ServiceConfig Config(int nodes, ElasticRange range) {
    ServiceConfig c;
    c.num_nodes = nodes;
    c.elastic = range;
    c.run_id = "run1";
    c.worker_token = "worker-token-1";
    c.initialization_timeout = 60s;
    c.heartbeat_timeout = 10s;
    c.clock = [now = now_] { return *now; };
    return c;
  }

  static std::shared_ptr<Joined> Join(CoordinationService& s, int node, int round, int port = 29500) {
    NodeJoin j;
    j.node_rank = node;
    j.num_nodes = 4;
    j.host = std::string("host-") + static_cast<char>('a' + node);
    j.local_workers = 2;
    j.run_id = "run1";
    j.restart_round = round;
    j.proposed_master_port = port;
    auto r = std::make_shared<Joined>();
    s.Join(j, [r](const Status& st, const NodeAssignment& a) {
      r->status = st;
      r->assignment = a;
    });
    return r;
  }

  static Stream Attach(CoordinationService& s, int node) {
    Stream out;
    Status st = s.AttachAgent(
        node, [ev = out.events](const JobEvent& e) { ev->push_back(e); }, &out.id);
    EXPECT_TRUE(st.ok()) << st.message;
    return out;
  }

  // Node 0's service for 4 nodes: epoch 0 runs, node 3's stream breaks (epoch 1 forms without it).
  std::unique_ptr<CoordinationService> Node0WithALostNode(ElasticRange range) {
    auto s = std::make_unique<CoordinationService>(Config(4, range));
    std::vector<Stream> streams;
    for (int n = 0; n < 4; ++n) streams.push_back(Attach(*s, n));
    for (int n = 0; n < 4; ++n) Join(*s, n, 0);
    EXPECT_EQ(s->State(), JobState::kRunning);
    EXPECT_TRUE(s->KvSet("job/step", "1200").ok());
    EXPECT_TRUE(s->KvSet("nccl-id", "epoch 0's").ok());
    s->DetachAgent(streams[3].id);
    EXPECT_EQ(s->CurrentRound(), 1);
    std::shared_ptr<Joined> last;
    for (int n = 0; n < 3; ++n) last = Join(*s, n, 1);
    EXPECT_EQ(s->State(), JobState::kRunning);
    EXPECT_EQ(last->assignment.standby_agent, 1);  // every node learns the standby with its seat
    return s;
  }

  // The standby on `standby`'s service, rebuilt from `snapshot`.
  std::unique_ptr<CoordinationService> Standby(const ServiceSnapshot& snapshot, int standby) {
    ServiceConfig c = Config(4, snapshot.membership.range);  // the job every test starts
    c.worker_token.clear();                                  // the standby learns it from the snapshot
    c.host_agent = standby;
    c.resume = snapshot;
    return std::make_unique<CoordinationService>(c);
  }

  // What takeover.h decides when `reached` turned to the standby (the old coordinator is node 0).
  static TakeoverDecision Decide(const ServiceSnapshot& snapshot, int standby,
                                 const std::vector<int>& reached) {
    const Membership m = Membership::FromState(snapshot.membership);
    TakeoverConfig tc;
    tc.members = m.seated_nodes();
    tc.spares = m.unseated_nodes();
    tc.lost_coordinator = 0;
    tc.standby = standby;
    tc.min_nodes = m.range().min_nodes;
    tc.policy = m.range().policy;
    tc.window = 10s;
    Takeover t(tc, TimePoint{});
    for (int n : reached) t.Reached(n);
    return t.Decide(TimePoint{} + 11s);
  }

  std::shared_ptr<TimePoint> now_ = std::make_shared<TimePoint>(TimePoint{} + 1000s);
};

TEST_F(StandbyTest, TheSnapshotHoldsTheJobAndOnlyTheJobsKeys) {
  auto node0 = Node0WithALostNode({2, 4, ElasticPolicy::kResize});
  const ServiceSnapshot s = node0->Snapshot();
  EXPECT_EQ(s.num_nodes, 4);
  EXPECT_EQ(s.run_id, "run1");
  EXPECT_EQ(s.worker_token, "worker-token-1");
  EXPECT_EQ(s.host_agent, 0);
  EXPECT_EQ(s.round, 1);
  EXPECT_EQ(s.losses, (std::vector<std::pair<int, int>>{{3, 0}}));
  EXPECT_EQ(s.hosts, (std::vector<std::string>{"host-a", "host-b", "host-c", "host-d"}));
  EXPECT_EQ(s.membership.seated, (std::vector<int>{0, 1, 2}));
  // The epoch's keys end with it anyway (a takeover begins a new one); the job's keys do not.
  EXPECT_EQ(s.job_keys, (std::map<std::string, std::string>{{"job/step", "1200"}}));
}

TEST_F(StandbyTest, TheStandbyTakesOverWithAMajorityAndFencesTheOldCoordinator) {
  auto node0 = Node0WithALostNode({2, 4, ElasticPolicy::kResize});
  const ServiceSnapshot snapshot = node0->Snapshot();
  const TakeoverDecision d = Decide(snapshot, 1, {2});
  ASSERT_EQ(d.verdict, TakeoverDecision::Verdict::kTakeOver) << d.why;
  EXPECT_EQ(d.world, (std::vector<int>{1, 2}));

  auto standby = Standby(snapshot, 1);
  EXPECT_EQ(standby->CurrentRound(), 1);
  ASSERT_TRUE(standby->TakeOver(d).ok());
  EXPECT_EQ(standby->CurrentRound(), 2);
  EXPECT_EQ(standby->State(), JobState::kRendezvous);
  // The survivors turn to it and form epoch 2; its host proposes the ports now.
  Stream s1 = Attach(*standby, 1);
  Stream s2 = Attach(*standby, 2);
  auto j1 = Join(*standby, 1, 2, 31000);
  auto j2 = Join(*standby, 2, 2, 29500);
  ASSERT_TRUE(j2->status && j2->status->ok()) << (j2->status ? j2->status->message : "no answer");
  EXPECT_EQ(j1->assignment.node_rank, 0);
  EXPECT_EQ(j2->assignment.node_rank, 1);
  EXPECT_EQ(j2->assignment.num_nodes, 2);
  EXPECT_EQ(j2->assignment.num_processes, 4);
  EXPECT_EQ(j2->assignment.master_port, 31000);
  EXPECT_EQ(j2->assignment.restart_round, 2);
  EXPECT_EQ(j2->assignment.worker_token, "worker-token-1");
  EXPECT_EQ(j2->assignment.standby_agent, 2);  // a new standby among the survivors
  // The job's keys are there; the last epoch's are not.
  std::optional<std::string> v;
  ASSERT_TRUE(standby->KvTryGet("job/step", &v).ok());
  EXPECT_EQ(v, "1200");
  ASSERT_TRUE(standby->KvTryGet("nccl-id", &v).ok());
  EXPECT_FALSE(v);
  // The old coordinator, should it come back (or was only cut off), is fenced.
  Stream s0 = Attach(*standby, 0);
  ASSERT_FALSE(s0.events->empty());
  EXPECT_EQ(s0.events->back().kind, JobEvent::Kind::kStop);
  EXPECT_EQ(s0.events->back().exit_code, kFencedExitCode);
  EXPECT_EQ(Join(*standby, 0, 2)->status->code, StatusCode::kAborted);
  EXPECT_EQ(standby->History(),
            "3 epochs; 0 restart(s) after a worker failure; 2 node(s) lost: node 3 (host-d) in epoch 0, "
            "node 0 (host-a) in epoch 1");
  // Losing the new host ends the job as losing node 0 did.
  standby->DetachAgent(s1.id);
  EXPECT_EQ(standby->State(), JobState::kStopped);
  ASSERT_TRUE(standby->RootCause());
  EXPECT_NE(standby->RootCause()->description.find("node 1 hosts the job's coordinator"), std::string::npos)
      << standby->RootCause()->description;
}

TEST_F(StandbyTest, UnderSparesASpareTakesTheOldCoordinatorsSeat) {
  auto node0 = std::make_unique<CoordinationService>(Config(4, {3, 4, ElasticPolicy::kSpares}));
  std::vector<Stream> streams;
  for (int n = 0; n < 4; ++n) streams.push_back(Attach(*node0, n));
  for (int n = 0; n < 4; ++n) Join(*node0, n, 0);
  const ServiceSnapshot snapshot = node0->Snapshot();
  EXPECT_EQ(snapshot.membership.seated, (std::vector<int>{0, 1, 2}));
  const TakeoverDecision d = Decide(snapshot, 2, {1, 3});
  ASSERT_EQ(d.verdict, TakeoverDecision::Verdict::kTakeOver) << d.why;
  auto standby = Standby(snapshot, 2);
  ASSERT_TRUE(standby->TakeOver(d).ok());
  std::vector<std::shared_ptr<Joined>> joined;
  for (int n = 1; n < 4; ++n) Attach(*standby, n);
  for (int n = 1; n < 4; ++n) joined.push_back(Join(*standby, n, 1));
  ASSERT_TRUE(joined.back()->status && joined.back()->status->ok());
  // Node 3, the spare, holds seat 0; the others keep theirs.
  EXPECT_EQ(joined[2]->assignment.node_rank, 0);
  EXPECT_EQ(joined[0]->assignment.node_rank, 1);
  EXPECT_EQ(joined[1]->assignment.node_rank, 2);
  EXPECT_EQ(joined[0]->assignment.num_nodes, 3);
}

TEST_F(StandbyTest, TooFewLeftEndsTheJobNamingTheLostNodes) {
  auto node0 = Node0WithALostNode({3, 4, ElasticPolicy::kResize});
  const ServiceSnapshot snapshot = node0->Snapshot();
  // takeover.h would not take over here; the service refuses to go on below MIN all the same.
  TakeoverDecision d;
  d.verdict = TakeoverDecision::Verdict::kTakeOver;
  d.world = {1};
  d.fenced = {0, 2};
  auto standby = Standby(snapshot, 1);
  Stream s1 = Attach(*standby, 1);
  const Status st = standby->TakeOver(d);
  EXPECT_EQ(st.code, StatusCode::kAborted);
  EXPECT_EQ(standby->State(), JobState::kStopped);
  const std::string why = standby->RootCause()->description;
  EXPECT_NE(why.find("fewer than the 3 the job needs (--nnodes); lost: node 3 (host-d), node 0 (host-a), "
                     "node 2 (host-c)"),
            std::string::npos)
      << why;
  EXPECT_EQ(s1.events->back().kind, JobEvent::Kind::kStop);
}

TEST_F(StandbyTest, ACopyOfAnotherJobOrASecondTakeoverIsRefused) {
  auto node0 = Node0WithALostNode({2, 4, ElasticPolicy::kResize});
  ServiceSnapshot snapshot = node0->Snapshot();
  const TakeoverDecision d = Decide(snapshot, 1, {2});
  // Not a standby's service.
  EXPECT_EQ(node0->TakeOver(d).code, StatusCode::kFailedPrecondition);
  auto standby = Standby(snapshot, 1);
  TakeoverDecision self = d;
  self.fenced = {0, 1};
  EXPECT_EQ(standby->TakeOver(self).code, StatusCode::kInvalidArgument);
  TakeoverDecision ended = d;
  ended.verdict = TakeoverDecision::Verdict::kEnd;
  EXPECT_EQ(standby->TakeOver(ended).code, StatusCode::kInvalidArgument);
  ASSERT_TRUE(standby->TakeOver(d).ok());
  EXPECT_EQ(standby->TakeOver(d).code, StatusCode::kFailedPrecondition);

  ServiceSnapshot other = snapshot;
  other.run_id = "run2";
  EXPECT_THROW(Standby(other, 1), std::invalid_argument);
  other = snapshot;
  other.num_nodes = 3;
  EXPECT_THROW(Standby(other, 1), std::invalid_argument);
  other = snapshot;
  other.job_keys["nccl-id"] = "x";
  EXPECT_THROW(Standby(other, 1), std::invalid_argument);
  other = snapshot;
  other.round = 5;
  EXPECT_THROW(Standby(other, 1), std::invalid_argument);
  other = snapshot;
  other.hosts.pop_back();
  EXPECT_THROW(Standby(other, 1), std::invalid_argument);
  ServiceConfig rigid = Config(4, {2, 4, ElasticPolicy::kResize});
  rigid.elastic.reset();
  rigid.resume = snapshot;
  EXPECT_THROW(CoordinationService{rigid}, std::invalid_argument);
}

}  // namespace
}  // namespace distrun
