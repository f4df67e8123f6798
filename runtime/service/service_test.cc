#include "runtime/service/service.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace distrun {
namespace {

using namespace std::chrono_literals;
using TimePoint = std::chrono::steady_clock::time_point;

// Time moves only when a test says so.
struct FakeClock {
  std::shared_ptr<TimePoint> now = std::make_shared<TimePoint>(TimePoint{} + 1000s);
  RuntimeClock Get() const {
    return [now = now] { return *now; };
  }
  void Advance(std::chrono::milliseconds d) const { *now += d; }
};

struct JoinResult {
  std::optional<Status> status;
  NodeAssignment assignment;
};

class ServiceTest : public ::testing::Test {
 protected:
  std::unique_ptr<CoordinationService> Make(int nodes, int max_restarts = 0) {
    ServiceConfig c;
    c.num_nodes = nodes;
    c.max_restarts = max_restarts;
    c.run_id = "run1";
    c.initialization_timeout = 60s;
    c.heartbeat_timeout = heartbeat_timeout;
    c.clock = clock.Get();
    c.max_value_bytes = 64;
    c.max_store_bytes = 256;
    c.expected_hosts = {"host-a", "host-b", "host-c", "host-d"};
    c.expected_hosts.resize(static_cast<size_t>(nodes));
    return std::make_unique<CoordinationService>(c);
  }

  static NodeJoin Node(int rank, int nodes, int workers, int round = 0) {
    NodeJoin j;
    j.node_rank = rank;
    j.num_nodes = nodes;
    j.host = std::string("host-") + static_cast<char>('a' + rank);
    j.local_workers = workers;
    j.run_id = "run1";
    j.restart_round = round;
    j.proposed_master_port = 29500 + rank;
    j.proposed_jax_port = 8476 + rank;
    return j;
  }

  static std::shared_ptr<JoinResult> Join(CoordinationService& s, const NodeJoin& j) {
    auto r = std::make_shared<JoinResult>();
    s.Join(j, [r](const Status& st, const NodeAssignment& a) {
      EXPECT_FALSE(r->status.has_value()) << "join completed twice";
      r->status = st;
      r->assignment = a;
    });
    return r;
  }

  // Attaches an agent stream recording its events.
  struct Agent {
    uint64_t id = 0;
    std::shared_ptr<std::vector<JobEvent>> events = std::make_shared<std::vector<JobEvent>>();
  };
  static Agent Attach(CoordinationService& s, int node) {
    Agent a;
    Status st = s.AttachAgent(
        node, [ev = a.events](const JobEvent& e) { ev->push_back(e); }, &a.id);
    EXPECT_TRUE(st.ok()) << st.message;
    return a;
  }

  FakeClock clock;
  std::chrono::milliseconds heartbeat_timeout = 10s;
};

TEST_F(ServiceTest, RendezvousAssignsRankOffsetsByPrefixSums) {
  auto s = Make(3);
  auto r2 = Join(*s, Node(2, 3, 1));
  auto r0 = Join(*s, Node(0, 3, 4));
  EXPECT_FALSE(r0->status.has_value());
  EXPECT_EQ(s->RendezvousProgress(), "waiting for 2 of 3 nodes; missing: node 1 (host-b)");
  auto r1 = Join(*s, Node(1, 3, 2));
  ASSERT_TRUE(r0->status && r1->status && r2->status);
  EXPECT_TRUE(r1->status->ok()) << r1->status->message;
  EXPECT_EQ(r0->assignment.rank_offset, 0);
  EXPECT_EQ(r1->assignment.rank_offset, 4);
  EXPECT_EQ(r2->assignment.rank_offset, 6);
  EXPECT_FALSE(r0->assignment.standby_agent);  // no node range: losing any node ends the job
  EXPECT_EQ(r2->assignment.num_processes, 7);
  EXPECT_EQ(r2->assignment.num_nodes, 3);
  EXPECT_EQ(r2->assignment.node_rank, 2);
  EXPECT_EQ(r2->assignment.process0_host, "host-a");
  // Node 0's proposed ports are the job's, whoever joined first.
  EXPECT_EQ(r2->assignment.master_port, 29500);
  EXPECT_EQ(r2->assignment.jax_port, 8476);
  EXPECT_EQ(r2->assignment.run_id, "run1");
  EXPECT_EQ(s->State(), JobState::kRunning);
  EXPECT_EQ(s->RendezvousProgress(), "");
}

// Node 0 joins with the coordinator's address as its host (what its workers reach) and its machine's name:
// ranks, messages and labels carry the name, the assignment the address, so one host has one name.
TEST_F(ServiceTest, NodeZeroIsShownByItsHostNameAndReachedByTheCoordinatorAddress) {
  auto s = Make(2);
  NodeJoin zero = Node(0, 2, 1);
  zero.host = "127.0.0.1";
  zero.machine = "vm";
  NodeJoin one = Node(1, 2, 1);
  one.machine = "host-b";
  auto r0 = Join(*s, zero);
  auto r1 = Join(*s, one);
  ASSERT_TRUE(r0->status && r1->status && r1->status->ok());
  EXPECT_EQ(r1->assignment.process0_host, "127.0.0.1");
  for (int node : {0, 1}) {
    NodeProgress p;
    p.workers = 1;
    RankProgress rank;
    rank.rank = node;
    rank.step = 5;
    p.ranks.push_back(rank);
    s->ReportProgress(node, p);
  }
  const JobStatusView v = s->Overview();
  ASSERT_EQ(v.ranks.size(), 2u);
  EXPECT_EQ(v.ranks[0].host, "vm");
  EXPECT_EQ(v.ranks[1].host, "host-b");
  EXPECT_EQ(Join(*s, zero)->status->message.find("(127.0.0.1)"), std::string::npos);
}

TEST_F(ServiceTest, ProcessZeroIsOnTheFirstNodeWithWorkers) {
  auto s = Make(2);
  auto r0 = Join(*s, Node(0, 2, 0));  // e.g. mpirun's host, running no worker
  auto r1 = Join(*s, Node(1, 2, 2));
  ASSERT_TRUE(r1->status && r1->status->ok());
  EXPECT_EQ(r1->assignment.process0_host, "host-b");
  EXPECT_EQ(r1->assignment.rank_offset, 0);
}

TEST_F(ServiceTest, ProgressNamesEveryMissingNode) {
  auto s = Make(3);
  EXPECT_EQ(s->RendezvousProgress(),
            "waiting for 0 of 3 nodes; missing: node 0 (host-a), node 1 (host-b), node 2 (host-c)");
}

TEST_F(ServiceTest, JoinTwiceIsAnError) {
  auto s = Make(2);
  auto first = Join(*s, Node(1, 2, 1));
  NodeJoin again = Node(1, 2, 1);
  again.host = "host-x";
  auto second = Join(*s, again);
  ASSERT_TRUE(second->status);
  EXPECT_EQ(second->status->code, StatusCode::kAlreadyExists);
  EXPECT_NE(second->status->message.find("node 1 (host-x) joined twice"), std::string::npos)
      << second->status->message;
  EXPECT_NE(second->status->message.find("host-b"), std::string::npos);
  EXPECT_FALSE(first->status.has_value());  // the first join still waits
}

TEST_F(ServiceTest, NodeRankOutOfRangeIsAnError) {
  auto s = Make(2);
  auto r = Join(*s, Node(2, 2, 1));
  ASSERT_TRUE(r->status);
  EXPECT_EQ(r->status->code, StatusCode::kInvalidArgument);
  EXPECT_NE(r->status->message.find("node 2"), std::string::npos);
  EXPECT_NE(r->status->message.find("out of range"), std::string::npos);
  auto neg = Join(*s, Node(-1, 2, 1));
  EXPECT_EQ(neg->status->code, StatusCode::kInvalidArgument);
}

TEST_F(ServiceTest, InconsistentNodeCountIsAnError) {
  auto s = Make(2);
  auto r = Join(*s, Node(1, 3, 1));
  ASSERT_TRUE(r->status);
  EXPECT_EQ(r->status->code, StatusCode::kInvalidArgument);
  EXPECT_NE(r->status->message.find("node 1 (host-b) expects 3 nodes, but the job has 2"), std::string::npos)
      << r->status->message;
}

TEST_F(ServiceTest, OtherRunIdIsAnError) {
  auto s = Make(1);
  NodeJoin j = Node(0, 1, 1);
  j.run_id = "other";
  auto r = Join(*s, j);
  EXPECT_EQ(r->status->code, StatusCode::kInvalidArgument);
  EXPECT_NE(r->status->message.find("'other'"), std::string::npos);
}

TEST_F(ServiceTest, RendezvousTimesOutNamingMissingNodes) {
  heartbeat_timeout = 120s;
  auto s = Make(3);
  auto agent0 = Attach(*s, 0);
  auto r0 = Join(*s, Node(0, 3, 1));
  auto r2 = Join(*s, Node(2, 3, 1));
  clock.Advance(59s);
  s->Tick();
  EXPECT_FALSE(r0->status.has_value());
  clock.Advance(1s);
  s->Tick();
  ASSERT_TRUE(r0->status && r2->status);
  EXPECT_EQ(r0->status->code, StatusCode::kDeadlineExceeded);
  EXPECT_NE(r0->status->message.find("2 of 3 nodes joined; missing: node 1 (host-b)"), std::string::npos)
      << r0->status->message;
  EXPECT_EQ(s->State(), JobState::kStopped);
  ASSERT_EQ(agent0.events->size(), 1u);
  EXPECT_EQ(agent0.events->back().kind, JobEvent::Kind::kStop);
  EXPECT_EQ(agent0.events->back().root_cause.node_rank, 1);
  // Latecomers learn that the job is over.
  auto late = Join(*s, Node(1, 3, 1));
  EXPECT_EQ(late->status->code, StatusCode::kAborted);
}

TEST_F(ServiceTest, JoinedNodeWithoutAStreamIsLostAfterTheHeartbeatTimeout) {
  auto s = Make(2);
  auto a0 = Attach(*s, 0);
  Join(*s, Node(1, 2, 1));
  clock.Advance(5s);
  s->Heartbeat(a0.id);
  clock.Advance(5s);
  s->Tick();
  EXPECT_EQ(s->State(), JobState::kStopped);
  EXPECT_EQ(s->RootCause()->node_rank, 1);
}

TEST_F(ServiceTest, HeartbeatsKeepAnAgentAlive) {
  auto s = Make(1);
  auto a = Attach(*s, 0);
  Join(*s, Node(0, 1, 1));
  for (int i = 0; i < 5; ++i) {
    clock.Advance(6s);
    s->Heartbeat(a.id);
    s->Tick();
  }
  EXPECT_EQ(s->State(), JobState::kRunning);
  ASSERT_EQ(a.events->size(), 5u);
  EXPECT_EQ(a.events->front().kind, JobEvent::Kind::kHeartbeat);
}

TEST_F(ServiceTest, MissedHeartbeatsStopTheJob) {
  auto s = Make(2, /*max_restarts=*/3);
  auto a0 = Attach(*s, 0);
  auto a1 = Attach(*s, 1);
  Join(*s, Node(0, 2, 1));
  Join(*s, Node(1, 2, 1));
  clock.Advance(6s);
  s->Heartbeat(a0.id);
  clock.Advance(4s);
  s->Tick();  // node 1's deadline passed; node 0's did not
  EXPECT_EQ(s->State(), JobState::kStopped);
  ASSERT_FALSE(a0.events->empty());
  const JobEvent& e = a0.events->back();
  EXPECT_EQ(e.kind, JobEvent::Kind::kStop);  // a lost node cannot restart, whatever max_restarts says
  EXPECT_EQ(e.exit_code, kLostAgentExitCode);
  EXPECT_EQ(e.root_cause.node_rank, 1);
  EXPECT_EQ(e.root_cause.host, "host-b");
  EXPECT_NE(e.root_cause.description.find("no heartbeat for 10s"), std::string::npos);
}

TEST_F(ServiceTest, BrokenStreamIsADeadAgentAtOnce) {
  auto s = Make(2);
  auto a0 = Attach(*s, 0);
  auto a1 = Attach(*s, 1);
  Join(*s, Node(0, 2, 1));
  Join(*s, Node(1, 2, 1));
  s->DetachAgent(a1.id);
  EXPECT_EQ(s->State(), JobState::kStopped);
  ASSERT_EQ(a0.events->size(), 1u);
  EXPECT_EQ(a0.events->back().kind, JobEvent::Kind::kStop);
  EXPECT_EQ(a0.events->back().root_cause.node_rank, 1);
  EXPECT_EQ(a1.events->size(), 0u);  // its sink is gone with its stream
  EXPECT_EQ(DescribeFailure(*s->RootCause()), "node 1 (host-b): node lost: its distrun disconnected");
}

TEST_F(ServiceTest, SecondStreamForANodeIsRefused) {
  auto s = Make(1);
  Attach(*s, 0);
  uint64_t id = 0;
  Status st = s->AttachAgent(
      0, [](const JobEvent&) {}, &id);
  EXPECT_EQ(st.code, StatusCode::kAlreadyExists);
  EXPECT_EQ(s->AttachAgent(
                 5, [](const JobEvent&) {}, &id)
                .code,
            StatusCode::kInvalidArgument);
}

TEST_F(ServiceTest, FirstFailureIsTheRootCauseAndStopsEveryAgent) {
  auto s = Make(2);
  auto a0 = Attach(*s, 0);
  auto a1 = Attach(*s, 1);
  Join(*s, Node(0, 2, 2));
  Join(*s, Node(1, 2, 2));
  FailedWorker f{1, "host-b", 3, 7, "exited with code 7"};
  bool root = false;
  ASSERT_TRUE(s->ReportFailure(0, f, &root).ok());
  EXPECT_TRUE(root);
  FailedWorker echo{0, "host-a", 0, 143, "killed by SIGTERM"};
  ASSERT_TRUE(s->ReportFailure(0, echo, &root).ok());
  EXPECT_FALSE(root);
  EXPECT_EQ(s->ExitCode(), 7);
  for (const auto* a : {&a0, &a1}) {
    ASSERT_EQ(a->events->size(), 1u);
    EXPECT_EQ(a->events->back().kind, JobEvent::Kind::kStop);
    EXPECT_EQ(a->events->back().exit_code, 7);
    EXPECT_EQ(a->events->back().root_cause.process_id, 3);
  }
  EXPECT_EQ(DescribeFailure(*s->RootCause()), "rank 3 on node 1 (host-b): exited with code 7");
  // An agent attaching after the end hears the stop at once; detaching after the end is no new failure.
  s->DetachAgent(a1.id);
  EXPECT_EQ(s->ExitCode(), 7);
}

TEST_F(ServiceTest, AStreamThatAttachesAfterARestartHearsIt) {
  // Agents send their join beside their stream's first message, so a join may be served first, and a
  // restart may be broadcast before the node's stream is there to hear it.
  auto s = Make(2, /*max_restarts=*/1);
  auto a0 = Attach(*s, 0);
  Join(*s, Node(0, 2, 1));
  auto r1 = Join(*s, Node(1, 2, 1));
  ASSERT_TRUE(r1->status && r1->status->ok());
  bool root = false;
  ASSERT_TRUE(s->ReportFailure(0, FailedWorker{0, "host-a", 0, 3, "exited with code 3"}, &root).ok());
  auto a1 = Attach(*s, 1);
  ASSERT_EQ(a1.events->size(), 1u);
  EXPECT_EQ(a1.events->back().kind, JobEvent::Kind::kRestart);
  EXPECT_EQ(a1.events->back().restart_round, 1);
  EXPECT_EQ(a1.events->back().root_cause.exit_code, 3);
  // Node 0 heard it as it happened, once.
  ASSERT_EQ(a0.events->size(), 1u);
  EXPECT_EQ(a0.events->back().kind, JobEvent::Kind::kRestart);
}

TEST_F(ServiceTest, FailureWithRestartsLeftStartsANewRound) {
  auto s = Make(2, /*max_restarts=*/1);
  auto a0 = Attach(*s, 0);
  auto a1 = Attach(*s, 1);
  Join(*s, Node(0, 2, 1));
  Join(*s, Node(1, 2, 1));
  ASSERT_TRUE(s->KvSet("nccl-id", "old").ok());
  ASSERT_TRUE(s->KvSet("job/step", "1200").ok());
  int64_t counter = 0;
  ASSERT_TRUE(s->KvAdd("job/restarts-seen", 1, &counter).ok());
  bool root = false;
  ASSERT_TRUE(s->ReportFailure(0, FailedWorker{0, "host-a", 0, 3, "exited with code 3"}, &root).ok());
  EXPECT_TRUE(root);
  EXPECT_EQ(s->State(), JobState::kRendezvous);
  EXPECT_EQ(s->CurrentRound(), 1);
  ASSERT_EQ(a1.events->size(), 1u);
  EXPECT_EQ(a1.events->back().kind, JobEvent::Kind::kRestart);
  EXPECT_EQ(a1.events->back().restart_round, 1);
  // The failed round's keys are gone.
  std::optional<std::string> v;
  ASSERT_TRUE(s->KvTryGet("nccl-id", &v).ok());
  EXPECT_FALSE(v.has_value());
  // The job's keys are not.
  ASSERT_TRUE(s->KvTryGet("job/step", &v).ok());
  EXPECT_EQ(v, "1200");
  ASSERT_TRUE(s->KvAdd("job/restarts-seen", 1, &counter).ok());
  EXPECT_EQ(counter, 2);
  std::vector<std::pair<std::string, std::string>> entries;
  ASSERT_TRUE(s->KvList("", &entries).ok());
  EXPECT_EQ(entries.size(), 2u);
  // A join for the old round is stale.
  auto stale = Join(*s, Node(0, 2, 1, 0));
  EXPECT_EQ(stale->status->code, StatusCode::kFailedPrecondition);
  auto r0 = Join(*s, Node(0, 2, 1, 1));
  auto r1 = Join(*s, Node(1, 2, 1, 1));
  ASSERT_TRUE(r1->status && r1->status->ok());
  EXPECT_EQ(r1->assignment.restart_round, 1);
  // No restarts left: the next failure stops the job.
  ASSERT_TRUE(s->ReportFailure(1, FailedWorker{1, "host-b", 1, 9, "killed by SIGKILL"}, &root).ok());
  EXPECT_EQ(s->State(), JobState::kStopped);
  EXPECT_EQ(a0.events->back().kind, JobEvent::Kind::kStop);
  EXPECT_EQ(a0.events->back().exit_code, 9);
}

TEST_F(ServiceTest, EveryNodeSucceedingCompletesTheJob) {
  auto s = Make(2);
  auto a0 = Attach(*s, 0);
  auto a1 = Attach(*s, 1);
  Join(*s, Node(0, 2, 1));
  Join(*s, Node(1, 2, 1));
  ASSERT_TRUE(s->ReportSuccess(1, 0).ok());
  s->DetachAgent(a1.id);  // a finished node may leave
  EXPECT_EQ(s->State(), JobState::kRunning);
  ASSERT_TRUE(s->ReportSuccess(0, 0).ok());
  EXPECT_EQ(s->State(), JobState::kSucceeded);
  EXPECT_EQ(s->ExitCode(), 0);
  EXPECT_EQ(a0.events->back().kind, JobEvent::Kind::kComplete);
}

TEST_F(ServiceTest, KvSetGetTryGetDelete) {
  auto s = Make(1);
  ASSERT_TRUE(s->KvSet("a/1", "x").ok());
  std::optional<std::string> v;
  ASSERT_TRUE(s->KvTryGet("a/1", &v).ok());
  EXPECT_EQ(v, "x");
  ASSERT_TRUE(s->KvTryGet("a/2", &v).ok());
  EXPECT_FALSE(v);
  std::string got;
  s->KvGet("a/1", 1s, [&](const Status& st, const std::string& value) {
    EXPECT_TRUE(st.ok());
    got = value;
  });
  EXPECT_EQ(got, "x");
  bool deleted = false;
  ASSERT_TRUE(s->KvDelete("a/1", &deleted).ok());
  EXPECT_TRUE(deleted);
  ASSERT_TRUE(s->KvDelete("a/1", &deleted).ok());
  EXPECT_FALSE(deleted);
}

TEST_F(ServiceTest, KvGetWaitsForTheKeyOrTimesOut) {
  auto s = Make(1);
  std::optional<Status> first, second;
  std::string value;
  s->KvGet("k", 5s, [&](const Status& st, const std::string& v) {
    first = st;
    value = v;
  });
  s->KvGet("never", 2s, [&](const Status& st, const std::string&) { second = st; });
  EXPECT_FALSE(first);
  ASSERT_TRUE(s->KvSet("k", "v1").ok());
  ASSERT_TRUE(first && first->ok());
  EXPECT_EQ(value, "v1");
  clock.Advance(1999ms);
  s->Tick();
  EXPECT_FALSE(second);
  clock.Advance(1ms);
  s->Tick();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->code, StatusCode::kDeadlineExceeded);
  EXPECT_NE(second->message.find("'never'"), std::string::npos);
}

TEST_F(ServiceTest, KvAddCountsAndRefusesNonIntegers) {
  auto s = Make(1);
  int64_t v = 0;
  ASSERT_TRUE(s->KvAdd("n", 5, &v).ok());
  EXPECT_EQ(v, 5);
  ASSERT_TRUE(s->KvAdd("n", -7, &v).ok());
  EXPECT_EQ(v, -2);
  ASSERT_TRUE(s->KvSet("text", "abc").ok());
  EXPECT_EQ(s->KvAdd("text", 1, &v).code, StatusCode::kFailedPrecondition);
  ASSERT_TRUE(s->KvSet("big", std::to_string(INT64_MAX)).ok());
  EXPECT_EQ(s->KvAdd("big", 1, &v).code, StatusCode::kOutOfRange);
  // Add wakes waiters like Set.
  std::string seen;
  s->KvGet("w", 1s, [&](const Status&, const std::string& value) { seen = value; });
  ASSERT_TRUE(s->KvAdd("w", 3, &v).ok());
  EXPECT_EQ(seen, "3");
}

TEST_F(ServiceTest, KvCompareAndSet) {
  auto s = Make(1);
  CasResult r;
  ASSERT_TRUE(s->KvCompareAndSet("leader", std::nullopt, "rank0", &r).ok());
  EXPECT_TRUE(r.swapped);
  EXPECT_FALSE(r.found);
  ASSERT_TRUE(s->KvCompareAndSet("leader", std::nullopt, "rank1", &r).ok());
  EXPECT_FALSE(r.swapped);
  EXPECT_EQ(r.current, "rank0");
  ASSERT_TRUE(s->KvCompareAndSet("leader", std::string("rank0"), "rank2", &r).ok());
  EXPECT_TRUE(r.swapped);
  EXPECT_EQ(r.current, "rank0");
  ASSERT_TRUE(s->KvCompareAndSet("leader", std::string("rank0"), "rank3", &r).ok());
  EXPECT_FALSE(r.swapped);
  EXPECT_EQ(r.current, "rank2");
}

TEST_F(ServiceTest, KvListByPrefix) {
  auto s = Make(1);
  for (const char* k : {"a/1", "a/2", "ab", "b/1"}) ASSERT_TRUE(s->KvSet(k, k).ok());
  std::vector<std::pair<std::string, std::string>> entries;
  ASSERT_TRUE(s->KvList("a/", &entries).ok());
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].first, "a/1");
  EXPECT_EQ(entries[1].second, "a/2");
  ASSERT_TRUE(s->KvList("", &entries).ok());
  EXPECT_EQ(entries.size(), 4u);
}

TEST_F(ServiceTest, KvSizesAreBounded) {
  auto s = Make(1);  // values up to 64 bytes, 256 bytes in all
  EXPECT_EQ(s->KvSet("", "x").code, StatusCode::kInvalidArgument);
  EXPECT_EQ(s->KvSet(std::string(5000, 'k'), "x").code, StatusCode::kInvalidArgument);
  EXPECT_EQ(s->KvSet("k", std::string(65, 'v')).code, StatusCode::kInvalidArgument);
  ASSERT_TRUE(s->KvSet("k", std::string(64, 'v')).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s->KvSet("k" + std::to_string(i), std::string(60, 'v')).ok());
  Status full = s->KvSet("k9", std::string(64, 'v'));
  EXPECT_EQ(full.code, StatusCode::kResourceExhausted);
  // Overwriting counts the old value out, and deleting makes room.
  EXPECT_TRUE(s->KvSet("k", std::string(60, 'w')).ok());
  bool deleted = false;
  ASSERT_TRUE(s->KvDelete("k0", &deleted).ok());
  EXPECT_TRUE(s->KvSet("k9", std::string(64, 'v')).ok());
}

TEST_F(ServiceTest, BarrierWithCountReleasesEveryoneTogether) {
  auto s = Make(1);
  std::vector<std::optional<Status>> done(3);
  for (int p = 0; p < 3; ++p) {
    s->Barrier("b", p, 3, 5s, [&done, p](const Status& st) { done[static_cast<size_t>(p)] = st; });
    if (p < 2) {
      EXPECT_FALSE(done[0]);
    }
  }
  for (auto& d : done) EXPECT_TRUE(d && d->ok());
  // The name can be used again.
  std::optional<Status> again;
  s->Barrier("b", 0, 1, 5s, [&](const Status& st) { again = st; });
  EXPECT_TRUE(again && again->ok());
}

TEST_F(ServiceTest, BarrierOverAllWorkersNamesWhoIsMissingOnTimeout) {
  auto s = Make(2);
  Join(*s, Node(0, 2, 2));
  Join(*s, Node(1, 2, 2));
  std::vector<std::optional<Status>> done(4);
  for (int p : {0, 1, 3}) {
    s->Barrier("init", p, 0, 5s, [&done, p](const Status& st) { done[static_cast<size_t>(p)] = st; });
  }
  clock.Advance(5s);
  s->Tick();
  for (int p : {0, 1, 3}) {
    ASSERT_TRUE(done[static_cast<size_t>(p)]);
    EXPECT_EQ(done[static_cast<size_t>(p)]->code, StatusCode::kDeadlineExceeded);
  }
  EXPECT_EQ(done[0]->message, "barrier 'init' timed out: 3 of 4 arrived; missing: rank 2 on node 1 (host-b)");
}

TEST_F(ServiceTest, BarrierErrors) {
  auto s = Make(1);
  std::optional<Status> st;
  auto record = [&](const Status& x) { st = x; };
  s->Barrier("all", 0, 0, 1s, record);  // before rendezvous
  EXPECT_EQ(st->code, StatusCode::kFailedPrecondition);
  Join(*s, Node(0, 1, 2));
  s->Barrier("all", 2, 0, 1s, record);
  EXPECT_EQ(st->code, StatusCode::kInvalidArgument);
  EXPECT_NE(st->message.find("rank 2"), std::string::npos);
  s->Barrier("n", 0, 3, 1s, [](const Status&) {});
  s->Barrier("n", 0, 3, 1s, record);
  EXPECT_EQ(st->code, StatusCode::kAlreadyExists);
  s->Barrier("n", 1, 2, 1s, record);
  EXPECT_EQ(st->code, StatusCode::kInvalidArgument);
  EXPECT_NE(st->message.find("rank 0 expects 3"), std::string::npos) << st->message;
  s->Barrier("z", 0, 2, 0ms, record);
  EXPECT_EQ(st->code, StatusCode::kInvalidArgument);
}

TEST_F(ServiceTest, FailureEndsPendingWaits) {
  auto s = Make(1);
  Join(*s, Node(0, 1, 2));
  std::optional<Status> kv, barrier;
  s->KvGet("k", 60s, [&](const Status& st, const std::string&) { kv = st; });
  s->Barrier("b", 0, 0, 60s, [&](const Status& st) { barrier = st; });
  bool root = false;
  ASSERT_TRUE(s->ReportFailure(0, FailedWorker{0, "host-a", 1, 2, "exited with code 2"}, &root).ok());
  ASSERT_TRUE(kv && barrier);
  EXPECT_EQ(kv->code, StatusCode::kAborted);
  EXPECT_NE(barrier->message.find("rank 1 on node 0 (host-a): exited with code 2"), std::string::npos);
}

TEST_F(ServiceTest, ShutdownEndsPendingWaits) {
  auto s = Make(2);
  auto r = Join(*s, Node(0, 2, 1));
  std::optional<Status> kv;
  s->KvGet("k", 60s, [&](const Status& st, const std::string&) { kv = st; });
  s->Shutdown();
  EXPECT_EQ(r->status->code, StatusCode::kUnavailable);
  EXPECT_EQ(kv->code, StatusCode::kUnavailable);
  s->KvGet("k", 60s, [&](const Status& st, const std::string&) { kv = st; });
  EXPECT_EQ(kv->code, StatusCode::kUnavailable);
}

TEST_F(ServiceTest, SuccessReportedTwiceCountsOnce) {
  auto s = Make(2);
  Join(*s, Node(0, 2, 1));
  Join(*s, Node(1, 2, 1));
  ASSERT_TRUE(s->ReportSuccess(0, 0).ok());
  ASSERT_TRUE(s->ReportSuccess(0, 0).ok());
  EXPECT_EQ(s->State(), JobState::kRunning);
  ASSERT_TRUE(s->ReportSuccess(1, 0).ok());
  EXPECT_EQ(s->State(), JobState::kSucceeded);
}

// Tick looks at heartbeat deadlines only once the earliest one passed; a heartbeat moves a deadline later,
// so every node's own deadline must still be honoured.
TEST_F(ServiceTest, EveryNodesHeartbeatDeadlineIsHonoured) {
  auto s = Make(2);
  auto a0 = Attach(*s, 0);
  auto a1 = Attach(*s, 1);
  Join(*s, Node(0, 2, 1));
  Join(*s, Node(1, 2, 1));
  clock.Advance(6s);
  s->Heartbeat(a0.id);
  s->Heartbeat(a1.id);
  clock.Advance(5s);  // past the first deadlines, which both heartbeats moved
  s->Tick();
  EXPECT_EQ(s->State(), JobState::kRunning);
  clock.Advance(4s);
  s->Heartbeat(a0.id);
  clock.Advance(1s);  // node 1's deadline (6s + 10s) passed; node 0's did not
  s->Tick();
  EXPECT_EQ(s->State(), JobState::kStopped);
  EXPECT_EQ(s->RootCause()->node_rank, 1);
}

TEST_F(ServiceTest, NodeThatHadSucceededIsWatchedAgainAfterARestart) {
  auto s = Make(2, /*max_restarts=*/1);
  auto a0 = Attach(*s, 0);
  Attach(*s, 1);
  Join(*s, Node(0, 2, 1));
  Join(*s, Node(1, 2, 1));
  ASSERT_TRUE(s->ReportSuccess(1, 0).ok());
  clock.Advance(11s);  // node 1 is done and stops heartbeating; that is no failure
  s->Heartbeat(a0.id);
  s->Tick();
  EXPECT_EQ(s->State(), JobState::kRunning);
  bool root = false;
  ASSERT_TRUE(s->ReportFailure(0, FailedWorker{0, "host-a", 0, 3, "exited with code 3"}, &root).ok());
  EXPECT_EQ(s->State(), JobState::kRendezvous);
  s->Tick();  // node 1 must rejoin, but has been silent past its deadline
  EXPECT_EQ(s->State(), JobState::kStopped);
  EXPECT_EQ(s->RootCause()->node_rank, 1);
}

TEST_F(ServiceTest, KeyValueWaitsEndEachAtItsOwnDeadline) {
  auto s = Make(1);
  std::optional<Status> a, b, c;
  s->KvGet("a", 1s, [&](const Status& st, const std::string&) { a = st; });
  s->KvGet("b", 3s, [&](const Status& st, const std::string&) { b = st; });
  clock.Advance(1500ms);
  s->Tick();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->code, StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(b);
  s->KvGet("c", 1s, [&](const Status& st, const std::string&) { c = st; });
  clock.Advance(1000ms);
  s->Tick();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->code, StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(b);
  clock.Advance(1000ms);
  s->Tick();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->code, StatusCode::kDeadlineExceeded);
}

TEST_F(ServiceTest, BarrierTimeoutNamesTheFirstMissingWorkersAndCountsTheRest) {
  auto s = Make(3);
  Join(*s, Node(0, 3, 5));
  Join(*s, Node(1, 3, 0));  // no workers: its offset is node 2's
  Join(*s, Node(2, 3, 10));
  std::optional<Status> first, last;
  s->Barrier("big", 0, 0, 5s, [&](const Status& st) { first = st; });
  s->Barrier("big", 14, 0, 2s, [&](const Status& st) { last = st; });
  clock.Advance(2s);  // the earliest deadline of any participant ends the barrier for all
  s->Tick();
  ASSERT_TRUE(first && last);
  EXPECT_EQ(first->code, StatusCode::kDeadlineExceeded);
  EXPECT_EQ(
      first->message,
      "barrier 'big' timed out: 2 of 15 arrived; missing: rank 1 on node 0 (host-a), rank 2 on node 0 "
      "(host-a), rank 3 on node 0 (host-a), rank 4 on node 0 (host-a), rank 5 on node 2 (host-c), rank 6 on "
      "node 2 (host-c), rank 7 on node 2 (host-c), rank 8 on node 2 (host-c) and 5 more");
}

TEST_F(ServiceTest, RejectsImpossibleConfig) {
  ServiceConfig c;
  c.num_nodes = 0;
  EXPECT_THROW(CoordinationService{c}, std::invalid_argument);
}

}  // namespace
}  // namespace distrun
