// The transport with a real server on 127.0.0.1:0 and real clients in this process.

#include "runtime/transport/grpc_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "detect/errors.h"
#include "runtime/transport/grpc_client.h"
#include "runtime/transport/test_node0.h"
#include "runtime/transport/test_slow_proxy.h"

namespace distrun {
namespace {

using namespace std::chrono_literals;

constexpr char kToken[] = "s3cret-job-token-4711";

// Collects a stream's events; waits have timeouts so a broken test fails instead of hanging.
class EventLog {
 public:
  std::function<void(const JobEvent&)> Sink() {
    return [this](const JobEvent& e) {
      std::lock_guard lock(mu_);
      events_.push_back(e);
      cv_.notify_all();
    };
  }
  std::function<void(const Status&)> Closed() {
    return [this](const Status& s) {
      std::lock_guard lock(mu_);
      closed_ = s;
      cv_.notify_all();
    };
  }
  // The first event of `kind`, if one arrives in time.
  std::optional<JobEvent> WaitFor(JobEvent::Kind kind, std::chrono::milliseconds timeout = 5s) {
    std::unique_lock lock(mu_);
    std::optional<JobEvent> found;
    cv_.wait_for(lock, timeout, [&] {
      for (const auto& e : events_) {
        if (e.kind == kind) {
          found = e;
          return true;
        }
      }
      return false;
    });
    return found;
  }
  void Clear() {
    std::lock_guard lock(mu_);
    events_.clear();
  }
  std::optional<Status> WaitClosed(std::chrono::milliseconds timeout = 5s) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return closed_.has_value(); });
    return closed_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<JobEvent> events_;
  std::optional<Status> closed_;
};

// Heartbeats until one is answered: the stream's first message may still be on its way, and a heartbeat
// sent meanwhile is skipped.
bool Answered(LivenessStream& stream, EventLog& events) {
  for (int i = 0; i < 100; ++i) {
    if (!stream.SendHeartbeat({})) return false;
    if (events.WaitFor(JobEvent::Kind::kHeartbeat, 50ms)) return true;
  }
  return false;
}

class GrpcTest : public ::testing::Test {
 protected:
  void StartServer(int nodes, size_t max_message_bytes = 1 << 20, int max_restarts = 0) {
    ServiceConfig sc = testing::TestServiceConfig(nodes);
    sc.max_restarts = max_restarts;
    sc.run_id = "r1";
    service = std::make_unique<CoordinationService>(sc);
    GrpcServerConfig gc = testing::TestGrpcServerConfig(kToken);
    gc.max_message_bytes = max_message_bytes;
    gc.log = testing::StreamLogger("grpc-test", log_text);
    server = std::make_unique<GrpcServer>(*service, gc);
  }

  std::unique_ptr<GrpcClient> Client(const std::string& token = kToken, int epoch = -1) {
    GrpcClientConfig c;
    c.address = server->address();
    c.token = token;
    c.epoch = epoch;
    c.call_timeout = 5s;
    return std::make_unique<GrpcClient>(c);
  }

  static NodeJoin Node(int rank, int nodes, int workers) {
    NodeJoin j;
    j.node_rank = rank;
    j.num_nodes = nodes;
    j.host = "host" + std::to_string(rank);
    j.local_workers = workers;
    j.run_id = "r1";
    j.proposed_master_port = 1234;
    return j;
  }

  void TearDown() override {
    server.reset();
    service.reset();
  }

  std::ostringstream log_text;
  std::unique_ptr<CoordinationService> service;
  std::unique_ptr<GrpcServer> server;
};

TEST_F(GrpcTest, KeyValueRoundTrip) {
  StartServer(1);
  auto c = Client();
  ASSERT_TRUE(c->KvSet("a/x", std::string("bin\0ary", 7)).ok());
  std::string v;
  ASSERT_TRUE(c->KvGet("a/x", 1s, &v).ok());
  EXPECT_EQ(v, std::string("bin\0ary", 7));
  std::optional<std::string> maybe;
  ASSERT_TRUE(c->KvTryGet("a/none", &maybe).ok());
  EXPECT_FALSE(maybe);
  int64_t n = 0;
  ASSERT_TRUE(c->KvAdd("a/n", 41, &n).ok());
  ASSERT_TRUE(c->KvAdd("a/n", 1, &n).ok());
  EXPECT_EQ(n, 42);
  CasResult cas;
  ASSERT_TRUE(c->KvCompareAndSet("a/leader", std::nullopt, "me", &cas).ok());
  EXPECT_TRUE(cas.swapped);
  ASSERT_TRUE(c->KvCompareAndSet("a/leader", std::string("you"), "me2", &cas).ok());
  EXPECT_FALSE(cas.swapped);
  EXPECT_EQ(cas.current, "me");
  std::vector<std::pair<std::string, std::string>> entries;
  ASSERT_TRUE(c->KvList("a/", &entries).ok());
  EXPECT_EQ(entries.size(), 3u);
  bool deleted = false;
  ASSERT_TRUE(c->KvDelete("a/x", &deleted).ok());
  EXPECT_TRUE(deleted);
  Status bad = c->KvAdd("a/leader", 1, &n);
  EXPECT_EQ(bad.code, StatusCode::kFailedPrecondition);
  EXPECT_NE(bad.message.find("a/leader"), std::string::npos);
}

TEST_F(GrpcTest, KvGetWaitsForAnotherClient) {
  StartServer(1);
  auto reader = Client();
  auto writer = Client();
  auto got = std::async(std::launch::async, [&] {
    std::string v;
    Status s = reader->KvGet("late", 5s, &v);
    return std::make_pair(s, v);
  });
  std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(writer->KvSet("late", "here").ok());
  auto [status, value] = got.get();
  EXPECT_TRUE(status.ok()) << status.message;
  EXPECT_EQ(value, "here");
  std::string v;
  Status timeout = reader->KvGet("never", 100ms, &v);
  EXPECT_EQ(timeout.code, StatusCode::kDeadlineExceeded);
  EXPECT_NE(timeout.message.find("'never'"), std::string::npos);
}

TEST_F(GrpcTest, BarrierAcrossClients) {
  StartServer(1);
  std::vector<std::future<Status>> arrivals;
  for (int p = 0; p < 3; ++p) {
    arrivals.push_back(
        std::async(std::launch::async, [this, p] { return Client()->Barrier("b", p, 3, 5s); }));
  }
  for (auto& a : arrivals) EXPECT_TRUE(a.get().ok());
  Status lonely = Client()->Barrier("b2", 0, 2, 100ms);
  EXPECT_EQ(lonely.code, StatusCode::kDeadlineExceeded);
}

TEST_F(GrpcTest, MissingOrWrongTokenIsRefusedAndNeverLogged) {
  StartServer(1);
  auto wrong = Client("guess-1234567");
  auto none = Client("");
  EXPECT_EQ(wrong->KvSet("k", "v").code, StatusCode::kUnauthenticated);
  EXPECT_EQ(none->KvSet("k", "v").code, StatusCode::kUnauthenticated);
  NodeAssignment a;
  EXPECT_EQ(wrong->Join(Node(0, 1, 1), 1s, &a).code, StatusCode::kUnauthenticated);
  EventLog events;
  auto stream = wrong->OpenLiveness(0, events.Sink(), events.Closed());
  auto closed = events.WaitClosed();
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->code, StatusCode::kUnauthenticated);
  std::optional<std::string> v;
  ASSERT_TRUE(Client()->KvTryGet("k", &v).ok());
  EXPECT_FALSE(v);  // the refused set did nothing
  EXPECT_EQ(server->refused_calls(), 4u);
  std::string log = log_text.str();
  EXPECT_NE(log.find("refused a KvSet call from 127.0.0.1:"), std::string::npos) << log;
  EXPECT_EQ(log.find(kToken), std::string::npos);
  EXPECT_EQ(log.find("guess-1234567"), std::string::npos);
}

TEST_F(GrpcTest, JoinLivenessAndFailurePropagation) {
  StartServer(2);
  auto c0 = Client();
  auto c1 = Client();
  EventLog e0, e1;
  auto s0 = c0->OpenLiveness(0, e0.Sink(), e0.Closed());
  auto s1 = c1->OpenLiveness(1, e1.Sink(), e1.Closed());
  auto join1 = std::async(std::launch::async, [&] {
    NodeAssignment a;
    Status s = c1->Join(Node(1, 2, 3), 10s, &a);
    return std::make_pair(s, a);
  });
  NodeAssignment a0;
  ASSERT_TRUE(c0->Join(Node(0, 2, 2), 10s, &a0).ok());
  auto [st1, a1] = join1.get();
  ASSERT_TRUE(st1.ok()) << st1.message;
  EXPECT_EQ(a0.rank_offset, 0);
  EXPECT_EQ(a1.rank_offset, 2);
  EXPECT_EQ(a1.num_processes, 5);
  EXPECT_EQ(a1.master_port, 1234);
  EXPECT_EQ(a1.process0_host, "host0");

  EXPECT_TRUE(Answered(*s0, e0));

  bool root = false;
  ASSERT_TRUE(c1->ReportFailure(0, FailedWorker{1, "host1", 3, 9, "killed by SIGKILL"}, &root).ok());
  EXPECT_TRUE(root);
  for (EventLog* e : {&e0, &e1}) {
    auto stop = e->WaitFor(JobEvent::Kind::kStop);
    ASSERT_TRUE(stop);
    EXPECT_EQ(stop->exit_code, 9);
    EXPECT_EQ(stop->root_cause.process_id, 3);
    EXPECT_EQ(stop->root_cause.host, "host1");
  }
}

TEST_F(GrpcTest, NodesJoinOnTheirLivenessStreams) {
  StartServer(2, 1 << 20, /*max_restarts=*/1);
  auto c0 = Client();
  auto c1 = Client();
  EventLog e0, e1;
  auto s1 = c1->OpenLiveness(1, e1.Sink(), e1.Closed(), Node(1, 2, 3));
  EXPECT_FALSE(e1.WaitFor(JobEvent::Kind::kJoined, 100ms)) << "answered before every node joined";
  auto s0 = c0->OpenLiveness(0, e0.Sink(), e0.Closed(), Node(0, 2, 2));
  auto j0 = e0.WaitFor(JobEvent::Kind::kJoined);
  auto j1 = e1.WaitFor(JobEvent::Kind::kJoined);
  ASSERT_TRUE(j0 && j1);
  ASSERT_TRUE(j1->join_status.ok()) << j1->join_status.message;
  EXPECT_EQ(j0->assignment.rank_offset, 0);
  EXPECT_EQ(j1->assignment.rank_offset, 2);
  EXPECT_EQ(j1->assignment.num_processes, 5);
  EXPECT_EQ(j1->assignment.master_port, 1234);

  // A restart: both join round 1 on the same streams.
  bool root = false;
  ASSERT_TRUE(c0->ReportFailure(0, FailedWorker{0, "host0", 1, 3, "exited with code 3"}, &root).ok());
  ASSERT_TRUE(e1.WaitFor(JobEvent::Kind::kRestart));
  NodeJoin again0 = Node(0, 2, 2), again1 = Node(1, 2, 3);
  again0.restart_round = again1.restart_round = 1;
  EventLog* logs[] = {&e0, &e1};
  for (EventLog* e : logs) e->Clear();
  ASSERT_TRUE(s0->SendJoin(again0));
  ASSERT_TRUE(s1->SendJoin(again1));
  auto r1 = e1.WaitFor(JobEvent::Kind::kJoined);
  ASSERT_TRUE(r1 && r1->join_status.ok());
  EXPECT_EQ(r1->assignment.restart_round, 1);
}

TEST_F(GrpcTest, AWorkersCallsOfAnEarlierEpochAreRefused) {
  StartServer(1, 1 << 20, /*max_restarts=*/1);
  auto agent = Client();
  EventLog events;
  auto stream = agent->OpenLiveness(0, events.Sink(), events.Closed(), Node(0, 1, 1));
  ASSERT_TRUE(events.WaitFor(JobEvent::Kind::kJoined));
  auto old_worker = Client(kToken, 0);
  ASSERT_TRUE(old_worker->KvSet("k", "epoch 0").ok());
  bool root = false;
  ASSERT_TRUE(agent->ReportFailure(0, FailedWorker{0, "host0", 0, 3, "exited with code 3"}, &root).ok());
  ASSERT_TRUE(events.WaitFor(JobEvent::Kind::kRestart));
  // The job is in epoch 1: a worker of epoch 0 that still runs changes nothing, and is told why.
  Status s = old_worker->KvSet("k", "stale");
  EXPECT_EQ(s.code, StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message,
            "fenced: this worker belongs to epoch 0, but the job is in epoch 1; a worker of an earlier epoch "
            "must stop");
  EXPECT_EQ(old_worker->Barrier("b", 0, 1, 1s).code, StatusCode::kFailedPrecondition);
  // A new epoch's worker, and a shell that names no epoch, go through.
  EXPECT_TRUE(Client(kToken, 1)->KvSet("k", "epoch 1").ok());
  std::optional<std::string> v;
  ASSERT_TRUE(Client()->KvTryGet("k", &v).ok());
  EXPECT_EQ(v, "epoch 1");
}

TEST_F(GrpcTest, SuccessReportedOnTheStreamsCompletesTheJob) {
  StartServer(2);
  auto c0 = Client();
  auto c1 = Client();
  EventLog e0, e1;
  auto s0 = c0->OpenLiveness(0, e0.Sink(), e0.Closed(), Node(0, 2, 1));
  auto s1 = c1->OpenLiveness(1, e1.Sink(), e1.Closed(), Node(1, 2, 1));
  ASSERT_TRUE(e0.WaitFor(JobEvent::Kind::kJoined) && e1.WaitFor(JobEvent::Kind::kJoined));
  ASSERT_TRUE(s0->SendSuccess(0));
  EXPECT_FALSE(e1.WaitFor(JobEvent::Kind::kComplete, 100ms)) << "complete before every node succeeded";
  ASSERT_TRUE(s1->SendSuccess(0));
  EXPECT_TRUE(e0.WaitFor(JobEvent::Kind::kComplete));
  EXPECT_TRUE(e1.WaitFor(JobEvent::Kind::kComplete));
  EXPECT_EQ(service->State(), JobState::kSucceeded);
}

TEST_F(GrpcTest, AJoinOnTheStreamThatIsRefusedSaysWhy) {
  StartServer(2);
  auto c = Client();
  EventLog events;
  auto stream = c->OpenLiveness(0, events.Sink(), events.Closed(), Node(0, 3, 1));  // the job has 2 nodes
  auto answer = events.WaitFor(JobEvent::Kind::kJoined);
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->join_status.code, StatusCode::kInvalidArgument);
  EXPECT_NE(answer->join_status.message.find("expects 3 nodes, but the job has 2"), std::string::npos)
      << answer->join_status.message;
}

TEST_F(GrpcTest, AStreamCannotJoinForAnotherNode) {
  StartServer(2);
  auto c = Client();
  EventLog events;
  auto stream = c->OpenLiveness(0, events.Sink(), events.Closed());
  ASSERT_TRUE(Answered(*stream, events));
  ASSERT_TRUE(stream->SendJoin(Node(1, 2, 1)));
  std::optional<Status> closed = events.WaitClosed();
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->code, StatusCode::kInvalidArgument);
  EXPECT_NE(closed->message.find("node 0's liveness stream joined as node 1"), std::string::npos)
      << closed->message;
}

TEST_F(GrpcTest, BrokenStreamStopsTheJobAtOnce) {
  StartServer(2);
  auto c0 = Client();
  auto c1 = Client();
  EventLog e0, e1;
  auto s0 = c0->OpenLiveness(0, e0.Sink(), e0.Closed());
  auto s1 = c1->OpenLiveness(1, e1.Sink(), e1.Closed());
  // Both streams are attached once each got an answer to a heartbeat.
  ASSERT_TRUE(Answered(*s0, e0));
  ASSERT_TRUE(Answered(*s1, e1));
  auto start = std::chrono::steady_clock::now();
  s1->Close();
  auto stop = e0.WaitFor(JobEvent::Kind::kStop);
  ASSERT_TRUE(stop);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_EQ(stop->root_cause.node_rank, 1);
  EXPECT_NE(stop->root_cause.description.find("disconnected"), std::string::npos);
}

TEST_F(GrpcTest, ShutdownEndsWaitsAndStreams) {
  StartServer(2);
  auto c = Client();
  EventLog events;
  auto stream = c->OpenLiveness(0, events.Sink(), events.Closed());
  ASSERT_TRUE(Answered(*stream, events));
  auto waiting = std::async(std::launch::async, [&] {
    std::string v;
    return c->KvGet("never", 30s, &v);
  });
  std::this_thread::sleep_for(50ms);
  auto start = std::chrono::steady_clock::now();
  server.reset();
  Status s = waiting.get();
  EXPECT_EQ(s.code, StatusCode::kUnavailable);
  EXPECT_TRUE(events.WaitClosed());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

TEST_F(GrpcTest, GarbageBytesNeitherCrashNorStallTheServer) {
  StartServer(1);
  auto send_garbage = [this](size_t bytes, bool keep_open) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(server->port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    std::mt19937 rng(static_cast<unsigned>(bytes));
    std::string junk(bytes, '\0');
    for (auto& ch : junk) ch = static_cast<char>(rng());
    EXPECT_GT(::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL), 0);
    if (!keep_open) {
      ::close(fd);
      return -1;
    }
    return fd;
  };
  send_garbage(1 << 16, false);
  send_garbage(7, false);
  int held = send_garbage(3, true);  // a connection that sends a little and then nothing
  int http1 = ::socket(AF_INET, SOCK_STREAM, 0);
  {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(server->port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(http1, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    const char req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    ASSERT_GT(::send(http1, req, sizeof req - 1, MSG_NOSIGNAL), 0);
  }
  auto start = std::chrono::steady_clock::now();
  auto c = Client();
  EXPECT_TRUE(c->KvSet("still", "alive").ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  ::close(held);
  ::close(http1);
}

TEST_F(GrpcTest, MessageSizesAreBounded) {
  StartServer(1, /*max_message_bytes=*/64 << 10);
  GrpcClientConfig cc;
  cc.address = server->address();
  cc.token = kToken;
  cc.call_timeout = 5s;
  cc.max_message_bytes = 8 << 20;  // a client that would send more than the server takes
  GrpcClient big(cc);
  Status s = big.KvSet("k", std::string(200 << 10, 'x'));
  EXPECT_EQ(s.code, StatusCode::kResourceExhausted) << StatusCodeName(s.code) << ": " << s.message;
  EXPECT_TRUE(big.KvSet("k", "small").ok());
}

TEST_F(GrpcTest, LoopbackOnlyRefusesOtherAddresses) {
  CoordinationService s(ServiceConfig{});
  GrpcServerConfig gc = testing::TestGrpcServerConfig(kToken);
  gc.address = "0.0.0.0:0";
  EXPECT_THROW(GrpcServer(s, gc), UsageError);
  EXPECT_TRUE(s.KvSet("k", "v").ok());  // a server that never started leaves the service usable
  gc.address = "[::1]:0";
  try {
    GrpcServer v6(s, gc);
    EXPECT_EQ(v6.address().substr(0, 6), "[::1]:");
  } catch (const std::runtime_error&) {
    GTEST_SKIP() << "no IPv6 loopback here";
  }
}

TEST_F(GrpcTest, UnreachableCoordinatorIsNamed) {
  GrpcClientConfig cc;
  cc.address = "127.0.0.1:1";  // nothing listens on port 1
  cc.token = kToken;
  cc.call_timeout = 300ms;
  GrpcClient c(cc);
  Status s = c.KvSet("k", "v");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message.find("cannot reach the distrun runtime at 127.0.0.1:1"), std::string::npos)
      << s.message;
}

// Without bandwidth-delay probing the flow-control windows stay at their initial size; messages many
// windows long must still get through, also several at once.
TEST_F(GrpcTest, LargeValuesGetThroughWithoutBandwidthProbing) {
  StartServer(1, /*max_message_bytes=*/2 << 20);
  auto c = Client();
  const std::string big(1 << 20, 'b');  // the service's largest value: 16 initial windows
  ASSERT_TRUE(c->KvSet("big", big).ok());
  std::vector<std::future<bool>> readers;
  for (int i = 0; i < 4; ++i) {
    readers.push_back(std::async(std::launch::async, [this, &big] {
      std::string v;
      return Client()->KvGet("big", 5s, &v).ok() && v == big;
    }));
  }
  for (auto& r : readers) EXPECT_TRUE(r.get());
}

// A connection whose handshake is slow is waited for, not given up and made again: given-up attempts
// pile up on a coordinator that is slow because thousands of agents connect at once.
TEST_F(GrpcTest, SlowHandshakeIsWaitedForNotRetried) {
  StartServer(1);
  testing::SlowProxy proxy(server->port(), 600ms);
  GrpcClientConfig cc;
  cc.address = "127.0.0.1:" + std::to_string(proxy.port());
  cc.token = kToken;
  cc.call_timeout = 10s;
  GrpcClient c(cc);
  Status s = c.KvSet("k", "v");
  EXPECT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(proxy.connections(), 1);
}

// Rendezvous of many agents over the transport: each opens its stream, is answered, joins; every
// assignment is distinct and the counts agree.
TEST_F(GrpcTest, ManyAgentsRendezvous) {
  constexpr int kNodes = 24;
  StartServer(kNodes);
  std::vector<std::unique_ptr<GrpcClient>> clients;
  std::vector<std::unique_ptr<EventLog>> logs;
  std::vector<std::unique_ptr<LivenessStream>> streams;
  for (int i = 0; i < kNodes; ++i) {
    clients.push_back(Client());
    logs.push_back(std::make_unique<EventLog>());
    streams.push_back(clients.back()->OpenLiveness(i, logs.back()->Sink(), logs.back()->Closed()));
  }
  for (int i = 0; i < kNodes; ++i)
    ASSERT_TRUE(Answered(*streams[static_cast<size_t>(i)], *logs[static_cast<size_t>(i)]));
  std::vector<std::future<std::pair<Status, NodeAssignment>>> joins;
  for (int i = kNodes - 1; i >= 0; --i) {  // in reverse rank order
    joins.push_back(std::async(std::launch::async, [this, i, c = clients[static_cast<size_t>(i)].get()] {
      NodeAssignment a;
      Status s = c->Join(Node(i, kNodes, 2), 10s, &a);
      return std::make_pair(s, a);
    }));
  }
  std::set<int> offsets;
  for (auto& j : joins) {
    auto [status, a] = j.get();
    ASSERT_TRUE(status.ok()) << status.message;
    EXPECT_EQ(a.num_processes, 2 * kNodes);
    EXPECT_EQ(a.rank_offset, 2 * a.node_rank);
    offsets.insert(a.rank_offset);
  }
  EXPECT_EQ(offsets.size(), static_cast<size_t>(kNodes));
  EXPECT_EQ(service->State(), JobState::kRunning);
}

TEST(RuntimeAddressTest, SplitHostPortAndLoopback) {
  EXPECT_EQ(SplitHostPort("node1:80", "x"), std::make_pair(std::string("node1"), 80));
  EXPECT_EQ(SplitHostPort("[fd00::1]:8476", "x"), std::make_pair(std::string("fd00::1"), 8476));
  EXPECT_THROW(SplitHostPort("node1", "x"), UsageError);
  EXPECT_THROW(SplitHostPort("fd00::1:80", "x"), UsageError);
  EXPECT_THROW(SplitHostPort("node1:99999", "x"), UsageError);
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("127.1.2.3"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_TRUE(IsLoopbackHost("localhost"));
  EXPECT_FALSE(IsLoopbackHost("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackHost("127.example.com"));
  EXPECT_FALSE(IsLoopbackHost("10.0.0.1"));
}

}  // namespace
}  // namespace distrun
