// The agent channel (runtime/distrun.proto, top) on a real socket: the coordinator's side alone, with raw
// frames as a foreign or broken peer would send them, and both sides together behind GrpcServer.

#include "runtime/transport/agent_channel.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "runtime/auth/agent_identity.h"
#include "runtime/auth/munge_test_daemon.h"
#include "runtime/distrun.pb.h"
#include "runtime/io/loopback_test_sockets.h"
#include "runtime/transport/agent_channel_server.h"
#include "runtime/transport/agent_frames.h"
#include "runtime/transport/grpc_server.h"
#include "runtime/transport/proto_convert.h"
#include "runtime/transport/test_node0.h"

namespace distrun {
namespace {

using namespace std::chrono_literals;

constexpr char kToken[] = "channel-test-token";

// A peer that speaks raw bytes.
class RawPeer {
 public:
  explicit RawPeer(int port) : reader_(1 << 20) { fd_ = testing::ConnectLoopback(port); }
  ~RawPeer() { ::close(fd_); }

  void Send(std::string_view bytes) {
    EXPECT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }
  void Send(const v1::AgentFrame& frame) {
    std::string out;
    AppendFrame(frame, &out);
    Send(out);
  }
  void Hello(const std::string& token = kToken, const std::string& credential = "") {
    Send(kAgentChannelPreface);
    v1::AgentFrame hello;
    hello.mutable_hello()->set_token(token);
    if (!credential.empty()) hello.mutable_hello()->set_munge_credential(credential);
    Send(hello);
  }

  // The next frame, or nothing when the connection closed or nothing came within `timeout`.
  std::optional<v1::CoordinatorFrame> Next(std::chrono::milliseconds timeout = 5s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      std::string_view bytes;
      if (reader_.Next(&bytes) == FrameReader::Result::kFrame) {
        v1::CoordinatorFrame frame;
        EXPECT_TRUE(frame.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())));
        return frame;
      }
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) != 1) return std::nullopt;
      char buf[4096];
      ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      reader_.Append(buf, static_cast<size_t>(n));
    }
  }

  // Whether the coordinator closed the connection within `timeout`.
  bool ClosedWithin(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) != 1) return false;
    char buf[256];
    return ::read(fd_, buf, sizeof buf) <= 0;
  }

  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  FrameReader reader_;
};

v1::AgentFrame Liveness(int node, std::optional<NodeJoin> join = std::nullopt) {
  v1::AgentFrame f;
  f.mutable_liveness()->set_node_rank(node);
  if (join) ToProto(*join, f.mutable_liveness()->mutable_join());
  return f;
}

NodeJoin Node(int rank, int nodes) {
  NodeJoin j;
  j.node_rank = rank;
  j.num_nodes = nodes;
  j.host = "host" + std::to_string(rank);
  j.local_workers = 1;
  j.proposed_master_port = 1234;
  return j;
}

// The coordinator's side alone, with short timeouts and a hand-off that records what it was given.
class ChannelServerTest : public ::testing::Test {
 protected:
  void Start(int nodes, std::chrono::milliseconds hello_timeout = 10s) {
    service = std::make_unique<CoordinationService>(testing::TestServiceConfig(nodes));
    AgentChannelConfig c;
    c.token = kToken;
    c.max_message_bytes = 1 << 16;
    c.hello_timeout = hello_timeout;
    c.hand_off = [this](int fd, const std::string& peer) { handed.set_value({fd, peer}); };
    c.refused = [this](const std::string& peer) { refused_from.push_back(peer); };
    int listen_fd = testing::ListenLoopback(&port);
    server = std::make_unique<AgentChannelServer>(*service, listen_fd, std::move(c));
  }

  void TearDown() override {
    server.reset();
    service.reset();
  }

  int port = 0;
  std::unique_ptr<CoordinationService> service;
  std::unique_ptr<AgentChannelServer> server;
  std::promise<std::pair<int, std::string>> handed;
  std::vector<std::string> refused_from;  // the loop thread writes, read after it was stopped or answered
};

TEST_F(ChannelServerTest, AgentsJoinWithTheirFirstMessage) {
  Start(2);
  RawPeer a(port), b(port);
  a.Hello();
  b.Hello();
  a.Send(Liveness(0, Node(0, 2)));
  b.Send(Liveness(1, Node(1, 2)));
  for (RawPeer* p : {&a, &b}) {
    auto attached = p->Next();  // the stream's first answer: an empty heartbeat
    ASSERT_TRUE(attached && attached->has_event());
    EXPECT_EQ(FromProto(attached->event()).kind, JobEvent::Kind::kHeartbeat);
    auto joined = p->Next();
    ASSERT_TRUE(joined && joined->has_event());
    JobEvent e = FromProto(joined->event());
    EXPECT_EQ(e.kind, JobEvent::Kind::kJoined);
    EXPECT_TRUE(e.join_status.ok()) << e.join_status.message;
    EXPECT_EQ(e.assignment.num_processes, 2);
  }
  EXPECT_EQ(server->connections(), 2u);
}

TEST_F(ChannelServerTest, OneConnectionMayCarrySeveralNodes) {
  Start(2);
  RawPeer p(port);
  p.Hello();
  p.Send(Liveness(0, Node(0, 2)));
  p.Send(Liveness(1, Node(1, 2)));
  std::map<int, std::vector<JobEvent::Kind>> seen;
  for (int i = 0; i < 4; ++i) {
    auto frame = p.Next();
    ASSERT_TRUE(frame && frame->has_event());
    seen[frame->node_rank()].push_back(FromProto(frame->event()).kind);
  }
  const std::vector<JobEvent::Kind> expected = {JobEvent::Kind::kHeartbeat, JobEvent::Kind::kJoined};
  EXPECT_EQ(seen[0], expected);
  EXPECT_EQ(seen[1], expected);
}

TEST_F(ChannelServerTest, BarrierCallsAreAnsweredByTheirId) {
  Start(1);
  RawPeer a(port), b(port);
  for (auto [peer, rank] : {std::pair{&a, 0}, std::pair{&b, 1}}) {
    peer->Hello();
    v1::AgentFrame call;
    call.mutable_call()->set_id(static_cast<uint64_t>(40 + rank));
    auto* barrier = call.mutable_call()->mutable_barrier();
    barrier->set_name("b");
    barrier->set_process_id(rank);
    barrier->set_count(2);
    barrier->set_timeout_ms(5000);
    peer->Send(call);
  }
  for (auto [peer, id] : {std::pair{&a, 40u}, std::pair{&b, 41u}}) {
    auto result = peer->Next();
    ASSERT_TRUE(result && result->has_result());
    EXPECT_EQ(result->result().id(), id);
    EXPECT_EQ(result->result().status().code(), 0) << result->result().status().message();
  }
}

TEST_F(ChannelServerTest, WrongTokenIsRefusedAndTheConnectionClosed) {
  Start(1);
  RawPeer p(port);
  p.Hello("guess");
  auto refused = p.Next();
  ASSERT_TRUE(refused && refused->has_refused());
  EXPECT_EQ(FromProto(refused->refused()).code, StatusCode::kUnauthenticated);
  EXPECT_TRUE(p.ClosedWithin(5s));
  server.reset();  // the loop has stopped: its record can be read
  ASSERT_EQ(refused_from.size(), 1u);
  EXPECT_TRUE(refused_from[0].starts_with("127.0.0.1:")) << refused_from[0];
}

TEST_F(ChannelServerTest, EveryBrokenFrameGetsOneAnswerAndTheLoopGoesOn) {
  Start(1);
  struct Case {
    std::string bytes;
    StatusCode code;
  };
  v1::AgentFrame liveness_first = Liveness(0);
  std::string framed_liveness;
  AppendFrame(liveness_first, &framed_liveness);
  const std::vector<Case> cases = {
      {std::string(kAgentChannelPreface) + framed_liveness, StatusCode::kUnauthenticated},  // no hello
      {std::string(kAgentChannelPreface) + std::string("\xff\xff\xff\xff", 4),
       StatusCode::kResourceExhausted},
      {std::string(kAgentChannelPreface) + std::string("\0\0\0\3\xff\xff\xff", 7),
       StatusCode::kInvalidArgument},
  };
  for (const Case& c : cases) {
    RawPeer p(port);
    p.Send(c.bytes);
    auto refused = p.Next();
    ASSERT_TRUE(refused && refused->has_refused());
    EXPECT_EQ(FromProto(refused->refused()).code, c.code) << refused->refused().message();
    EXPECT_TRUE(p.ClosedWithin(5s));
  }
  // A second hello, and a node that joins as another.
  RawPeer p(port);
  p.Hello();
  p.Send(Liveness(0));
  ASSERT_TRUE(p.Next());  // attached
  v1::AgentFrame again;
  again.mutable_hello()->set_token(kToken);
  p.Send(again);
  auto refused = p.Next();
  ASSERT_TRUE(refused && refused->has_refused());
  EXPECT_EQ(FromProto(refused->refused()).code, StatusCode::kInvalidArgument);
}

TEST_F(ChannelServerTest, BeforeItsHelloAPeerMaySendLittle) {
  Start(1);  // messages of up to 64 KB once a connection has said who it is
  static_assert(kMaxHelloFrameBytes < 8192, "the frame below must be over the hello limit");
  const std::string eight_kb_header("\0\0\x20\0", 4);
  RawPeer stranger(port);
  stranger.Send(std::string(kAgentChannelPreface) + eight_kb_header);
  auto refused = stranger.Next();
  ASSERT_TRUE(refused && refused->has_refused());
  EXPECT_EQ(FromProto(refused->refused()).code, StatusCode::kResourceExhausted);
  EXPECT_EQ(refused->refused().message(),
            "a hello of more than " + std::to_string(kMaxHelloFrameBytes) + " bytes");
  EXPECT_TRUE(stranger.ClosedWithin(5s));

  RawPeer agent(port);
  agent.Hello();
  v1::AgentFrame call;
  call.mutable_call()->set_id(7);
  call.mutable_call()->mutable_barrier()->set_name(std::string(8192, 'b'));
  call.mutable_call()->mutable_barrier()->set_count(1);
  call.mutable_call()->mutable_barrier()->set_timeout_ms(5000);
  agent.Send(call);
  auto result = agent.Next();
  ASSERT_TRUE(result && result->has_result())
      << (result && result->has_refused() ? result->refused().message() : "");
  EXPECT_EQ(result->result().id(), 7u);
}

TEST_F(ChannelServerTest, AChannelCannotJoinForAnotherNode) {
  Start(2);
  RawPeer p(port);
  p.Hello();
  p.Send(Liveness(1, Node(0, 2)));
  auto attached = p.Next();
  ASSERT_TRUE(attached && attached->has_event());
  auto refused = p.Next();
  ASSERT_TRUE(refused && refused->has_refused());
  EXPECT_EQ(FromProto(refused->refused()).code, StatusCode::kInvalidArgument);
  EXPECT_EQ(refused->refused().message(), "node 1's channel joined as node 0");
}

TEST_F(ChannelServerTest, APrefaceByteByByteIsStillAnAgent) {
  Start(1);
  RawPeer p(port);
  for (char c : kAgentChannelPreface) {
    p.Send(std::string_view(&c, 1));
    std::this_thread::sleep_for(5ms);
  }
  v1::AgentFrame hello;
  hello.mutable_hello()->set_token(kToken);
  p.Send(hello);
  p.Send(Liveness(0));
  auto attached = p.Next();
  ASSERT_TRUE(attached && attached->has_event());
}

TEST_F(ChannelServerTest, AnythingElseIsHandedOffUnread) {
  Start(1);
  RawPeer p(port);
  const std::string http2 = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  p.Send(http2);
  auto future = handed.get_future();
  ASSERT_EQ(future.wait_for(5s), std::future_status::ready);
  auto [fd, peer] = future.get();
  EXPECT_TRUE(peer.starts_with("127.0.0.1:")) << peer;
  std::string got(http2.size(), '\0');
  size_t have = 0;
  while (have < got.size()) {
    pollfd pf{fd, POLLIN, 0};
    ASSERT_EQ(::poll(&pf, 1, 5000), 1);
    ssize_t n = ::read(fd, got.data() + have, got.size() - have);
    ASSERT_GT(n, 0);
    have += static_cast<size_t>(n);
  }
  EXPECT_EQ(got, http2);
  ::close(fd);
}

TEST_F(ChannelServerTest, SilentConnectionsAreClosedAfterTheHelloTimeout) {
  Start(1, 200ms);
  RawPeer silent(port);
  EXPECT_TRUE(silent.ClosedWithin(5s));
  RawPeer no_hello(port);
  no_hello.Send(kAgentChannelPreface);
  auto refused = no_hello.Next();
  ASSERT_TRUE(refused && refused->has_refused());
  EXPECT_EQ(FromProto(refused->refused()).code, StatusCode::kDeadlineExceeded);
}

TEST_F(ChannelServerTest, CloseAllTellsEveryAgentWhy) {
  Start(2);
  RawPeer p(port);
  p.Hello();
  p.Send(Liveness(1));
  ASSERT_TRUE(p.Next());
  server->CloseAll("going away");
  auto refused = p.Next();
  ASSERT_TRUE(refused && refused->has_refused());
  EXPECT_EQ(FromProto(refused->refused()).code, StatusCode::kUnavailable);
  EXPECT_EQ(refused->refused().message(), "going away");
  EXPECT_TRUE(p.ClosedWithin(5s));
  EXPECT_EQ(server->connections(), 0u);
  RawPeer late(port);  // after CloseAll: closed at once
  EXPECT_TRUE(late.ClosedWithin(5s));
}

// Agents that must prove their user with munge, against a private munged (munge_test_daemon.h).
class MungeChannelTest : public ChannelServerTest {
 protected:
  void SetUp() override {
    std::string why;
    munge = daemon.Credentials(&why);
    if (!munge) GTEST_SKIP() << why;
    service = std::make_unique<CoordinationService>(testing::TestServiceConfig(2));
    int listen_fd = testing::ListenLoopback(&port);
    AgentChannelConfig c;
    c.token = kToken;
    c.hello_timeout = 10s;
    c.munge = munge;
    c.admission.uid = ::geteuid();
    c.admission.port = port;
    c.admission.run_id = "r1";
    c.log = testing::StreamLogger("munge", log);
    server = std::make_unique<AgentChannelServer>(*service, listen_fd, std::move(c));
  }

  std::string Credential(int node, const std::string& run_id = "r1", int for_port = 0) {
    std::string why;
    auto c = munge->Encode(AgentIdentityPayload({for_port ? for_port : port, node, run_id}), &why);
    EXPECT_TRUE(c) << why;
    return c.value_or("");
  }

  // The refusal's message, or what came instead.
  static std::string Refusal(RawPeer& p) {
    auto frame = p.Next();
    if (!frame) return "<closed>";
    if (!frame->has_refused()) return "<not a refusal>";
    return frame->refused().message();
  }

  testing::MungeTestDaemon daemon;
  std::shared_ptr<MungeCredentials> munge;
  std::ostringstream log;
};

TEST_F(MungeChannelTest, AnAgentOfTheJobsUserIsAdmittedAndItsWaitingFramesAreRead) {
  RawPeer p(port);
  p.Hello(kToken, Credential(1));
  p.Send(Liveness(1, Node(1, 2)));  // sent before the credential was checked: read after
  auto attached = p.Next();
  ASSERT_TRUE(attached && attached->has_event()) << log.str();
  EXPECT_EQ(attached->node_rank(), 1);
  EXPECT_EQ(server->connections(), 1u);
}

TEST_F(MungeChannelTest, ACredentialAdmitsOneHelloOnly) {
  const std::string credential = Credential(1);
  RawPeer first(port);
  first.Hello(kToken, credential);
  first.Send(Liveness(1, Node(1, 2)));
  ASSERT_TRUE(first.Next());
  RawPeer replay(port);
  replay.Hello(kToken, credential);
  EXPECT_NE(Refusal(replay).find("node 0 refused this node: a replayed munge credential"), std::string::npos);
  EXPECT_TRUE(replay.ClosedWithin(5s));
  EXPECT_NE(log.str().find("refused an agent from 127.0.0.1:"), std::string::npos) << log.str();
}

TEST_F(MungeChannelTest, CredentialsOfAnotherJobPortOrNodeAreRefused) {
  RawPeer other_run(port);
  other_run.Hello(kToken, Credential(1, "r2"));
  EXPECT_NE(Refusal(other_run).find("made for run r2, not this job's (r1)"), std::string::npos);
  RawPeer other_port(port);
  other_port.Hello(kToken, Credential(1, "r1", port + 1));
  EXPECT_NE(Refusal(other_port).find("made for a coordinator on port"), std::string::npos);
  RawPeer other_node(port);
  other_node.Hello(kToken, Credential(0));
  other_node.Send(Liveness(1, Node(1, 2)));
  EXPECT_NE(Refusal(other_node).find("made for node 0, not node 1"), std::string::npos);
  RawPeer none(port);
  none.Hello(kToken);
  EXPECT_NE(Refusal(none).find("carried no munge credential"), std::string::npos);
  RawPeer wrong_token(port);  // the token is still checked
  wrong_token.Hello("guess", Credential(1));
  EXPECT_EQ(Refusal(wrong_token), "missing or wrong job token");
  EXPECT_EQ(server->connections(), 0u);
}

TEST_F(MungeChannelTest, AnotherUsersCredentialIsRefused) {
  // munge's own client, run as another user, makes the credential.
  const std::string payload = AgentIdentityPayload({port, 1, "r1"});
  const std::string command = "setpriv --reuid 4242 --regid 4242 --clear-groups munge --socket " +
                              daemon.socket() + " --string '" + payload + "' 2>&1";
  std::string credential;
  if (FILE* out = ::popen(command.c_str(), "r")) {
    char buf[4096];
    while (size_t n = std::fread(buf, 1, sizeof buf, out)) credential.append(buf, n);
    ::pclose(out);
  }
  while (!credential.empty() && credential.back() == '\n') credential.pop_back();
  if (!credential.starts_with("MUNGE:")) GTEST_SKIP() << "no credential as uid 4242: " << credential;
  RawPeer p(port);
  p.Hello(kToken, credential);
  EXPECT_NE(Refusal(p).find("its munge credential is uid 4242's, not the job's user (uid " +
                            std::to_string(::geteuid()) + ")"),
            std::string::npos);
}

TEST_F(MungeChannelTest, MungedDownRefusesWithItsReason) {
  const std::string credential = Credential(1);
  daemon.Stop();
  RawPeer p(port);
  p.Hello(kToken, credential);
  EXPECT_NE(Refusal(p).find("munged does not answer at " + daemon.socket()), std::string::npos);
}

// Both sides together, behind the server the launcher runs.
class ChannelTest : public ::testing::Test {
 protected:
  void Start(int nodes) {
    service = std::make_unique<CoordinationService>(testing::TestServiceConfig(nodes));
    GrpcServerConfig gc = testing::TestGrpcServerConfig(kToken);
    gc.log = testing::StreamLogger("channel-test", log_text);
    server = std::make_unique<GrpcServer>(*service, gc);
  }

  void TearDown() override {
    server.reset();
    service.reset();
  }

  struct Events {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<JobEvent> seen;
    std::optional<Status> closed;
  };

  std::unique_ptr<AgentChannel> Open(Events& events, int node, const std::string& token = kToken,
                                     std::optional<NodeJoin> join = std::nullopt) {
    AgentChannelOptions o;
    o.address = server->address();
    o.token = token;
    o.node_rank = node;
    o.first_join = join;
    return std::make_unique<AgentChannel>(
        o,
        [&events](const JobEvent& e) {
          std::lock_guard lock(events.mu);
          events.seen.push_back(e);
          events.cv.notify_all();
        },
        [&events](const Status& s) {
          std::lock_guard lock(events.mu);
          events.closed = s;
          events.cv.notify_all();
        });
  }

  static bool WaitFor(Events& events, const std::function<bool()>& done) {
    std::unique_lock lock(events.mu);
    return events.cv.wait_for(lock, 10s, done);
  }

  std::ostringstream log_text;
  std::unique_ptr<CoordinationService> service;
  std::unique_ptr<GrpcServer> server;
};

TEST_F(ChannelTest, WrongTokenEndsTheChannelAndIsCountedNotLogged) {
  Start(1);
  Events events;
  auto channel = Open(events, 0, "guess-1234567", Node(0, 1));
  ASSERT_TRUE(WaitFor(events, [&] { return events.closed.has_value(); }));
  EXPECT_EQ(events.closed->code, StatusCode::kUnauthenticated);
  EXPECT_EQ(server->refused_calls(), 1u);
  const std::string log = log_text.str();
  EXPECT_NE(log.find("refused a hello on the agent channel from 127.0.0.1:"), std::string::npos) << log;
  EXPECT_EQ(log.find("guess-1234567"), std::string::npos);
  EXPECT_EQ(log.find(kToken), std::string::npos);
}

TEST_F(ChannelTest, FramesSentBeforeTheConnectionGoOutInOrder) {
  Start(1);
  Events events;
  auto channel = Open(events, 0, kToken, Node(0, 1));
  // Success of round 0, possibly before the connection exists: queued behind the join.
  EXPECT_TRUE(channel->SendSuccess(0));
  ASSERT_TRUE(WaitFor(events, [&] {
    for (const JobEvent& e : events.seen) {
      if (e.kind == JobEvent::Kind::kComplete) return true;
    }
    return false;
  }));
  std::lock_guard lock(events.mu);
  EXPECT_EQ(events.seen[0].kind, JobEvent::Kind::kHeartbeat);
  EXPECT_EQ(events.seen[1].kind, JobEvent::Kind::kJoined);
}

TEST_F(ChannelTest, AFailureCallNamesTheRootCause) {
  Start(2);
  Events e0, e1;
  auto c0 = Open(e0, 0, kToken, Node(0, 2));
  auto c1 = Open(e1, 1, kToken, Node(1, 2));
  auto joined = [](Events& e) {
    return WaitFor(e, [&e] {
      for (const JobEvent& x : e.seen) {
        if (x.kind == JobEvent::Kind::kJoined) return true;
      }
      return false;
    });
  };
  ASSERT_TRUE(joined(e0));
  ASSERT_TRUE(joined(e1));
  FailedWorker failure;
  failure.node_rank = 1;
  failure.host = "host1";
  failure.process_id = 1;
  failure.exit_code = 3;
  bool root = false;
  ASSERT_TRUE(c1->ReportFailure(0, failure, &root).ok());
  EXPECT_TRUE(root);
  ASSERT_TRUE(WaitFor(e0, [&] {
    return std::any_of(e0.seen.begin(), e0.seen.end(),
                       [](const JobEvent& x) { return x.kind == JobEvent::Kind::kStop; });
  }));
}

TEST_F(ChannelTest, TheCoordinatorsShutdownEndsTheChannelWithItsReason) {
  Start(2);
  Events events;
  auto channel = Open(events, 1, kToken);
  ASSERT_TRUE(WaitFor(events, [&] { return !events.seen.empty(); }));
  server.reset();
  ASSERT_TRUE(WaitFor(events, [&] { return events.closed.has_value(); }));
  EXPECT_EQ(events.closed->code, StatusCode::kUnavailable);
  EXPECT_NE(events.closed->message.find("shutting down"), std::string::npos) << events.closed->message;
  bool root = true;
  Status s = channel->ReportFailure(0, FailedWorker{}, &root);
  EXPECT_EQ(s.code, StatusCode::kUnavailable);
  EXPECT_FALSE(root);
}

TEST_F(ChannelTest, NobodyListeningIsTriedAgainUntilClosed) {
  int port = 0;
  int fd = testing::ListenLoopback(&port);
  ::close(fd);  // a port nobody listens on
  Events events;
  AgentChannelOptions o;
  o.address = "127.0.0.1:" + std::to_string(port);
  o.token = kToken;
  AgentChannel channel(
      o, [](const JobEvent&) {},
      [&events](const Status& s) {
        std::lock_guard lock(events.mu);
        events.closed = s;
        events.cv.notify_all();
      });
  std::this_thread::sleep_for(300ms);
  {
    std::lock_guard lock(events.mu);
    EXPECT_FALSE(events.closed);  // still trying
  }
  channel.Close();
  ASSERT_TRUE(events.closed);
  EXPECT_EQ(events.closed->code, StatusCode::kCancelled);
  EXPECT_NE(events.closed->message.find("Connection refused"), std::string::npos) << events.closed->message;
}

}  // namespace
}  // namespace distrun
