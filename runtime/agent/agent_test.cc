// Agents against a real server on 127.0.0.1:0, as distrun processes on several nodes would use them.

#include "runtime/agent/agent.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <future>
#include <thread>

#include "runtime/io/listening_socket.h"
#include "runtime/transport/grpc_client.h"
#include "runtime/transport/grpc_server.h"
#include "runtime/transport/test_node0.h"
#include "runtime/transport/test_slow_proxy.h"

namespace distrun {
namespace {

using namespace std::chrono_literals;

constexpr char kToken[] = "agent-test-token";

class AgentTest : public ::testing::Test {
 protected:
  void StartServer(int nodes, int max_restarts = 0) {
    ServiceConfig sc = testing::TestServiceConfig(nodes);
    sc.max_restarts = max_restarts;
    service = std::make_unique<CoordinationService>(sc);
    server = std::make_unique<GrpcServer>(*service, testing::TestGrpcServerConfig(kToken));
  }

  std::unique_ptr<Agent> MakeAgent(int node, int nodes, int workers) {
    AgentConfig c;
    c.coordinator_address = server->address();
    c.token = kToken;
    c.join.node_rank = node;
    c.join.num_nodes = nodes;
    c.join.host = "host" + std::to_string(node);
    c.join.local_workers = workers;
    c.initialization_timeout = 10s;
    c.heartbeat_interval = 50ms;
    c.heartbeat_timeout = 5s;
    return std::make_unique<Agent>(c);
  }

  // Joins every agent at once, as separate processes would.
  static std::vector<NodeAssignment> JoinAll(const std::vector<Agent*>& agents, int round = 0) {
    std::vector<std::future<std::pair<Status, NodeAssignment>>> joins;
    for (Agent* a : agents) {
      joins.push_back(std::async(std::launch::async, [a, round] {
        NodeAssignment out;
        Status s = a->Join(round, &out);
        return std::make_pair(s, out);
      }));
    }
    std::vector<NodeAssignment> result;
    for (auto& j : joins) {
      auto [s, a] = j.get();
      EXPECT_TRUE(s.ok()) << s.message;
      result.push_back(a);
    }
    return result;
  }

  // What the supervisor's poll loop does with the agent's fd.
  static std::vector<JobEvent> PollEvents(Agent& agent, std::chrono::milliseconds timeout = 5s) {
    pollfd p{agent.event_fd(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) != 1) return {};
    return agent.TakeEvents();
  }

  void LoseNode0ThenItsStandby(bool while_joining);

  void TearDown() override {
    server.reset();
    service.reset();
  }

  std::unique_ptr<CoordinationService> service;
  std::unique_ptr<GrpcServer> server;
};

TEST_F(AgentTest, RendezvousThenAFailureStopsEveryNode) {
  StartServer(2);
  auto a0 = MakeAgent(0, 2, 2);
  auto a1 = MakeAgent(1, 2, 1);
  auto assignments = JoinAll({a0.get(), a1.get()});
  EXPECT_EQ(assignments[1].rank_offset, 2);
  EXPECT_EQ(assignments[1].num_processes, 3);
  bool root = false;
  ASSERT_TRUE(a1->ReportFailure(FailedWorker{1, "host1", 2, 5, "exited with code 5"}, &root).ok());
  EXPECT_TRUE(root);
  auto events = PollEvents(*a0);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, JobEvent::Kind::kStop);
  EXPECT_EQ(events[0].exit_code, 5);
  EXPECT_EQ(DescribeFailure(events[0].root_cause), "rank 2 on node 1 (host1): exited with code 5");
  auto own = a1->WaitForEvent(5s);
  ASSERT_TRUE(own);
  EXPECT_EQ(own->kind, JobEvent::Kind::kStop);
}

TEST_F(AgentTest, EachNodesHeartbeatRoundTripsReachNode0) {
  StartServer(2);
  auto a0 = MakeAgent(0, 2, 1);
  auto a1 = MakeAgent(1, 2, 1);
  JoinAll({a0.get(), a1.get()});
  // Every 50 ms a heartbeat; each reports the one before it.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  JobStatusView view;
  while (std::chrono::steady_clock::now() < deadline) {
    view = service->Overview();
    if (view.round_trips.size() == 2 && view.round_trips[0].round_trips.count() >= 3 &&
        view.round_trips[1].round_trips.count() >= 3)
      break;
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(view.round_trips.size(), 2u);
  for (int node = 0; node < 2; ++node) {
    const NodeRoundTrips& n = view.round_trips[static_cast<size_t>(node)];
    EXPECT_EQ(n.node, node);
    EXPECT_EQ(n.host, "host" + std::to_string(node));
    ASSERT_GE(n.round_trips.count(), 3u);
    // Measured, not made up: each round trip took some time, and less than the heartbeat timeout.
    EXPECT_GT(n.round_trips.sum_seconds(), 0);
    EXPECT_LT(n.round_trips.sum_seconds() / static_cast<double>(n.round_trips.count()), 5.0);
    EXPECT_EQ(n.round_trips.AtMost(RoundTrips::kBounds.size() - 1), n.round_trips.count());
  }
}

TEST_F(AgentTest, ANoticeOfAnArrivalKeepsTheAgentsBeating) {
  ServiceConfig sc;
  sc.num_nodes = 2;
  sc.run_id = "r";
  sc.elastic = ElasticRange{2, 3, ElasticPolicy::kResize, ScaleUp::kNextRestart};
  sc.heartbeat_timeout = 600ms;
  service = std::make_unique<CoordinationService>(sc);
  server = std::make_unique<GrpcServer>(*service, testing::TestGrpcServerConfig(kToken));
  auto a0 = MakeAgent(0, 2, 1);
  auto a1 = MakeAgent(1, 2, 1);
  JoinAll({a0.get(), a1.get()});
  auto late_config = [&] {
    AgentConfig c;
    c.coordinator_address = server->address();
    c.token = kToken;
    c.join.node_rank = -1;
    c.join.arriving = true;
    c.join.run_id = "r";
    c.join.host = "late";
    c.join.local_workers = 1;
    c.heartbeat_interval = 50ms;
    c.heartbeat_timeout = 600ms;
    return c;
  }();
  Agent late(late_config);
  NodeAssignment spare;
  ASSERT_TRUE(late.Join(0, &spare).ok());
  EXPECT_TRUE(spare.spare);
  EXPECT_EQ(spare.agent, 2);
  auto events = PollEvents(*a0);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, JobEvent::Kind::kNotice);
  // Past the heartbeat timeout, everyone is still in the job: the notice ended nobody's heartbeats.
  std::this_thread::sleep_for(1200ms);
  EXPECT_EQ(service->State(), JobState::kRunning);
  EXPECT_TRUE(PollEvents(*a1, 0ms).size() <= 1);  // its own notice, nothing else
  EXPECT_TRUE(PollEvents(late, 0ms).empty());
}

TEST_F(AgentTest, TheStandbyHoldsTheJobAndEveryWriteOfAJobKeyWaitsForIt) {
  ServiceConfig sc = testing::TestServiceConfig(3);
  sc.run_id = "r";
  sc.worker_token = "w";
  sc.elastic = ElasticRange{2, 3, ElasticPolicy::kResize, ScaleUp::kNextRestart};
  service = std::make_unique<CoordinationService>(sc);
  server = std::make_unique<GrpcServer>(*service, testing::TestGrpcServerConfig(kToken));
  auto a0 = MakeAgent(0, 3, 1);
  auto a1 = MakeAgent(1, 3, 1);
  auto a2 = MakeAgent(2, 3, 1);
  auto assignments = JoinAll({a0.get(), a1.get(), a2.get()});
  ASSERT_EQ(assignments[2].standby_agent, 1);  // the first seated node on another host than node 0's
  // A worker's write through gRPC is answered once node 1's distrun applied it.
  GrpcClientConfig cc;
  cc.address = server->address();
  cc.token = kToken;
  GrpcClient worker(cc);
  ASSERT_TRUE(worker.KvSet("job/step", "7").ok());
  std::optional<ServiceSnapshot> copy = a1->StandbyCopy();
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->job_keys.at("job/step"), "7");
  int64_t added = 0;
  ASSERT_TRUE(worker.KvAdd("job/count", 2, &added).ok());
  EXPECT_EQ(added, 2);
  bool deleted = false;
  ASSERT_TRUE(worker.KvDelete("job/step", &deleted).ok());
  EXPECT_TRUE(deleted);
  CasResult cas;
  ASSERT_TRUE(worker.KvCompareAndSet("job/count", std::string("2"), "3", &cas).ok());
  EXPECT_TRUE(cas.swapped);
  EXPECT_EQ(a1->StandbyCopy(), service->Snapshot());
  EXPECT_FALSE(a2->StandbyCopy());  // only the standby gets updates
  EXPECT_FALSE(a0->StandbyCopy());
}

// Node 0 is lost, then its standby, which took the job over: either once epoch 1 runs, or while the last
// agent still waits in epoch 1's rendezvous (the standby's host lost a moment after node 0's).
void AgentTest::LoseNode0ThenItsStandby(bool while_joining) {
  ServiceConfig sc = testing::TestServiceConfig(3);
  sc.run_id = "r";
  sc.worker_token = "w";
  sc.heartbeat_timeout = 2s;
  sc.elastic = ElasticRange{2, 3, ElasticPolicy::kResize, ScaleUp::kNextRestart};
  service = std::make_unique<CoordinationService>(sc);
  server = std::make_unique<GrpcServer>(*service, testing::TestGrpcServerConfig(kToken));
  // The standby's port is bound from the start; its service exists only once node 0 is lost.
  auto standby_port = std::make_shared<ListeningSocket>(ListeningSocket::Open("127.0.0.1", 0));
  const std::string standby_address = "127.0.0.1:" + std::to_string(standby_port->port());
  // Node 2 reaches the standby through a proxy: its end is the standby host's death as node 2 sees it, the
  // connection closed with nothing answered (the standby's own shutdown would answer a pending join).
  auto proxy = std::make_unique<testing::SlowProxy>(standby_port->port(), 0ms);
  const std::string proxied_address = "127.0.0.1:" + std::to_string(proxy->port());
  std::unique_ptr<CoordinationService> standby_service;
  std::unique_ptr<GrpcServer> standby_server;
  std::unique_ptr<Agent> a1;
  std::atomic<int> asked{0};
  auto make = [&](int node, std::function<std::optional<FailoverTarget>(const std::string&)> hook) {
    AgentConfig c;
    c.coordinator_address = server->address();
    c.token = kToken;
    c.join.node_rank = node;
    c.join.num_nodes = 3;
    c.join.host = "host" + std::to_string(node);
    c.join.local_workers = 1;
    c.initialization_timeout = 10s;
    c.heartbeat_interval = 50ms;
    c.heartbeat_timeout = 2s;
    c.on_coordinator_lost = std::move(hook);
    return std::make_unique<Agent>(c);
  };
  auto a0 = make(0, nullptr);
  a1 = make(1, [&](const std::string&) -> std::optional<FailoverTarget> {
    ++asked;
    if (standby_service) return std::nullopt;  // once
    ServiceConfig c = sc;
    c.worker_token.clear();
    c.resume = a1->StandbyCopy();
    c.host_agent = 1;
    standby_service = std::make_unique<CoordinationService>(c);
    GrpcServerConfig gc = testing::TestGrpcServerConfig(kToken);
    gc.listen = standby_port;
    standby_server = std::make_unique<GrpcServer>(*standby_service, gc);
    return FailoverTarget{standby_address, standby_service.get(), nullptr};
  });
  bool a2_turned = false;
  auto a2 = make(2, [&](const std::string&) -> std::optional<FailoverTarget> {
    if (std::exchange(a2_turned, true)) return std::nullopt;
    return FailoverTarget{proxied_address, nullptr, nullptr};
  });
  auto first = JoinAll({a0.get(), a1.get(), a2.get()});
  ASSERT_EQ(first[2].standby_agent, 1);
  ASSERT_TRUE(service->KvSet("job/step", "7").ok());
  for (int i = 0; i < 200 && !(a1->StandbyCopy() && a1->StandbyCopy()->job_keys.contains("job/step")); ++i)
    std::this_thread::sleep_for(10ms);

  // Node 0's distrun dies: its port closes before its agent could say anything.
  server.reset();
  a0.reset();
  service.reset();
  // Both others turn to the standby, whose service takes over when both reached it.
  for (Agent* a : {a1.get(), a2.get()}) {
    std::optional<JobEvent> turned = a->WaitForEvent(5s);  // for the supervisor: its workers end now
    ASSERT_TRUE(turned);
    ASSERT_EQ(turned->kind, JobEvent::Kind::kFailover);
    const std::string& reached = a == a1.get() ? standby_address : proxied_address;
    EXPECT_NE(turned->notice.find("its standby at " + reached + " takes the job over"), std::string::npos)
        << turned->notice;
    std::optional<JobEvent> e = a->WaitForEvent(5s);
    ASSERT_TRUE(e);
    ASSERT_EQ(e->kind, JobEvent::Kind::kRestart) << e->root_cause.description;
    EXPECT_EQ(e->restart_round, 1);
    EXPECT_NE(e->root_cause.description.find("its standby, node 1 (host1), took over with 2 node(s)"),
              std::string::npos)
        << e->root_cause.description;
  }
  EXPECT_EQ(a2->coordinator_address(), proxied_address);
  if (while_joining) {
    auto join = std::async(std::launch::async, [&] {
      NodeAssignment out;
      return a2->Join(1, &out);
    });
    EXPECT_EQ(join.wait_for(200ms), std::future_status::timeout);  // it waits for node 1's join
    proxy.reset();
    Status s = join.get();
    EXPECT_EQ(s.code, StatusCode::kUnavailable);
    EXPECT_TRUE(s.message.starts_with("lost the coordinator at " + proxied_address)) << s.message;
    EXPECT_NE(s.message.find("(its standby, after the coordinator at"), std::string::npos) << s.message;
    std::optional<JobEvent> end = a2->WaitForEvent(5s);
    ASSERT_TRUE(end);
    EXPECT_EQ(end->kind, JobEvent::Kind::kStop);
    EXPECT_EQ(end->root_cause.description, s.message);
    return;
  }
  auto second = JoinAll({a1.get(), a2.get()}, 1);
  EXPECT_EQ(second[0].num_nodes, 2);
  EXPECT_EQ(second[1].num_processes, 2);
  EXPECT_EQ(second[1].worker_token, "w");
  std::optional<std::string> v;
  ASSERT_TRUE(standby_service->KvTryGet("job/step", &v).ok());
  EXPECT_EQ(v, "7");  // a key of epoch 0, in epoch 1
  EXPECT_EQ(asked.load(), 1);

  // Losing the new coordinator's host too, the last agent has nowhere left to turn: the job ends for it,
  // naming both losses.
  standby_server.reset();
  a1.reset();
  standby_service.reset();
  std::optional<JobEvent> end = a2->WaitForEvent(5s);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->kind, JobEvent::Kind::kStop);
  EXPECT_TRUE(end->coordinator_lost);
  EXPECT_NE(end->root_cause.description.find("lost the coordinator at " + proxied_address), std::string::npos)
      << end->root_cause.description;
  EXPECT_NE(end->root_cause.description.find("its standby, after the coordinator at"), std::string::npos)
      << end->root_cause.description;
}

TEST_F(AgentTest, WhenNode0IsLostTheAgentsTurnToTheStandbyWhichTakesTheJobOver) {
  LoseNode0ThenItsStandby(/*while_joining=*/false);
}

TEST_F(AgentTest, AJoinCutShortByTheStandbysLossNamesBothLosses) { LoseNode0ThenItsStandby(true); }

TEST_F(AgentTest, AgentGoneStopsTheOthers) {
  StartServer(2);
  auto a0 = MakeAgent(0, 2, 1);
  auto a1 = MakeAgent(1, 2, 1);
  JoinAll({a0.get(), a1.get()});
  a1.reset();  // its distrun died
  auto events = PollEvents(*a0);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, JobEvent::Kind::kStop);
  EXPECT_EQ(events[0].root_cause.node_rank, 1);
}

TEST_F(AgentTest, CoordinatorDeathStopsEveryAgent) {
  StartServer(1);
  auto a0 = MakeAgent(0, 1, 1);
  JoinAll({a0.get()});
  server.reset();
  auto events = PollEvents(*a0);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, JobEvent::Kind::kStop);
  EXPECT_EQ(events[0].exit_code, kLostAgentExitCode);
  EXPECT_NE(events[0].root_cause.description.find("lost the coordinator at 127.0.0.1:"), std::string::npos)
      << events[0].root_cause.description;
}

TEST_F(AgentTest, NoCoordinatorIsAStopAfterTheInitializationTimeout) {
  AgentConfig c;
  c.coordinator_address = "127.0.0.1:1";  // nothing listens there
  c.token = kToken;
  c.join.num_nodes = 1;
  c.initialization_timeout = 300ms;
  c.heartbeat_interval = 50ms;
  Agent agent(c);
  auto e = agent.WaitForEvent(5s);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, JobEvent::Kind::kStop);
  EXPECT_NE(e->root_cause.description.find("127.0.0.1:1"), std::string::npos);
}

TEST_F(AgentTest, EveryNodeSucceedingCompletesTheJob) {
  StartServer(2);
  auto a0 = MakeAgent(0, 2, 1);
  auto a1 = MakeAgent(1, 2, 1);
  JoinAll({a0.get(), a1.get()});
  ASSERT_TRUE(a0->ReportSuccess().ok());
  ASSERT_TRUE(a1->ReportSuccess().ok());
  for (Agent* a : {a0.get(), a1.get()}) {
    auto e = a->WaitForEvent(5s);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->kind, JobEvent::Kind::kComplete);
  }
  EXPECT_EQ(service->ExitCode(), 0);
}

TEST_F(AgentTest, RestartRoundRejoins) {
  StartServer(2, /*max_restarts=*/1);
  auto a0 = MakeAgent(0, 2, 1);
  auto a1 = MakeAgent(1, 2, 1);
  JoinAll({a0.get(), a1.get()});
  bool root = false;
  ASSERT_TRUE(a0->ReportFailure(FailedWorker{0, "host0", 0, 3, "exited with code 3"}, &root).ok());
  for (Agent* a : {a0.get(), a1.get()}) {
    auto e = a->WaitForEvent(5s);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->kind, JobEvent::Kind::kRestart);
    EXPECT_EQ(e->restart_round, 1);
  }
  auto again = JoinAll({a0.get(), a1.get()}, 1);
  EXPECT_EQ(again[0].restart_round, 1);
  ASSERT_TRUE(a1->ReportFailure(FailedWorker{1, "host1", 1, 4, "exited with code 4"}, &root).ok());
  auto e = a0->WaitForEvent(5s);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, JobEvent::Kind::kStop);
  EXPECT_EQ(e->exit_code, 4);
}

TEST(HeartbeatInterval, FiveTimesPerTimeoutAtMostOnceASecondAndSlowerInBigJobs) {
  using std::chrono::milliseconds;
  EXPECT_EQ(HeartbeatInterval(milliseconds(10'000), 1), milliseconds(1000));
  EXPECT_EQ(HeartbeatInterval(milliseconds(2'000), 4), milliseconds(400));
  EXPECT_EQ(HeartbeatInterval(milliseconds(100), 1), milliseconds(33));  // a third of the timeout at least
  EXPECT_EQ(HeartbeatInterval(milliseconds(100'000), 10'000), milliseconds(5'000));
  EXPECT_EQ(HeartbeatInterval(milliseconds(10'000), 100'000), milliseconds(3'333));
}

TEST(ProgressToSendTest, AFreshViewIsAgedAndAStaleOneNotSent) {
  const auto read_at = std::chrono::steady_clock::time_point{} + 1000s;
  NodeProgress p;
  RankProgress r;
  r.rank = 3;
  r.step = 7;
  r.advanced_ms_ago = 40;
  r.reported_ms_ago = 40;
  p.ranks = {r};
  EXPECT_FALSE(ProgressToSend(std::nullopt, read_at, read_at));
  std::optional<NodeProgress> sent = ProgressToSend(p, read_at, read_at + 600ms);
  ASSERT_TRUE(sent);
  ASSERT_EQ(sent->ranks.size(), 1u);
  EXPECT_EQ(sent->ranks[0].advanced_ms_ago, 640);
  EXPECT_TRUE(ProgressToSend(p, read_at, read_at + kProgressFreshFor));
  // Not read again for 3 s (this process was stopped): sending it would show a healthy rank 3 s still.
  EXPECT_FALSE(ProgressToSend(p, read_at, read_at + 3s));
}

}  // namespace
}  // namespace distrun
