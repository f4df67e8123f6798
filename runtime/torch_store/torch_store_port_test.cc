// PyTorch's store on the coordinator's port (agent_channel_server.h + torch_store_port.h) over real loopback
// sockets: both dialects beside the agent channel, requests split at every byte, an error that closes one
// connection only, torch 1.13's silent second connection, strangers, and a new epoch's fresh keyspace.

#include "runtime/torch_store/torch_store_port.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/distrun.pb.h"
#include "runtime/io/loopback_test_sockets.h"
#include "runtime/service/service.h"
#include "runtime/torch_store/torch_store_test_requests.h"
#include "runtime/transport/agent_channel_server.h"
#include "runtime/transport/agent_frames.h"
#include "runtime/transport/test_node0.h"

namespace distrun {
namespace {

using namespace std::chrono_literals;
using Op = TorchStoreOp;
using testing::Req;

constexpr char kToken[] = "torch-port-test-token";

// A TCPStore client written with the codec's encoder, reading raw reply bytes.
class StoreClient {
 public:
  StoreClient(int port, TorchStoreDialect dialect) : dialect_(dialect) {
    fd_ = testing::ConnectLoopback(port);
    if (dialect == TorchStoreDialect::kModern) Send(Req(Op::kValidate, {}, {}, 0, kTorchStoreValidateMagic));
  }
  ~StoreClient() { ::close(fd_); }

  std::string Encode(const TorchStoreRequest& request) const {
    std::string out;
    EXPECT_TRUE(EncodeTorchStoreRequest(dialect_, request, &out));
    return out;
  }
  void SendBytes(std::string_view bytes) {
    EXPECT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()))
        << std::strerror(errno);
  }
  void Send(const TorchStoreRequest& request) { SendBytes(Encode(request)); }

  // Exactly `n` bytes, or what came before the connection closed or `timeout` passed.
  std::string Read(size_t n, std::chrono::milliseconds timeout = 5s) {
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (out.size() < n) {
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) != 1) break;
      char buf[4096];
      ssize_t got = ::read(fd_, buf, std::min(sizeof buf, n - out.size()));
      if (got <= 0) break;
      out.append(buf, static_cast<size_t>(got));
    }
    return out;
  }
  std::string Get(const std::string& key) {
    Send(Req(Op::kGet, {key}));
    std::string length = Read(8);
    if (length.size() != 8) return "<closed>";
    uint64_t n = 0;
    std::memcpy(&n, length.data(), 8);
    return Read(n);
  }
  // Whether the server closed the connection within `timeout` (nothing else arriving first).
  bool ClosedWithin(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) != 1) return false;
    char buf[256];
    return ::read(fd_, buf, sizeof buf) <= 0;
  }

 private:
  TorchStoreDialect dialect_;
  int fd_ = -1;
};

std::string I64(int64_t value) {
  std::string out;
  AppendTorchStoreInt64(value, &out);
  return out;
}

class TorchStorePortTest : public ::testing::Test {
 protected:
  // `job_hosts_only`: loopback peers count as strangers unless an agent was admitted from 127.0.0.1.
  // Three store loops: the connections of a test go round them, so a reply often crosses from one loop to
  // another (a WAIT answered by another connection's SET, an epoch's end closing all of them).
  void Start(bool torch_store = true, bool job_hosts_only = false, int max_restarts = 0) {
    ServiceConfig sc = testing::TestServiceConfig(1);
    sc.max_restarts = max_restarts;
    service = std::make_unique<CoordinationService>(sc);
    AgentChannelConfig c;
    c.token = kToken;
    c.hello_timeout = 200ms;
    c.hand_off = [](int fd, const std::string&) { ::close(fd); };
    c.torch_store = torch_store;
    c.torch_store_max_bytes = 1 << 20;
    c.torch_store_job_hosts_only = job_hosts_only;
    c.torch_store_threads = 3;
    c.peer_is_this_host = [](int) { return false; };
    c.log = testing::StreamLogger("port", log);
    int listen_fd = testing::ListenLoopback(&port);
    server = std::make_unique<AgentChannelServer>(*service, listen_fd, std::move(c));
  }
  void TearDown() override {
    server.reset();
    service.reset();
  }

  int port = 0;
  std::ostringstream log;
  std::unique_ptr<CoordinationService> service;
  std::unique_ptr<AgentChannelServer> server;
};

// An agent on the same port: preface, hello, its node's first liveness message.
class AgentPeer {
 public:
  explicit AgentPeer(int port) : reader_(1 << 20) {
    fd_ = testing::ConnectLoopback(port);
    std::string out(kAgentChannelPreface);
    v1::AgentFrame hello;
    hello.mutable_hello()->set_token(kToken);
    AppendFrame(hello, &out);
    v1::AgentFrame liveness;
    liveness.mutable_liveness()->set_node_rank(0);
    AppendFrame(liveness, &out);
    EXPECT_EQ(::send(fd_, out.data(), out.size(), MSG_NOSIGNAL), static_cast<ssize_t>(out.size()));
  }
  ~AgentPeer() { ::close(fd_); }
  // Its first answer: the hello was accepted and the node attached.
  bool Attached() {
    pollfd p{fd_, POLLIN, 0};
    while (::poll(&p, 1, 5000) == 1) {
      char buf[4096];
      ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n <= 0) return false;
      reader_.Append(buf, static_cast<size_t>(n));
      std::string_view frame;
      if (reader_.Next(&frame) == FrameReader::Result::kFrame) {
        v1::CoordinatorFrame f;
        return f.ParseFromArray(frame.data(), static_cast<int>(frame.size())) && f.has_event();
      }
    }
    return false;
  }

 private:
  int fd_ = -1;
  FrameReader reader_;
};

TEST_F(TorchStorePortTest, BothDialectsShareOneKeyspaceBesideTheAgentChannel) {
  Start();
  AgentPeer agent(port);
  ASSERT_TRUE(agent.Attached());
  StoreClient legacy(port, TorchStoreDialect::kLegacy);
  StoreClient modern(port, TorchStoreDialect::kModern);
  legacy.Send(Req(Op::kSet, {"/worker/attempt_0/key"}, {"from 1.13"}));
  legacy.Send(Req(Op::kGetNumKeys));  // answered after the SET: connections are not ordered among themselves
  EXPECT_EQ(legacy.Read(8), I64(1));
  EXPECT_EQ(modern.Get("/worker/attempt_0/key"), "from 1.13");
  modern.Send(Req(Op::kPing, {}, {}, 0, 0xDEADBEEF));
  std::string echo;
  AppendTorchStoreUint32(0xDEADBEEF, &echo);
  EXPECT_EQ(modern.Read(4), echo);
  modern.Send(Req(Op::kAdd, {"init/"}, {}, 1));
  EXPECT_EQ(modern.Read(8), I64(1));
  legacy.Send(Req(Op::kAdd, {"init/"}, {}, 1));
  EXPECT_EQ(legacy.Read(8), I64(2));
  EXPECT_EQ(server->connections(), 1u);  // the agent; store connections are not agents
}

TEST_F(TorchStorePortTest, RequestsSplitAtEveryByteAndPipelinedAreAnsweredInOrder) {
  Start();
  StoreClient c(port, TorchStoreDialect::kModern);
  std::string bytes = c.Encode(Req(Op::kSet, {"a"}, {"1"})) + c.Encode(Req(Op::kAdd, {"n"}, {}, 5)) +
                      c.Encode(Req(Op::kGet, {"a"})) + c.Encode(Req(Op::kAdd, {"n"}, {}, 2));
  for (char b : bytes) {
    c.SendBytes(std::string_view(&b, 1));
    std::this_thread::sleep_for(100us);
  }
  std::string one;
  AppendTorchStoreBytes("1", &one);
  EXPECT_EQ(c.Read(8 + one.size() + 8), I64(5) + one + I64(7));
}

TEST_F(TorchStorePortTest, AWaitIsAnsweredWhenAnotherConnectionSetsTheKey) {
  Start();
  StoreClient waiter(port, TorchStoreDialect::kLegacy);
  StoreClient setter(port, TorchStoreDialect::kModern);
  waiter.Send(Req(Op::kWait, {"nccl/uid"}));
  waiter.Send(Req(Op::kAdd, {"other"}, {}, 1));  // answered while the wait is pending
  EXPECT_EQ(waiter.Read(8), I64(1));
  EXPECT_EQ(waiter.Read(1, 200ms), "");
  setter.Send(Req(Op::kSet, {"nccl/uid"}, {std::string(128, 'u')}));
  EXPECT_EQ(waiter.Read(1), std::string(1, '\0'));
}

TEST_F(TorchStorePortTest, AnUnknownOpcodeClosesThatConnectionOnlyAndIsLoggedWithThePeer) {
  Start();
  StoreClient good(port, TorchStoreDialect::kLegacy);
  good.Send(Req(Op::kSet, {"k"}, {"v"}));
  EXPECT_EQ(good.Get("k"), "v");  // served: the connections are on loops of their own, unordered
  StoreClient bad(port, TorchStoreDialect::kLegacy);
  bad.Send(Req(Op::kGetNumKeys));
  EXPECT_EQ(bad.Read(8), I64(1));
  bad.SendBytes(std::string(1, '\x09'));  // 1.13 has opcodes 0-8
  EXPECT_TRUE(bad.ClosedWithin(5s));
  StoreClient newer(port, TorchStoreDialect::kModern);
  newer.SendBytes(std::string(1, '\x7f'));  // a future torch's opcode
  EXPECT_TRUE(newer.ClosedWithin(5s));
  StoreClient huge(port, TorchStoreDialect::kModern);
  std::string key_length;
  AppendTorchStoreInt64(int64_t{1} << 20, &key_length);  // a 1 MiB key: over the 8 KiB limit
  huge.SendBytes(std::string(1, '\x03') + key_length);
  EXPECT_TRUE(huge.ClosedWithin(5s));
  EXPECT_EQ(good.Get("k"), "v");
  const std::string text = log.str();
  EXPECT_NE(text.find("closed the TCPStore connection from 127.0.0.1:"), std::string::npos) << text;
  EXPECT_NE(text.find("tcpstore 1.13 unknown opcode 9"), std::string::npos) << text;
  EXPECT_NE(text.find("tcpstore 2.2+ unknown opcode 127"), std::string::npos) << text;
  EXPECT_NE(text.find("tcpstore 2.2+ GET"), std::string::npos) << text;
}

TEST_F(TorchStorePortTest, AWriteOverTheStoreLimitClosesThatConnection) {
  Start();
  StoreClient c(port, TorchStoreDialect::kModern);
  for (int i = 0; i < 3; ++i)
    c.Send(Req(Op::kSet, {"big" + std::to_string(i)}, {std::string(400 << 10, 'x')}));
  EXPECT_TRUE(c.ClosedWithin(5s));
  EXPECT_NE(log.str().find("SET of 409604 bytes: the store holds"), std::string::npos) << log.str();
  StoreClient after(port, TorchStoreDialect::kModern);
  EXPECT_EQ(after.Get("big1").size(), size_t{400 << 10});
}

TEST_F(TorchStorePortTest, ASilentConnectionOutlivesTheHelloTimeoutOnlyWhereTheStoreIsServed) {
  Start();
  StoreClient callback_socket(port, TorchStoreDialect::kLegacy);  // torch 1.13's second connection
  EXPECT_FALSE(callback_socket.ClosedWithin(800ms));
  callback_socket.Send(Req(Op::kGetNumKeys));
  EXPECT_EQ(callback_socket.Read(8), I64(0));
  TearDown();
  Start(/*torch_store=*/false);
  StoreClient silent(port, TorchStoreDialect::kLegacy);
  EXPECT_TRUE(silent.ClosedWithin(5s));
}

TEST_F(TorchStorePortTest, StrangersCannotReadWriteOrHoldTheStore) {
  Start(/*torch_store=*/true, /*job_hosts_only=*/true);
  {
    StoreClient stranger(port, TorchStoreDialect::kLegacy);
    stranger.Send(Req(Op::kSet, {"k"}, {"evil"}));
    EXPECT_TRUE(stranger.ClosedWithin(5s));
    StoreClient silent(port, TorchStoreDialect::kLegacy);  // not kept past the hello timeout either
    EXPECT_TRUE(silent.ClosedWithin(5s));
  }
  EXPECT_NE(log.str().find("refused a TCPStore connection from 127.0.0.1:"), std::string::npos) << log.str();
  {
    // Once an agent of the job was admitted from this address, its workers may use the store.
    AgentPeer agent(port);
    ASSERT_TRUE(agent.Attached());
    StoreClient worker(port, TorchStoreDialect::kModern);
    EXPECT_EQ(worker.Get("k"), "");  // the stranger's SET never landed
    worker.Send(Req(Op::kSet, {"k"}, {"good"}));
    EXPECT_EQ(worker.Get("k"), "good");
  }
  // The agent is gone: so is its host's access.
  for (int i = 0; i < 1000 && server->connections() > 0; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(server->connections(), 0u);
  // Its VALIDATE is refused (a request sent behind it may already meet the reset).
  StoreClient late(port, TorchStoreDialect::kModern);
  EXPECT_TRUE(late.ClosedWithin(5s));
}

// What init_process_group does, on many connections over the loops at once: every rank ADDs, waits for the
// id rank 0 sets, reads it, and the last to arrive at the barrier releases the others. Each connection
// gets its replies in order whichever loop made them.
TEST_F(TorchStorePortTest, ManyConnectionsOverTheLoopsInitialiseTogether) {
  Start();
  constexpr int kRanks = 24;
  std::vector<std::unique_ptr<StoreClient>> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.push_back(
        std::make_unique<StoreClient>(port, r % 2 ? TorchStoreDialect::kModern : TorchStoreDialect::kLegacy));
  }
  for (int r = 1; r < kRanks; ++r) ranks[r]->Send(Req(Op::kWait, {"uid"}));
  for (int r = 0; r < kRanks; ++r) ranks[r]->Send(Req(Op::kAdd, {"init/"}, {}, 1));
  std::set<std::string> counts;
  for (int r = 0; r < kRanks; ++r) counts.insert(ranks[r]->Read(8));  // before the wait's answer
  EXPECT_EQ(counts.size(), static_cast<size_t>(kRanks));
  ranks[0]->Send(Req(Op::kSet, {"uid"}, {std::string(128, 'u')}));
  for (int r = 1; r < kRanks; ++r) {
    EXPECT_EQ(ranks[r]->Read(1), std::string(1, '\0')) << r;
    EXPECT_EQ(ranks[r]->Get("uid"), std::string(128, 'u')) << r;
  }
  for (int r = 0; r < kRanks; ++r) {
    ranks[r]->Send(Req(Op::kWait, {"last"}));
    ranks[r]->Send(Req(Op::kAdd, {"barrier"}, {}, 1));
  }
  int last = -1;
  for (int r = 0; r < kRanks; ++r) {
    if (ranks[r]->Read(8) == I64(kRanks)) last = r;
  }
  ASSERT_GE(last, 0);
  ranks[last]->Send(Req(Op::kSet, {"last"}, {"1"}));
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(ranks[r]->Read(1), std::string(1, '\0')) << r;
}

TEST_F(TorchStorePortTest, ANewEpochEmptiesTheStoreAndClosesTheOldEpochsConnections) {
  Start(/*torch_store=*/true, /*job_hosts_only=*/false, /*max_restarts=*/1);
  uint64_t stream = 0;
  ASSERT_TRUE(service
                  ->AttachAgent(
                      0, [](const JobEvent&) {}, &stream)
                  .ok());
  NodeJoin join;
  join.num_nodes = 1;
  join.host = "host0";
  join.local_workers = 1;
  std::promise<Status> joined;
  service->Join(join, [&joined](const Status& s, const NodeAssignment&) { joined.set_value(s); });
  ASSERT_TRUE(joined.get_future().get().ok());
  StoreClient old_worker(port, TorchStoreDialect::kModern);
  old_worker.Send(Req(Op::kSet, {"default_pg/0//nccl_uid"}, {"epoch 0's id"}));
  EXPECT_EQ(old_worker.Get("default_pg/0//nccl_uid"), "epoch 0's id");
  std::vector<std::unique_ptr<StoreClient>> others;  // on the other loops, one waiting
  for (int i = 0; i < 4; ++i) {
    others.push_back(std::make_unique<StoreClient>(port, TorchStoreDialect::kLegacy));
    EXPECT_EQ(others.back()->Get("default_pg/0//nccl_uid"), "epoch 0's id");
  }
  others[0]->Send(Req(Op::kWait, {"never"}));
  bool root = false;
  ASSERT_TRUE(service->ReportFailure(0, FailedWorker{0, "host0", 0, 3, "exited with code 3"}, &root).ok());
  EXPECT_TRUE(old_worker.ClosedWithin(5s));
  for (auto& other : others) EXPECT_TRUE(other->ClosedWithin(5s));
  StoreClient new_worker(port, TorchStoreDialect::kModern);
  EXPECT_EQ(new_worker.Get("default_pg/0//nccl_uid"), "");
}

}  // namespace
}  // namespace distrun
