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
#include "runtime/service/service_test_streams.h"

namespace distrun {
namespace {

using namespace std::chrono_literals;
using TimePoint = std::chrono::steady_clock::time_point;

using testing::Joined;
using testing::Stream;

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

  static std::shared_ptr<Joined> Join(CoordinationService& s, int node, int round, int port = 29500,
                                      bool replicates = false) {
    NodeJoin j;
    j.node_rank = node;
    j.num_nodes = 4;
    j.host = std::string("host-") + static_cast<char>('a' + node);
    j.local_workers = 2;
    j.run_id = "run1";
    j.restart_round = round;
    j.proposed_master_port = port;
    j.replicates = replicates;
    j.standby_address = j.host + ":" + std::to_string(40000 + node);
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
    EXPECT_EQ(last->assignment.standby_address, "host-b:40001");  // and where to turn
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

TEST_F(StandbyTest, TheAgentsThatAttachElectTheStandbyAndItTakesOverByItself) {
  auto node0 = Node0WithALostNode({2, 4, ElasticPolicy::kResize});
  auto standby = Standby(node0->Snapshot(), 1);
  EXPECT_TRUE(standby->Electing());
  Stream s1 = Attach(*standby, 1);                                          // its own agent
  EXPECT_EQ(Join(*standby, 1, 1)->status->code, StatusCode::kUnavailable);  // no epoch to join yet
  standby->Tick();
  EXPECT_TRUE(standby->Electing());  // node 2 may still come, within the heartbeat timeout
  EXPECT_EQ(standby->CurrentRound(), 1);
  Stream s2 = Attach(*standby, 2);
  standby->Tick();  // every member that can reach it did: at once
  EXPECT_FALSE(standby->Electing());
  EXPECT_EQ(standby->CurrentRound(), 2);
  ASSERT_TRUE(s2.Last(JobEvent::Kind::kRestart));
  EXPECT_NE(s2.Last(JobEvent::Kind::kRestart)->root_cause.description.find("took over with 2 node(s)"),
            std::string::npos);
  auto j1 = Join(*standby, 1, 2, 31000);
  auto j2 = Join(*standby, 2, 2);
  *now_ += 1s;  // the old coordinator's fence_wait (0 here) passed
  standby->Tick();
  ASSERT_TRUE(j2->status && j2->status->ok()) << (j2->status ? j2->status->message : "no answer");
  EXPECT_EQ(j2->assignment.num_nodes, 2);
  EXPECT_EQ(j2->assignment.master_port, 31000);
}

TEST_F(StandbyTest, AVoteLostBeforeTheDecisionCanLeaveNoMajorityAndTheAgentsThatCameHearTheEnd) {
  auto node0 = std::make_unique<CoordinationService>(Config(4, {1, 4, ElasticPolicy::kResize}));
  std::vector<Stream> streams;
  for (int n = 0; n < 4; ++n) streams.push_back(Attach(*node0, n));
  for (int n = 0; n < 4; ++n) Join(*node0, n, 0);
  auto standby = Standby(node0->Snapshot(), 1);
  Stream s1 = Attach(*standby, 1);
  Stream s2 = Attach(*standby, 2);
  standby->DetachAgent(s2.id);  // lost again: no vote, and not a loss of the job yet
  EXPECT_EQ(standby->State(), JobState::kRendezvous);
  Stream s3 = Attach(*standby, 3);
  standby->Tick();  // 2 of 4 at most, at once: the other side could hold the other two
  EXPECT_FALSE(standby->Electing());
  EXPECT_EQ(standby->State(), JobState::kStopped);
  ASSERT_TRUE(s3.Last(JobEvent::Kind::kStop));
  EXPECT_EQ(s3.Last(JobEvent::Kind::kStop)->root_cause.description,
            "node 0 (host-a), which hosted the job's coordinator, was lost, and its standby node 1 (host-b) "
            "cannot go on: only 2 of the last epoch's 4 nodes are left to reach the standby (a majority is "
            "3); lost: node 0 (host-a), node 2 (host-c)");
  EXPECT_EQ(s3.Last(JobEvent::Kind::kStop)->exit_code, kLostAgentExitCode);
  EXPECT_TRUE(s3.Last(JobEvent::Kind::kStop)->coordinator_lost);  // every node's log says why
}

TEST_F(StandbyTest, AServiceThatWasFrozenReadsWhatCameMeanwhileBeforeItJudgesSilence) {
  ServiceConfig c = Config(4, {2, 4, ElasticPolicy::kResize});
  c.freeze_grace = 300ms;
  CoordinationService s(c);
  std::vector<Stream> streams;
  for (int n = 0; n < 4; ++n) streams.push_back(Attach(s, n));
  for (int n = 0; n < 4; ++n) Join(s, n, 0);
  ASSERT_EQ(s.State(), JobState::kRunning);
  s.Tick();
  *now_ += 11s;  // no Tick for longer than the heartbeat timeout: this process was frozen
  s.Tick();
  EXPECT_EQ(s.CurrentRound(), 0);                                                    // nobody is judged yet
  for (int n = 0; n < 3; ++n) s.Heartbeat(streams[static_cast<size_t>(n)].id, 0ms);  // sent meanwhile
  *now_ += 301ms;
  s.Tick();
  EXPECT_EQ(s.CurrentRound(), 1);  // node 3 did stay silent
  EXPECT_EQ(s.History(),
            "2 epochs; 0 restart(s) after a worker failure; 1 node(s) lost: node 3 (host-d) in epoch 0");
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

// The updates a standby's stream received, in order.
std::vector<StandbyUpdate> UpdatesOf(const Stream& s) {
  std::vector<StandbyUpdate> out;
  for (const JobEvent& e : *s.events) {
    if (e.kind == JobEvent::Kind::kStandby) out.push_back(e.standby_update.value());
  }
  return out;
}

// A job of 4 nodes whose every node replicates; node 1 is the standby of epoch 0.
class WriteThroughTest : public StandbyTest {
 protected:
  void SetUp() override {
    node0_ = std::make_unique<CoordinationService>(Config(4, {2, 4, ElasticPolicy::kResize}));
    for (int n = 0; n < 4; ++n) streams_.push_back(Attach(*node0_, n));
    for (int n = 0; n < 4; ++n) Join(*node0_, n, 0, 29500, /*replicates=*/true);
    ASSERT_EQ(node0_->State(), JobState::kRunning);
  }
  // Feeds node `n`'s updates to a replica, as its distrun would, and acknowledges them.
  void Apply(int n, StandbyReplica& replica) {
    bool needs_snapshot = false;
    for (const StandbyUpdate& u : UpdatesOf(streams_[static_cast<size_t>(n)])) {
      needs_snapshot = replica.Apply(u) == StandbyReplica::Result::kNeedSnapshot || needs_snapshot;
    }
    streams_[static_cast<size_t>(n)].events->clear();
    node0_->StandbyApplied(streams_[static_cast<size_t>(n)].id, replica.applied(), needs_snapshot);
  }

  std::unique_ptr<CoordinationService> node0_;
  std::vector<Stream> streams_;
};

TEST_F(WriteThroughTest, Node0FencesItselfWhenWhatItNoLongerHearsCouldTakeTheJobOver) {
  StandbyReplica replica;
  Apply(1, replica);  // the standby holds epoch 0: 4 members
  // Node 3 and then the standby are lost: 2 of 4 may be elsewhere, no majority. Epoch 1 goes on.
  node0_->DetachAgent(streams_[3].id);
  EXPECT_EQ(node0_->CurrentRound(), 1);
  node0_->DetachAgent(streams_[1].id);
  EXPECT_NE(node0_->State(), JobState::kStopped);
  EXPECT_EQ(streams_[0].Last(JobEvent::Kind::kStop), nullptr);
  // A third of the standby's epoch: node 2 too. Nodes 1 to 3 could be the standby's majority.
  node0_->DetachAgent(streams_[2].id);
  EXPECT_EQ(node0_->State(), JobState::kStopped);
  EXPECT_EQ(node0_->ExitCode(), kFencedExitCode);
  const JobEvent* own = streams_[0].Last(JobEvent::Kind::kStop);
  ASSERT_TRUE(own);
  EXPECT_EQ(own->exit_code, kFencedExitCode);
  EXPECT_EQ(
      own->root_cause.description,
      "fenced: this node hosts the job's coordinator but no longer hears node 1 (host-b), node 2 (host-c), "
      "node 3 (host-d): 3 of the 4 nodes of epoch 0, its standby among them, may go on without it, so "
      "it stops rather than run beside them");
}

TEST_F(WriteThroughTest, Node0OnABadLinkStepsDownWhenThoseWhoHardlyHearItMakeTheStandbysMajority) {
  StandbyReplica replica;
  Apply(1, replica);
  // Nodes 2 and 3 have heard nothing from node 0 for 6 of the 10 s: its link, not theirs, is bad.
  node0_->Heartbeat(streams_[2].id, 6s);
  node0_->Heartbeat(streams_[3].id, 6s);
  EXPECT_NE(node0_->State(), JobState::kStopped);  // nobody lost yet
  node0_->DetachAgent(streams_[1].id);             // the standby goes silent
  EXPECT_EQ(node0_->ExitCode(), kFencedExitCode);
  EXPECT_EQ(
      streams_[0].Last(JobEvent::Kind::kStop)->root_cause.description,
      "fenced: this node hosts the job's coordinator but no longer hears node 1 (host-b), and node 2 "
      "(host-c), node 3 (host-d) hardly hear it: 3 of the 4 nodes of epoch 0, its standby among them, may "
      "go on without it, so it stops rather than run beside them");
}

TEST_F(WriteThroughTest, Node0OnALossyLinkStepsDownWhenLinksThatRetransmitMakeTheStandbysMajority) {
  StandbyReplica replica;
  Apply(1, replica);
  // Nodes 2 and 3 still hear node 0, but their heartbeats came only after retransmissions, again and again:
  // node 0's link drops packets. Once would be a busy network.
  for (int n : {2, 3}) node0_->Heartbeat(streams_[static_cast<size_t>(n)].id, 1s, 1);
  *now_ += 2s;
  node0_->Heartbeat(streams_[2].id, 1s, 3);
  node0_->Heartbeat(streams_[3].id, 1s, 1);
  EXPECT_NE(node0_->State(), JobState::kStopped);  // nobody lost yet
  node0_->DetachAgent(streams_[1].id);             // then the standby goes silent
  EXPECT_EQ(node0_->ExitCode(), kFencedExitCode);
  EXPECT_EQ(streams_[0].Last(JobEvent::Kind::kStop)->root_cause.description,
            "fenced: this node hosts the job's coordinator but no longer hears node 1 (host-b), and node 2 "
            "(host-c), node 3 (host-d) reach it only after retransmissions: 3 of the 4 nodes of epoch 0, its "
            "standby among them, may go on without it, so it stops rather than run beside them");
}

TEST_F(WriteThroughTest, Node0StepsDownWhenTheStandbyIsLostAndTheOthersAreLate) {
  StandbyReplica replica;
  Apply(1, replica);
  *now_ += 4s;
  node0_->Heartbeat(streams_[1].id);
  node0_->Heartbeat(streams_[3].id);
  *now_ += 1s;  // node 2: nothing for 5 of the 10 s; node 3 for 1 s
  node0_->DetachAgent(streams_[1].id);
  EXPECT_FALSE(node0_->ExitCode());  // 2 of 4 away: no majority
  EXPECT_EQ(node0_->CurrentRound(), 1);

  *now_ += 4s;  // node 3 too, now
  node0_->Heartbeat(streams_[2].id);
  node0_->DetachAgent(streams_[2].id);
  EXPECT_EQ(node0_->ExitCode(), kFencedExitCode);
  EXPECT_EQ(
      streams_[0].Last(JobEvent::Kind::kStop)->root_cause.description,
      "fenced: this node hosts the job's coordinator but no longer hears node 1 (host-b), node 2 (host-c), "
      "and "
      "node 3 (host-d) sent nothing for half the heartbeat timeout: 3 of the 4 nodes of epoch 0, its standby "
      "among them, may go on without it, so it stops rather than run beside them");
}

TEST_F(WriteThroughTest, RetransmissionsOnceOrLongAgoAreNotABadLink) {
  StandbyReplica replica;
  Apply(1, replica);
  node0_->Heartbeat(streams_[2].id, 1s, 1);  // once: a busy network
  node0_->Heartbeat(streams_[3].id, 1s, 1);
  *now_ += 11s;  // twice, but further apart than the heartbeat timeout
  node0_->Heartbeat(streams_[3].id, 1s, 1);
  node0_->Heartbeat(streams_[2].id, 1s);
  node0_->DetachAgent(streams_[1].id);
  EXPECT_FALSE(node0_->ExitCode());  // 1 of 4 away: the job goes on without the standby
  EXPECT_EQ(node0_->CurrentRound(), 1);
  // A bad link is judged by the heartbeat timeout before the loss: an old one no longer counts.
  node0_->Heartbeat(streams_[2].id, 1s, 2);
  *now_ += 11s;
  node0_->Heartbeat(streams_[2].id, 1s);
  node0_->Heartbeat(streams_[3].id, 1s);
  node0_->DetachAgent(streams_[3].id);
  EXPECT_FALSE(node0_->ExitCode());
}

TEST_F(WriteThroughTest, ANodeOnABadLinkOfItsOwnLeavesNode0InPlace) {
  StandbyReplica replica;
  Apply(1, replica);
  node0_->Heartbeat(streams_[1].id, 6s);  // the standby hardly hears node 0: its own link
  node0_->Heartbeat(streams_[2].id, 1s);
  node0_->DetachAgent(streams_[1].id);
  EXPECT_FALSE(node0_->ExitCode());  // 1 of 4 away: the job goes on without the standby
  EXPECT_EQ(node0_->CurrentRound(), 1);
}

TEST_F(WriteThroughTest, WhileItHearsTheStandbyNode0GoesOnWhateverElseItLoses) {
  StandbyReplica replica;
  Apply(1, replica);
  node0_->DetachAgent(streams_[3].id);
  Apply(1, replica);  // the standby holds epoch 1: nodes 0 to 2
  node0_->DetachAgent(streams_[2].id);
  EXPECT_NE(node0_->State(), JobState::kStopped);  // 1 of 3 unheard, the standby here
  EXPECT_FALSE(node0_->ExitCode());
  EXPECT_EQ(streams_[0].Last(JobEvent::Kind::kStop), nullptr);
}

TEST_F(WriteThroughTest, AJobKeysWriteIsHeldUntilTheStandbyHasIt) {
  // The standby got the job when the epoch began; no one else gets updates.
  std::vector<StandbyUpdate> first = UpdatesOf(streams_[1]);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].seq, 1u);
  ASSERT_TRUE(first[0].snapshot);
  EXPECT_EQ(*first[0].snapshot, node0_->Snapshot());
  for (int n : {0, 2, 3}) EXPECT_TRUE(UpdatesOf(streams_[static_cast<size_t>(n)]).empty());
  StandbyReplica replica;
  Apply(1, replica);

  int held = 0;
  ASSERT_TRUE(node0_->KvSet("job/step", "100", [&](const Status& s) { held += s.ok(); }).ok());
  EXPECT_EQ(held, 0);  // written on node 0, not yet where a takeover finds it
  std::optional<std::string> v;
  ASSERT_TRUE(node0_->KvTryGet("job/step", &v).ok());
  EXPECT_EQ(v, "100");  // readers see it at once
  // An epoch's key is not written through: its epoch ends with node 0 anyway.
  int epoch_key = 0;
  ASSERT_TRUE(node0_->KvSet("nccl-id", "x", [&](const Status&) { ++epoch_key; }).ok());
  EXPECT_EQ(epoch_key, 1);
  int64_t counter = 0;
  ASSERT_TRUE(node0_->KvAdd("job/count", 5, &counter, [&](const Status&) { ++held; }).ok());
  CasResult cas;
  ASSERT_TRUE(
      node0_->KvCompareAndSet("job/step", std::string("99"), "101", &cas, [&](const Status&) { ++epoch_key; })
          .ok());
  EXPECT_FALSE(cas.swapped);
  EXPECT_EQ(epoch_key, 2);  // nothing written: nothing held
  bool deleted = false;
  ASSERT_TRUE(node0_->KvDelete("job/count", &deleted, [&](const Status&) { ++held; }).ok());
  EXPECT_EQ(held, 0);
  std::vector<StandbyUpdate> updates = UpdatesOf(streams_[1]);
  ASSERT_EQ(updates.size(), 3u);
  EXPECT_EQ(updates[0], (StandbyUpdate{2, std::nullopt, "job/step", "100"}));
  EXPECT_EQ(updates[1], (StandbyUpdate{3, std::nullopt, "job/count", "5"}));
  EXPECT_EQ(updates[2], (StandbyUpdate{4, std::nullopt, "job/count", std::nullopt}));
  // An acknowledgement from another node changes nothing; the standby's releases what it covers.
  node0_->StandbyApplied(streams_[2].id, 4);
  EXPECT_EQ(held, 0);
  node0_->StandbyApplied(streams_[1].id, 2);
  EXPECT_EQ(held, 1);
  Apply(1, replica);
  EXPECT_EQ(held, 3);
  // The standby's copy is the job as node 0 has it.
  ASSERT_TRUE(replica.copy());
  EXPECT_EQ(*replica.copy(), node0_->Snapshot());
}

TEST_F(WriteThroughTest, AGapAsksForASnapshotAndALostStandbyReleasesTheWrites) {
  StandbyReplica replica;
  Apply(1, replica);
  ASSERT_TRUE(node0_->KvSet("job/a", "1").ok());
  ASSERT_TRUE(node0_->KvSet("job/b", "2").ok());
  // The first update is lost on the way (as a reconnection might lose it): the second is a gap.
  streams_[1].events->erase(streams_[1].events->begin());
  Apply(1, replica);
  std::vector<StandbyUpdate> resent = UpdatesOf(streams_[1]);
  ASSERT_EQ(resent.size(), 1u);
  ASSERT_TRUE(resent[0].snapshot);
  Apply(1, replica);
  EXPECT_EQ(replica.copy()->job_keys, (std::map<std::string, std::string>{{"job/a", "1"}, {"job/b", "2"}}));

  int held = 0;
  ASSERT_TRUE(node0_->KvSet("job/c", "3", [&](const Status& s) { held += s.ok(); }).ok());
  EXPECT_EQ(held, 0);
  // The standby is lost: the write is released (node 0 alone holds it, as without a standby), and the
  // next epoch's standby, node 2, gets the whole job.
  node0_->DetachAgent(streams_[1].id);
  EXPECT_EQ(held, 1);
  ASSERT_EQ(node0_->CurrentRound(), 1);
  EXPECT_TRUE(UpdatesOf(streams_[2]).empty());
  for (int n : {0, 2, 3}) Join(*node0_, n, 1, 29500, true);
  ASSERT_EQ(node0_->State(), JobState::kRunning);
  std::vector<StandbyUpdate> to_new = UpdatesOf(streams_[2]);
  ASSERT_FALSE(to_new.empty());
  ASSERT_TRUE(to_new.back().snapshot);
  EXPECT_EQ(to_new.back().snapshot->job_keys.at("job/c"), "3");
  StandbyReplica second;
  Apply(2, second);
  EXPECT_EQ(*second.copy(), node0_->Snapshot());
}

TEST_F(WriteThroughTest, AServiceRebuiltFromTheCopyNumbersItsUpdatesAfterIt) {
  StandbyReplica replica;
  Apply(1, replica);
  ASSERT_TRUE(node0_->KvSet("job/a", "1").ok());
  Apply(1, replica);
  const uint64_t last = replica.applied();
  ASSERT_EQ(replica.copy()->seq, last);
  // Node 1 takes over; node 2, the next standby, had been a standby before (its replica is not empty).
  ServiceConfig c = Config(4, {2, 4, ElasticPolicy::kResize});
  c.host_agent = 1;
  c.resume = *replica.copy();
  CoordinationService taken(c);
  TakeoverDecision d;
  d.verdict = TakeoverDecision::Verdict::kTakeOver;
  d.world = {1, 2, 3};
  d.fenced = {0};
  ASSERT_TRUE(taken.TakeOver(d).ok());
  std::vector<Stream> streams;
  for (int n = 1; n < 4; ++n) streams.push_back(Attach(taken, n));
  for (int n = 1; n < 4; ++n) Join(taken, n, 1, 29500, true);
  ASSERT_EQ(taken.State(), JobState::kRunning);
  std::vector<StandbyUpdate> updates = UpdatesOf(streams[1]);  // node 2's
  ASSERT_FALSE(updates.empty());
  EXPECT_GT(updates.front().seq, last);
  EXPECT_EQ(replica.Apply(updates.back()),
            StandbyReplica::Result::kApplied);  // even a replica that had it all
}

TEST_F(StandbyTest, TheJobsKeysStaySmallEnoughToReachTheStandbyInOneMessage) {
  ServiceConfig c = Config(2, {1, 2, ElasticPolicy::kResize});
  c.max_job_key_bytes = 100;
  CoordinationService s(c);
  ASSERT_TRUE(s.KvSet("job/a", std::string(40, 'x')).ok());  // 45 bytes
  ASSERT_TRUE(s.KvSet("job/b", std::string(40, 'x')).ok());  // 90
  Status full = s.KvSet("job/c", std::string(40, 'x'));
  EXPECT_EQ(full.code, StatusCode::kResourceExhausted);
  EXPECT_NE(full.message.find("the job's keys (job/...) are full (100 bytes together)"), std::string::npos)
      << full.message;
  ASSERT_TRUE(s.KvSet("epoch-key", std::string(400, 'x')).ok());  // the epoch's keys do not count
  ASSERT_TRUE(s.KvSet("job/a", std::string(45, 'x')).ok());       // a key replaced counts once: 95
  bool deleted = false;
  ASSERT_TRUE(s.KvDelete("job/b", &deleted).ok());
  ASSERT_TRUE(s.KvSet("job/c", std::string(40, 'x')).ok());
  // A copy holds what a service counts again (a takeover's service refuses the same writes).
  EXPECT_EQ(s.Snapshot().job_keys.size(), 2u);
}

TEST_F(StandbyTest, ANodeThatDoesNotReplicateIsNeverWaitedFor) {
  auto node0 = std::make_unique<CoordinationService>(Config(2, {1, 2, ElasticPolicy::kResize}));
  Stream s0 = Attach(*node0, 0);
  Stream s1 = Attach(*node0, 1);
  Join(*node0, 0, 0);
  Join(*node0, 1, 0);
  int held = 0;
  ASSERT_TRUE(node0->KvSet("job/x", "1", [&](const Status&) { ++held; }).ok());
  EXPECT_EQ(held, 1);
  EXPECT_TRUE(UpdatesOf(s1).empty());
}

TEST(StandbyReplica, AppliesUpdatesInOrderOnly) {
  StandbyReplica r;
  EXPECT_EQ(r.Apply({1, std::nullopt, "job/a", "1"}), StandbyReplica::Result::kNeedSnapshot);
  ServiceSnapshot s;
  s.job_keys["job/old"] = "x";
  EXPECT_EQ(r.Apply({2, s, {}, {}}), StandbyReplica::Result::kApplied);
  EXPECT_EQ(r.Apply({2, std::nullopt, "job/a", "1"}), StandbyReplica::Result::kStale);
  EXPECT_EQ(r.Apply({4, std::nullopt, "job/a", "1"}), StandbyReplica::Result::kNeedSnapshot);
  EXPECT_EQ(r.applied(), 2u);
  EXPECT_EQ(r.Apply({3, std::nullopt, "job/a", "1"}), StandbyReplica::Result::kApplied);
  EXPECT_EQ(r.Apply({4, std::nullopt, "job/old", std::nullopt}), StandbyReplica::Result::kApplied);
  EXPECT_EQ(r.copy()->job_keys, (std::map<std::string, std::string>{{"job/a", "1"}}));
  // A later snapshot replaces everything, whatever came between.
  s.job_keys = {{"job/z", "26"}};
  EXPECT_EQ(r.Apply({9, s, {}, {}}), StandbyReplica::Result::kApplied);
  EXPECT_EQ(r.copy()->job_keys, s.job_keys);
  EXPECT_EQ(r.applied(), 9u);
}

}  // namespace
}  // namespace distrun
