// CoordinationService with elastic membership (ServiceConfig::elastic): epochs after a lost node, spares,
// fencing, and the end below the minimum.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
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

// Worker `process` on node `node` exited with `code`.
FailedWorker Failure(int node, int process, int code) {
  FailedWorker f;
  f.node_rank = node;
  f.process_id = process;
  f.exit_code = code;
  return f;
}

class ElasticServiceTest : public ::testing::Test {
 protected:
  void Make(int nodes, ElasticRange range, int max_restarts = 0, std::chrono::milliseconds hold = 0ms,
            std::chrono::milliseconds notice = 0ms, bool per_task = false,
            std::chrono::milliseconds fence = 0ms) {
    ServiceConfig c;
    c.fence_wait = fence;
    c.agents_share_hosts = per_task;
    c.failure_hold = hold;
    c.scale_up_notice = notice;
    c.num_nodes = nodes;
    c.elastic = range;
    c.max_restarts = max_restarts;
    c.recovery_in_place = in_place_;
    c.run_id = "run1";
    c.initialization_timeout = 60s;
    c.heartbeat_timeout = 10s;
    c.clock = [now = now_] { return *now; };
    service_ = std::make_unique<CoordinationService>(c);
    nodes_ = nodes;
  }

  std::shared_ptr<Joined> Join(int node, int round, int workers = 2, std::string host = "") {
    NodeJoin j;
    j.node_rank = node;
    j.num_nodes = nodes_;
    j.host = host.empty() ? std::string("host-") + static_cast<char>('a' + node) : host;
    j.local_workers = workers;
    j.run_id = "run1";
    j.restart_round = round;
    j.proposed_master_port = 29500;
    j.recovers_in_place = in_place_;
    if (auto fresh = fresh_.find(node); fresh != fresh_.end()) j.fresh_local = fresh->second;
    auto r = std::make_shared<Joined>();
    service_->Join(j, [r](const Status& s, const NodeAssignment& a) {
      r->status = s;
      r->assignment = a;
    });
    return r;
  }

  Stream Attach(int node) {
    Stream s;
    Status st = service_->AttachAgent(
        node, [ev = s.events](const JobEvent& e) { ev->push_back(e); }, &s.id);
    EXPECT_TRUE(st.ok()) << st.message;
    return s;
  }

  // A node arriving from `host`: admitted (its node rank), attached and joined, as the agent channel does.
  struct Arrival {
    Status admitted;
    int node = -1;
    Stream stream;
    std::shared_ptr<Joined> joined = std::make_shared<Joined>();
  };
  Arrival Arrive(const std::string& host, const std::string& run_id = "run1") {
    Arrival a;
    NodeJoin j;
    j.node_rank = -1;
    j.host = host;
    j.local_workers = 2;
    j.run_id = run_id;
    j.arriving = true;
    a.admitted = service_->Admit(j, &a.node);
    if (!a.admitted.ok()) return a;
    a.stream = Attach(a.node);
    j.node_rank = a.node;
    service_->Join(j, [r = a.joined](const Status& s, const NodeAssignment& as) {
      r->status = s;
      r->assignment = as;
    });
    return a;
  }

  // Node 2's stream breaks while a failure is held: that loss explains it, and the job goes on without
  // node 2 (no restart used, no stop).
  void ExpectTheLossOfNode2ExplainsTheFailure() {
    service_->DetachAgent(streams_[2].id);
    const JobEvent* restart = streams_[0].Last(JobEvent::Kind::kRestart);
    ASSERT_NE(restart, nullptr);
    EXPECT_TRUE(restart->node_lost);
    *now_ += 500ms;
    service_->Tick();
    EXPECT_EQ(service_->State(), JobState::kRendezvous);
    EXPECT_EQ(streams_[0].Last(JobEvent::Kind::kStop), nullptr);
  }

  // Every node attaches and joins round 0.
  std::vector<std::shared_ptr<Joined>> Start() {
    std::vector<std::shared_ptr<Joined>> joined;
    for (int n = 0; n < nodes_; ++n) streams_.push_back(Attach(n));
    for (int n = 0; n < nodes_; ++n) joined.push_back(Join(n, 0));
    return joined;
  }

  std::shared_ptr<TimePoint> now_ = std::make_shared<TimePoint>(TimePoint{} + 1000s);
  std::unique_ptr<CoordinationService> service_;
  std::vector<Stream> streams_;
  int nodes_ = 0;
  bool in_place_ = false;                  // --recovery in-process
  std::map<int, std::vector<int>> fresh_;  // by node: the local ranks its next join says are new
};

TEST_F(ElasticServiceTest, ResizeGoesOnWithTheSurvivorsInTheNextEpoch) {
  Make(3, {2, 3, ElasticPolicy::kResize});
  auto first = Start();
  ASSERT_TRUE(first[2]->status && first[2]->status->ok());
  EXPECT_EQ(first[2]->assignment.num_processes, 6);

  service_->DetachAgent(streams_[1].id);  // node 1's distrun was killed
  for (int n : {0, 2}) {
    const JobEvent* restart = streams_[static_cast<size_t>(n)].Last(JobEvent::Kind::kRestart);
    ASSERT_NE(restart, nullptr) << n;
    EXPECT_EQ(restart->restart_round, 1);
    EXPECT_TRUE(restart->node_lost);
    EXPECT_EQ(restart->root_cause.node_rank, 1);
    EXPECT_NE(restart->root_cause.description.find("node lost: its distrun disconnected"), std::string::npos);
  }
  EXPECT_EQ(service_->State(), JobState::kRendezvous);
  EXPECT_EQ(service_->RendezvousProgress(),
            "waiting for 0 of 2 nodes; missing: node 0 (host-a), node 2 (host-c)");

  auto j0 = Join(0, 1);
  auto j2 = Join(2, 1);
  ASSERT_TRUE(j2->status && j2->status->ok()) << j2->status->message;
  EXPECT_EQ(j0->assignment.node_rank, 0);
  EXPECT_EQ(j2->assignment.node_rank, 1);  // launch node 2 is node 1 of the smaller world
  EXPECT_EQ(j2->assignment.num_nodes, 2);
  EXPECT_EQ(j2->assignment.rank_offset, 2);
  EXPECT_EQ(j2->assignment.num_processes, 4);
  EXPECT_EQ(j2->assignment.restart_round, 1);
  EXPECT_EQ(service_->History(),
            "2 epochs; 0 restart(s) after a worker failure; 1 node(s) lost: node 1 (host-b) in epoch 0");

  // The survivors finish: the job is complete without node 1.
  EXPECT_TRUE(service_->ReportSuccess(0, 1).ok());
  EXPECT_TRUE(service_->ReportSuccess(2, 1).ok());
  EXPECT_EQ(service_->State(), JobState::kSucceeded);
  EXPECT_EQ(service_->ExitCode(), 0);
}

TEST_F(ElasticServiceTest, ANodeLostDuringRendezvousIsLeftOutOfThatEpoch) {
  Make(3, {2, 3, ElasticPolicy::kResize});
  for (int n = 0; n < 3; ++n) streams_.push_back(Attach(n));
  auto j0 = Join(0, 0);
  auto j1 = Join(1, 0);
  service_->DetachAgent(streams_[1].id);
  EXPECT_FALSE(j0->status.has_value());
  auto j2 = Join(2, 0);
  ASSERT_TRUE(j0->status && j0->status->ok());
  EXPECT_EQ(j2->assignment.num_nodes, 2);
  EXPECT_EQ(j2->assignment.node_rank, 1);
  EXPECT_EQ(j2->assignment.restart_round, 0);
}

TEST_F(ElasticServiceTest, SilenceLosesANodeAndItIsFencedWhenItComesBack) {
  Make(3, {2, 3, ElasticPolicy::kResize});
  Start();
  // Nodes 0 and 2 keep beating; node 1 is frozen or cut off.
  for (int i = 0; i < 3; ++i) {
    *now_ += 4s;
    service_->Heartbeat(streams_[0].id);
    service_->Heartbeat(streams_[2].id);
    service_->Tick();
  }
  ASSERT_NE(streams_[0].Last(JobEvent::Kind::kRestart), nullptr);
  EXPECT_NE(streams_[0].Last(JobEvent::Kind::kRestart)->root_cause.description.find("no heartbeat for 10s"),
            std::string::npos);
  // Its stream was still open: it is told at once that it is fenced, and again whenever it speaks.
  const JobEvent* fenced = streams_[1].Last(JobEvent::Kind::kStop);
  ASSERT_NE(fenced, nullptr);
  EXPECT_EQ(fenced->exit_code, kFencedExitCode);
  EXPECT_NE(fenced->root_cause.description.find(
                "fenced: lost in epoch 0, and the job went on without it (now epoch 1)"),
            std::string::npos)
      << fenced->root_cause.description;
  streams_[1].events->clear();
  service_->Heartbeat(streams_[1].id);
  ASSERT_EQ(streams_[1].events->size(), 1u);
  EXPECT_EQ(streams_[1].events->front().exit_code, kFencedExitCode);
  // Nor does the epoch's broadcast reach it, and its requests change nothing.
  EXPECT_EQ(streams_[1].Last(JobEvent::Kind::kRestart), nullptr);
  auto late = Join(1, 1);
  ASSERT_TRUE(late->status);
  EXPECT_EQ(late->status->code, StatusCode::kAborted);
  EXPECT_NE(late->status->message.find("fenced"), std::string::npos);
  bool root = true;
  FailedWorker f;
  f.node_rank = 1;
  EXPECT_TRUE(service_->ReportFailure(1, f, &root).ok());
  EXPECT_FALSE(root);
  EXPECT_EQ(service_->State(), JobState::kRendezvous);
  // A new stream from it (a reconnect) is fenced too.
  service_->DetachAgent(streams_[1].id);
  Stream again = Attach(1);
  ASSERT_EQ(again.events->size(), 1u);
  EXPECT_EQ(again.events->front().exit_code, kFencedExitCode);
}

TEST_F(ElasticServiceTest, BelowTheMinimumTheJobEndsNamingTheLostNodes) {
  Make(3, {2, 3, ElasticPolicy::kResize});
  Start();
  service_->DetachAgent(streams_[2].id);
  Join(0, 1);
  Join(1, 1);
  service_->DetachAgent(streams_[1].id);
  EXPECT_EQ(service_->State(), JobState::kStopped);
  const JobEvent* stop = streams_[0].Last(JobEvent::Kind::kStop);
  ASSERT_NE(stop, nullptr);
  EXPECT_EQ(stop->exit_code, kLostAgentExitCode);
  EXPECT_NE(stop->root_cause.description.find("1 node(s) left, fewer than the 2 the job needs (--nnodes); "
                                              "lost: node 2 (host-c), node 1 (host-b)"),
            std::string::npos)
      << stop->root_cause.description;
}

TEST_F(ElasticServiceTest, LosingNodeZeroEndsTheJob) {
  Make(3, {1, 3, ElasticPolicy::kResize});
  Start();
  service_->DetachAgent(streams_[0].id);
  EXPECT_EQ(service_->State(), JobState::kStopped);
  const JobEvent* stop = streams_[1].Last(JobEvent::Kind::kStop);
  ASSERT_NE(stop, nullptr);
  EXPECT_NE(stop->root_cause.description.find("node 0 hosts the job's coordinator"), std::string::npos);
}

TEST_F(ElasticServiceTest, ASpareTakesTheLostNodesSeatAndTheWorldKeepsItsSize) {
  Make(3, {2, 3, ElasticPolicy::kSpares});
  auto first = Start();
  ASSERT_TRUE(first[2]->status && first[2]->status->ok());
  EXPECT_TRUE(first[2]->assignment.spare);
  EXPECT_EQ(first[2]->assignment.node_rank, -1);
  EXPECT_EQ(first[1]->assignment.node_rank, 1);
  EXPECT_EQ(first[1]->assignment.num_processes, 4);  // the spare's workers do not count
  EXPECT_EQ(first[1]->assignment.num_nodes, 2);

  service_->DetachAgent(streams_[1].id);
  auto j0 = Join(0, 1);
  auto j2 = Join(2, 1, 3);
  ASSERT_TRUE(j2->status && j2->status->ok());
  EXPECT_FALSE(j2->assignment.spare);
  EXPECT_EQ(j2->assignment.node_rank, 1);  // the lost node's seat
  EXPECT_EQ(j2->assignment.rank_offset, 2);
  EXPECT_EQ(j2->assignment.num_processes, 5);
  EXPECT_EQ(j0->assignment.node_rank, 0);
}

TEST_F(ElasticServiceTest, ALostSpareChangesNothingAndNeverHasToSucceed) {
  Make(3, {2, 3, ElasticPolicy::kSpares});
  Start();
  streams_[0].events->clear();
  service_->DetachAgent(streams_[2].id);
  EXPECT_EQ(streams_[0].Last(JobEvent::Kind::kRestart), nullptr);
  EXPECT_EQ(service_->State(), JobState::kRunning);
  EXPECT_TRUE(service_->ReportSuccess(0, 0).ok());
  EXPECT_TRUE(service_->ReportSuccess(1, 0).ok());
  EXPECT_EQ(service_->State(), JobState::kSucceeded);
}

TEST_F(ElasticServiceTest, NodeLossesDoNotUseRestarts) {
  Make(3, {2, 3, ElasticPolicy::kResize}, /*max_restarts=*/1);
  Start();
  service_->DetachAgent(streams_[2].id);  // epoch 1, no restart used
  Join(0, 1);
  Join(1, 1);
  FailedWorker f = Failure(1, 3, 7);
  bool root = false;
  ASSERT_TRUE(service_->ReportFailure(1, f, &root).ok());
  ASSERT_NE(streams_[0].Last(JobEvent::Kind::kRestart), nullptr);
  EXPECT_EQ(streams_[0].Last(JobEvent::Kind::kRestart)->restart_round, 2);  // the one restart
  EXPECT_FALSE(streams_[0].Last(JobEvent::Kind::kRestart)->node_lost);
  Join(0, 2);
  Join(1, 2);
  ASSERT_TRUE(service_->ReportFailure(2, f, &root).ok());
  EXPECT_EQ(service_->State(), JobState::kStopped);  // no restart left
  EXPECT_EQ(service_->ExitCode(), 7);
  EXPECT_EQ(service_->History(),
            "3 epochs; 1 restart(s) after a worker failure; 1 node(s) lost: node 2 (host-c) in epoch 0");
}

TEST_F(ElasticServiceTest, AFailureThatANodeLossExplainsIsNoFailure) {
  // Node 2 dies; a moment before its connection's close arrives, node 1's worker reports that its
  // all-reduce failed. The loss wins: the job goes on, and no restart is used or stop made.
  Make(3, {2, 3, ElasticPolicy::kResize}, /*max_restarts=*/0, /*hold=*/200ms);
  Start();
  FailedWorker f = Failure(1, 2, 1);
  bool root = false;
  ASSERT_TRUE(service_->ReportFailure(0, f, &root).ok());
  EXPECT_TRUE(root);
  *now_ += 50ms;
  service_->Tick();
  EXPECT_EQ(service_->State(), JobState::kRunning);  // held
  ExpectTheLossOfNode2ExplainsTheFailure();
}

TEST_F(ElasticServiceTest, AHeldFailureWithoutALossIsActedOnAfterTheHold) {
  Make(3, {2, 3, ElasticPolicy::kResize}, /*max_restarts=*/0, /*hold=*/200ms);
  Start();
  FailedWorker f = Failure(1, 2, 7);
  bool root = false;
  ASSERT_TRUE(service_->ReportFailure(0, f, &root).ok());
  FailedWorker later = f;
  later.node_rank = 2;
  bool second_root = true;
  ASSERT_TRUE(service_->ReportFailure(0, later, &second_root).ok());
  EXPECT_FALSE(second_root);  // the first report is the root cause
  *now_ += 199ms;
  service_->Tick();
  EXPECT_EQ(service_->State(), JobState::kRunning);
  *now_ += 2ms;
  service_->Tick();
  EXPECT_EQ(service_->State(), JobState::kStopped);
  EXPECT_EQ(service_->ExitCode(), 7);
  EXPECT_EQ(service_->RootCause()->node_rank, 1);
}

TEST_F(ElasticServiceTest, AHeldFailureWaitsUntilEveryMemberIsHeardWellSinceIt) {
  Make(3, {2, 3, ElasticPolicy::kResize}, /*max_restarts=*/0, /*hold=*/200ms);
  Start();
  *now_ += 1s;
  bool root = false;
  ASSERT_TRUE(service_->ReportFailure(0, Failure(1, 2, 7), &root).ok());
  *now_ += 250ms;
  service_->Tick();
  EXPECT_EQ(service_->State(), JobState::kRunning);  // nobody heard since the report
  service_->Heartbeat(streams_[0].id, 0ms);
  service_->Heartbeat(streams_[1].id, 600ms);
  service_->Tick();
  EXPECT_EQ(service_->State(), JobState::kRunning);  // node 2 not yet
  service_->Heartbeat(streams_[2].id, 4999ms);       // under half the 10 s timeout: it hears node 0
  service_->Tick();
  EXPECT_EQ(service_->State(), JobState::kStopped);
  EXPECT_EQ(service_->ExitCode(), 7);
}

TEST_F(ElasticServiceTest, AFailureWhileAMemberHearsNothingIsThatMembersLoss) {
  // The gray failure: node 2's link drops packets. Node 0 still hears some of its heartbeats, but node 2
  // has heard nothing for a while, kills its workers when its timeout comes, and their peers' collective
  // fails before node 2's close reaches node 0. The loss explains the failure.
  Make(3, {2, 3, ElasticPolicy::kResize}, /*max_restarts=*/0, /*hold=*/200ms);
  Start();
  *now_ += 1s;
  bool root = false;
  ASSERT_TRUE(service_->ReportFailure(0, Failure(1, 2, 1), &root).ok());
  EXPECT_TRUE(root);
  *now_ += 300ms;
  service_->Heartbeat(streams_[0].id, 0ms);
  service_->Heartbeat(streams_[1].id, 0ms);
  service_->Heartbeat(streams_[2].id, 9s);  // sent just before it fenced itself, delivered late
  service_->Tick();
  EXPECT_EQ(service_->State(), JobState::kRunning);
  *now_ += 2s;
  service_->Tick();
  EXPECT_EQ(service_->State(), JobState::kRunning);
  ExpectTheLossOfNode2ExplainsTheFailure();
}

TEST_F(ElasticServiceTest, TheWaitForAMemberThatHearsNothingIsBounded) {
  // A member whose heartbeats keep saying it hears nothing, and that is never lost: the failure is acted
  // on once a lost node would have been declared lost (heartbeat timeout + fence wait after the report).
  Make(3, {2, 3, ElasticPolicy::kResize}, /*max_restarts=*/0, /*hold=*/200ms, /*notice=*/0ms,
       /*per_task=*/false, /*fence=*/700ms);
  Start();
  *now_ += 1s;
  bool root = false;
  ASSERT_TRUE(service_->ReportFailure(0, Failure(1, 2, 7), &root).ok());
  for (int i = 0; i < 10; ++i) {
    *now_ += 1s;
    for (int n = 0; n < 3; ++n) service_->Heartbeat(streams_[static_cast<size_t>(n)].id, n == 2 ? 6s : 0ms);
    service_->Tick();
    ASSERT_EQ(service_->State(), JobState::kRunning) << i;
  }
  *now_ += 699ms;
  service_->Tick();
  EXPECT_EQ(service_->State(), JobState::kRunning);
  *now_ += 1ms;
  service_->Tick();
  EXPECT_EQ(service_->State(), JobState::kStopped);
  EXPECT_EQ(service_->ExitCode(), 7);
}

TEST(ServiceWithoutARange, ALostNodeHearsTheJobsEndNotAFence) {
  auto now = std::make_shared<TimePoint>(TimePoint{} + 1000s);
  ServiceConfig c;
  c.num_nodes = 2;
  c.heartbeat_timeout = 10s;
  c.clock = [now] { return *now; };
  CoordinationService service(c);
  std::vector<std::shared_ptr<std::vector<JobEvent>>> events;
  std::vector<uint64_t> ids(2);
  for (int n = 0; n < 2; ++n) {
    events.push_back(std::make_shared<std::vector<JobEvent>>());
    ASSERT_TRUE(service
                    .AttachAgent(
                        n, [e = events.back()](const JobEvent& x) { e->push_back(x); }, &ids[n])
                    .ok());
  }
  *now += 11s;
  service.Heartbeat(ids[0]);
  service.Tick();
  EXPECT_EQ(service.State(), JobState::kStopped);
  for (int n = 0; n < 2; ++n) {
    ASSERT_FALSE(events[static_cast<size_t>(n)]->empty()) << n;
    EXPECT_EQ(events[static_cast<size_t>(n)]->back().kind, JobEvent::Kind::kStop) << n;
    EXPECT_EQ(events[static_cast<size_t>(n)]->back().exit_code, kLostAgentExitCode) << n;
  }
}

TEST_F(ElasticServiceTest, AnArrivalWaitsAsASpareUntilTheNextRestartUnderNextRestart) {
  Make(2, {2, 3, ElasticPolicy::kResize, ScaleUp::kNextRestart}, /*max_restarts=*/1);
  Start();
  Arrival late = Arrive("host-c");
  ASSERT_TRUE(late.admitted.ok()) << late.admitted.message;
  EXPECT_EQ(late.node, 2);
  // While the epoch runs it holds no seat, and the job is told a change is coming.
  ASSERT_TRUE(late.joined->status && late.joined->status->ok()) << late.joined->status->message;
  EXPECT_TRUE(late.joined->assignment.spare);
  EXPECT_EQ(late.joined->assignment.agent, 2);
  EXPECT_EQ(late.joined->assignment.restart_round, 0);
  const JobEvent* notice = streams_[0].Last(JobEvent::Kind::kNotice);
  ASSERT_NE(notice, nullptr);
  EXPECT_EQ(notice->notice,
            "node 2 (host-c) arrived; it joins the world at the next restart (--scale-up next-restart)");
  std::optional<std::string> key;
  ASSERT_TRUE(service_->KvTryGet(kChangeKey, &key).ok());
  EXPECT_EQ(key, notice->notice);
  EXPECT_EQ(streams_[0].Last(JobEvent::Kind::kRestart), nullptr);
  // A worker failure restarts the job: the world grows by the arrival.
  bool root = false;
  ASSERT_TRUE(service_->ReportFailure(0, Failure(1, 2, 1), &root).ok());
  ASSERT_NE(late.stream.Last(JobEvent::Kind::kRestart), nullptr);
  auto j0 = Join(0, 1);
  auto j1 = Join(1, 1);
  auto j2 = Join(2, 1);
  ASSERT_TRUE(j2->status && j2->status->ok()) << j2->status->message;
  EXPECT_EQ(j2->assignment.node_rank, 2);
  EXPECT_EQ(j2->assignment.num_nodes, 3);
  EXPECT_EQ(j2->assignment.rank_offset, 4);
  EXPECT_EQ(j2->assignment.num_processes, 6);
  EXPECT_EQ(service_->History(),
            "2 epochs; 1 restart(s) after a worker failure; 0 node(s) lost; 1 node(s) arrived: node 2 "
            "(host-c) in epoch 0");
  std::optional<std::string> gone;
  ASSERT_TRUE(service_->KvTryGet(kChangeKey, &gone).ok());
  EXPECT_FALSE(gone.has_value());  // the new epoch's store is empty
}

TEST_F(ElasticServiceTest, ScaleUpNowRestartsTheJobWithTheArrivalAfterTheNotice) {
  Make(2, {2, 4, ElasticPolicy::kResize, ScaleUp::kNow}, 0, 0ms, 5s);
  Start();
  Arrival late = Arrive("host-z");
  ASSERT_TRUE(late.admitted.ok());
  ASSERT_NE(streams_[1].Last(JobEvent::Kind::kNotice), nullptr);
  EXPECT_EQ(streams_[1].Last(JobEvent::Kind::kNotice)->notice,
            "node 2 (host-z) arrived; the job restarts with it in 5s (--scale-up now)");
  *now_ += 4s;
  service_->Tick();
  EXPECT_EQ(streams_[1].Last(JobEvent::Kind::kRestart), nullptr);
  *now_ += 2s;
  service_->Tick();
  const JobEvent* restart = streams_[1].Last(JobEvent::Kind::kRestart);
  ASSERT_NE(restart, nullptr);
  EXPECT_TRUE(restart->node_arrived);
  EXPECT_FALSE(restart->node_lost);
  EXPECT_EQ(restart->restart_round, 1);
  EXPECT_EQ(restart->root_cause.description, "node 2 (host-z) arrived and the world grows (--scale-up now)");
  Join(0, 1);
  Join(1, 1);
  auto j2 = Join(2, 1);
  ASSERT_TRUE(j2->status && j2->status->ok());
  EXPECT_EQ(j2->assignment.num_nodes, 3);
  // No restart of --max-restarts was used: a failure now ends the job.
  bool root = false;
  ASSERT_TRUE(service_->ReportFailure(1, Failure(2, 4, 3), &root).ok());
  EXPECT_EQ(service_->State(), JobState::kStopped);
  EXPECT_EQ(service_->ExitCode(), 3);
}

TEST_F(ElasticServiceTest, ScaleUpNowWithoutNoticeRestartsAtOnceAndTheArrivalJoinsTheNewEpoch) {
  Make(2, {2, 3, ElasticPolicy::kResize, ScaleUp::kNow});
  Start();
  Arrival late = Arrive("host-z");
  ASSERT_TRUE(late.admitted.ok());
  ASSERT_NE(streams_[0].Last(JobEvent::Kind::kRestart), nullptr);
  EXPECT_EQ(service_->State(), JobState::kRendezvous);
  EXPECT_FALSE(late.joined->status.has_value());  // it takes part in epoch 1's rendezvous
  Join(0, 1);
  Join(1, 1);
  ASSERT_TRUE(late.joined->status && late.joined->status->ok());
  EXPECT_EQ(late.joined->assignment.restart_round, 1);
  EXPECT_EQ(late.joined->assignment.node_rank, 2);
  EXPECT_FALSE(late.joined->assignment.spare);
}

TEST_F(ElasticServiceTest, ScaleUpNeverKeepsTheArrivalForALostMembersPlace) {
  Make(2, {2, 3, ElasticPolicy::kResize, ScaleUp::kNever});
  Start();
  Arrival late = Arrive("host-z");
  ASSERT_TRUE(late.joined->status && late.joined->status->ok());
  EXPECT_TRUE(late.joined->assignment.spare);
  EXPECT_EQ(streams_[0].Last(JobEvent::Kind::kNotice), nullptr);  // no change of the world is coming
  service_->DetachAgent(streams_[1].id);
  Join(0, 1);
  auto j2 = Join(2, 1);
  ASSERT_TRUE(j2->status && j2->status->ok());
  EXPECT_EQ(j2->assignment.node_rank, 1);
  EXPECT_EQ(j2->assignment.num_nodes, 2);
}

TEST_F(ElasticServiceTest, SparesTakeArrivalsAsSparesAndRefuseBeyondTheMaximum) {
  Make(2, {2, 3, ElasticPolicy::kSpares});
  Start();
  Arrival late = Arrive("host-z");
  ASSERT_TRUE(late.joined->status && late.joined->status->ok());
  EXPECT_TRUE(late.joined->assignment.spare);
  Arrival full = Arrive("host-y");
  EXPECT_EQ(full.admitted.code, StatusCode::kResourceExhausted);
  EXPECT_NE(
      full.admitted.message.find("already has 3 live nodes, the most its node range allows (--nnodes 2:3)"),
      std::string::npos)
      << full.admitted.message;
  // The spare takes a lost member's seat and ranks.
  service_->DetachAgent(streams_[1].id);
  Join(0, 1);
  auto j2 = Join(2, 1);
  ASSERT_TRUE(j2->status && j2->status->ok());
  EXPECT_EQ(j2->assignment.node_rank, 1);
  EXPECT_EQ(j2->assignment.rank_offset, 2);
}

TEST_F(ElasticServiceTest, ArrivalsOfAnotherRunOrAJobWithoutARangeAreRefused) {
  Make(2, {2, 3, ElasticPolicy::kResize});
  Start();
  Arrival other = Arrive("host-z", "run2");
  EXPECT_EQ(other.admitted.code, StatusCode::kInvalidArgument);
  EXPECT_NE(other.admitted.message.find("belongs to run 'run2', but this job is run 'run1'"),
            std::string::npos);

  ServiceConfig c;
  c.num_nodes = 2;
  c.run_id = "run1";
  CoordinationService fixed(c);
  NodeJoin j;
  j.node_rank = -1;
  j.run_id = "run1";
  j.arriving = true;
  int node = 0;
  Status s = fixed.Admit(j, &node);
  EXPECT_EQ(s.code, StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message.find("no node range (--nnodes MIN:MAX)"), std::string::npos);
}

TEST_F(ElasticServiceTest, AnArrivalDuringRendezvousTakesPartInThatEpoch) {
  Make(2, {2, 3, ElasticPolicy::kResize});
  for (int n = 0; n < 2; ++n) streams_.push_back(Attach(n));
  auto j0 = Join(0, 0);
  Arrival late = Arrive("host-z");
  auto j1 = Join(1, 0);
  ASSERT_TRUE(j1->status && j1->status->ok());
  EXPECT_EQ(j1->assignment.num_nodes, 3);
  ASSERT_TRUE(late.joined->status && late.joined->status->ok());
  EXPECT_EQ(late.joined->assignment.node_rank, 2);
  EXPECT_EQ(late.joined->assignment.restart_round, 0);
}

TEST_F(ElasticServiceTest, ALostArrivalIsFencedLikeAnyNode) {
  Make(2, {2, 3, ElasticPolicy::kResize});
  Start();
  Arrival late = Arrive("host-z");
  service_->DetachAgent(late.stream.id);
  EXPECT_EQ(streams_[0].Last(JobEvent::Kind::kRestart), nullptr);  // it held no seat
  EXPECT_EQ(service_->State(), JobState::kRunning);
  EXPECT_NE(service_->History().find("1 node(s) lost: node 2 (host-z) in epoch 0"), std::string::npos);
}

TEST_F(ElasticServiceTest, PerTaskJobsLoseAndSeatWholeHosts) {
  // Six distrun processes, one per task, two on each of three hosts; 2 hosts work, one waits.
  Make(6, {2, 3, ElasticPolicy::kSpares}, 0, 0ms, 0ms, /*per_task=*/true);
  const char* hosts[] = {"h1", "h1", "h2", "h2", "h3", "h3"};
  std::vector<std::shared_ptr<Joined>> first;
  for (int n = 0; n < 6; ++n) streams_.push_back(Attach(n));
  for (int n = 0; n < 6; ++n) first.push_back(Join(n, 0, 1, hosts[n]));
  ASSERT_TRUE(first[5]->status && first[5]->status->ok()) << first[5]->status->message;
  EXPECT_EQ(first[3]->assignment.node_rank, 1);
  EXPECT_EQ(first[3]->assignment.num_nodes, 2);
  EXPECT_EQ(first[3]->assignment.rank_offset, 3);
  EXPECT_EQ(first[3]->assignment.num_processes, 4);
  EXPECT_TRUE(first[4]->assignment.spare);
  // One task's distrun on h2 dies: h2's other one is fenced, and h3 takes h2's node rank and ranks.
  service_->DetachAgent(streams_[2].id);
  const JobEvent* fenced = streams_[3].Last(JobEvent::Kind::kStop);
  ASSERT_NE(fenced, nullptr);
  EXPECT_EQ(fenced->exit_code, kFencedExitCode);
  ASSERT_NE(streams_[0].Last(JobEvent::Kind::kRestart), nullptr);
  std::vector<std::shared_ptr<Joined>> next;
  for (int n : {0, 1, 4, 5}) next.push_back(Join(n, 1, 1, hosts[n]));
  ASSERT_TRUE(next[3]->status && next[3]->status->ok()) << next[3]->status->message;
  EXPECT_EQ(next[2]->assignment.node_rank, 1);
  EXPECT_EQ(next[2]->assignment.rank_offset, 2);
  EXPECT_EQ(next[3]->assignment.rank_offset, 3);
  EXPECT_EQ(next[3]->assignment.num_nodes, 2);
  EXPECT_EQ(
      service_->History(),
      "2 epochs; 0 restart(s) after a worker failure; 2 node(s) lost: node 2 (h2) in epoch 0, node 3 (h2) "
      "in epoch 0");
}

TEST_F(ElasticServiceTest, PerTaskJobsWhoseHostsDoNotFitTheRangeEnd) {
  Make(4, {2, 3, ElasticPolicy::kResize}, 0, 0ms, 0ms, /*per_task=*/true);
  for (int n = 0; n < 4; ++n) streams_.push_back(Attach(n));
  std::shared_ptr<Joined> last;
  for (int n = 0; n < 4; ++n) last = Join(n, 0, 1, "h" + std::to_string(n));
  ASSERT_TRUE(last->status);
  EXPECT_EQ(last->status->code, StatusCode::kInvalidArgument);
  EXPECT_EQ(last->status->message,
            "4 hosts were started, outside the node range 2..3 (--nnodes counts hosts in a per-task job)");
  EXPECT_EQ(service_->State(), JobState::kStopped);
}

TEST_F(ElasticServiceTest, AfterASilentLossTheNextEpochWaitsForTheLostNodeToFenceItself) {
  Make(3, {2, 3, ElasticPolicy::kResize}, 0, 0ms, 0ms, false, /*fence=*/700ms);
  Start();
  for (int i = 0; i < 3; ++i) {
    *now_ += 4s;
    service_->Heartbeat(streams_[0].id);
    service_->Heartbeat(streams_[2].id);
    service_->Tick();
  }
  ASSERT_NE(streams_[0].Last(JobEvent::Kind::kRestart), nullptr);  // the survivors stop their workers now
  auto j0 = Join(0, 1);
  auto j2 = Join(2, 1);
  EXPECT_FALSE(j2->status.has_value());  // but start the next epoch's only once node 1 ended its own
  *now_ += 500ms;
  service_->Tick();
  EXPECT_FALSE(j2->status.has_value());
  *now_ += 300ms;
  service_->Tick();
  ASSERT_TRUE(j2->status && j2->status->ok());
  EXPECT_EQ(j2->assignment.num_nodes, 2);
}

TEST_F(ElasticServiceTest, ABrokenStreamNeedsNoFenceWait) {
  Make(3, {2, 3, ElasticPolicy::kResize}, 0, 0ms, 0ms, false, /*fence=*/700ms);
  Start();
  service_->DetachAgent(streams_[1].id);  // its sentinel ended its workers when its distrun died
  Join(0, 1);
  auto j2 = Join(2, 1);
  ASSERT_TRUE(j2->status && j2->status->ok());
}

}  // namespace
}  // namespace distrun

namespace distrun {
namespace {

// --recovery in-process: each epoch's assignments say how its world follows the last one's.
TEST_F(ElasticServiceTest, InPlaceASparesSeatIsLostAndJoinedWithTheSourceASurvivor) {
  in_place_ = true;
  Make(3, {2, 3, ElasticPolicy::kSpares});
  auto first = Start();
  ASSERT_TRUE(first[0]->status && first[0]->status->ok());
  EXPECT_EQ(first[0]->assignment.change, WorldChange{});  // the first world: no change
  service_->DetachAgent(streams_[1].id);
  fresh_[2] = {0, 1};  // the spare's workers are new processes
  auto j0 = Join(0, 1);
  auto j2 = Join(2, 1);
  ASSERT_TRUE(j2->status && j2->status->ok()) << j2->status->message;
  const WorldChange want{0, {2, 3}, {2, 3}};
  EXPECT_EQ(j0->assignment.change, want);
  EXPECT_EQ(j2->assignment.change, want);
  EXPECT_EQ(j2->assignment.rank_offset, 2);
}

TEST_F(ElasticServiceTest, InPlaceAWorkerStartedAgainIsLostAndJoinedAtItsRank) {
  in_place_ = true;
  Make(2, {2, 2, ElasticPolicy::kResize}, /*max_restarts=*/1);
  Start();
  bool root = false;
  ASSERT_TRUE(service_->ReportFailure(0, Failure(1, 2, 9), &root).ok());
  ASSERT_NE(streams_[0].Last(JobEvent::Kind::kRestart), nullptr);
  fresh_[1] = {0};
  auto j0 = Join(0, 1);
  auto j1 = Join(1, 1);
  ASSERT_TRUE(j1->status && j1->status->ok()) << j1->status->message;
  EXPECT_EQ(j0->assignment.change, (WorldChange{0, {2}, {2}}));
}

TEST_F(ElasticServiceTest, InPlaceEveryNodeMustRecoverAlike) {
  in_place_ = true;
  Make(2, {1, 2, ElasticPolicy::kResize});
  for (int n = 0; n < 2; ++n) streams_.push_back(Attach(n));
  in_place_ = false;
  auto j1 = Join(1, 0);
  ASSERT_TRUE(j1->status.has_value());
  EXPECT_EQ(j1->status->code, StatusCode::kInvalidArgument);
  EXPECT_EQ(j1->status->message,
            "node 1 (host-b) recovers by restarting (--recovery restart), but the job recovers in place "
            "(--recovery in-process); every distrun of a job must use the same --recovery");
}

TEST_F(ElasticServiceTest, InPlaceTheLastWorldOutlivesATakeover) {
  in_place_ = true;
  Make(3, {2, 3, ElasticPolicy::kResize});
  Start();
  ServiceSnapshot snapshot = service_->Snapshot();
  EXPECT_EQ(snapshot.world_ranks, (std::map<int, AgentRanks>{{0, {0, 2}}, {1, {2, 2}}, {2, {4, 2}}}));
}

}  // namespace
}  // namespace distrun
