// Real torch 1.13 clients (Debian's python3-torch, for /usr/bin/python3) against the TCPStore codec and
// store, served by a loopback server made for this test: distrun's port does not serve TCPStore yet.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/torch_store/torch_store.h"
#include "runtime/torch_store/torch_store_codec.h"

namespace distrun {
namespace {

using namespace std::chrono_literals;

// Accepts on 127.0.0.1 and feeds each connection's bytes through SniffTorchStore, a decoder and one store,
// as the port will. Records what every connection asked, for the §6 invariants.
class LoopbackTorchStoreServer {
 public:
  explicit LoopbackTorchStoreServer(TorchStore& store) : store_(store) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), length) != 0 || listen(listen_fd_, 64) != 0 ||
        getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0 || pipe(stop_) != 0) {
      ADD_FAILURE() << "cannot listen on loopback";
      return;
    }
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~LoopbackTorchStoreServer() {
    if (thread_.joinable()) {
      EXPECT_EQ(write(stop_[1], "x", 1), 1);
      thread_.join();
    }
    for (const auto& entry : connections_) close(entry.second.fd);
    close(listen_fd_);
    close(stop_[0]);
    close(stop_[1]);
  }

  int port() const { return port_; }

  struct Log {
    std::vector<std::string> requests;  // "<connection> <OP> <first key>"
    std::vector<std::string> errors;
    std::map<uint64_t, TorchStoreDialect> dialects;
    int connections = 0;  // accepted so far
    int open = 0;         // open now
    int silent = 0;       // closed without sending a byte (1.13's callback connection)
  };
  Log log() const {
    std::lock_guard lock(mu_);
    return log_;
  }
  // Waits until every connection has closed (the clients exited) and the store heard of it.
  bool AllClosed(std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (log().open == 0) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

 private:
  struct Connection {
    int fd = -1;
    std::string prefix;  // bytes read before the dialect was known
    std::optional<TorchStoreDecoder> decoder;
  };

  void Run() {
    for (;;) {
      std::vector<pollfd> fds{{stop_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
      std::vector<uint64_t> ids;
      for (const auto& entry : connections_) {
        fds.push_back({entry.second.fd, POLLIN, 0});
        ids.push_back(entry.first);
      }
      if (poll(fds.data(), fds.size(), -1) < 0) continue;
      if (fds[0].revents != 0) return;
      if (fds[1].revents != 0) Accept();
      for (size_t i = 2; i < fds.size(); ++i) {
        if (fds[i].revents != 0) Read(ids[i - 2]);
      }
    }
  }

  void Accept() {
    const int fd = accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) return;
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    connections_[next_id_++].fd = fd;
    std::lock_guard lock(mu_);
    ++log_.connections;
    ++log_.open;
  }

  void Close(uint64_t id, const std::string& error) {
    Connection& c = connections_.at(id);
    std::lock_guard lock(mu_);
    if (!error.empty()) log_.errors.push_back(error);
    if (c.decoder) {
      store_.Disconnected(id);
    } else if (c.prefix.empty()) {
      ++log_.silent;
    }
    close(c.fd);
    connections_.erase(id);
    --log_.open;
  }

  void Send(uint64_t id, const std::string& bytes) {
    auto it = connections_.find(id);
    if (it == connections_.end()) return;
    for (size_t sent = 0; sent < bytes.size();) {
      const ssize_t n = send(it->second.fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<size_t>(n);
    }
  }

  void Read(uint64_t id) {
    Connection& c = connections_.at(id);
    char buffer[65536];
    const ssize_t n = recv(c.fd, buffer, sizeof buffer, 0);
    if (n <= 0) return Close(id, "");
    const std::string_view bytes(buffer, static_cast<size_t>(n));
    if (!c.decoder) {
      c.prefix.append(bytes);
      const TorchStoreSniff sniff = SniffTorchStore(c.prefix);
      if (sniff == TorchStoreSniff::kNeedMore) return;
      if (sniff == TorchStoreSniff::kNotTorchStore) return Close(id, "not tcpstore");
      const auto dialect =
          sniff == TorchStoreSniff::kModern ? TorchStoreDialect::kModern : TorchStoreDialect::kLegacy;
      c.decoder.emplace(dialect, TorchStoreLimits{});
      store_.Connected(id);
      c.decoder->Append(c.prefix);
      std::lock_guard lock(mu_);
      log_.dialects[id] = dialect;
    } else {
      c.decoder->Append(bytes);
    }
    TorchStoreRequest request;
    for (;;) {
      const TorchStoreDecoder::Result result = c.decoder->Next(&request);
      if (result == TorchStoreDecoder::Result::kNeedMore) return;
      if (result == TorchStoreDecoder::Result::kError) return Close(id, c.decoder->error());
      {
        std::lock_guard lock(mu_);
        log_.requests.push_back(std::to_string(id) + " " + TorchStoreOpName(request.op) +
                                (request.keys.empty() ? "" : " " + request.keys[0]));
      }
      TorchStoreOutcome outcome = store_.HandleRequest(id, request);
      for (const TorchStoreReply& reply : outcome.replies) Send(reply.connection, reply.bytes);
      if (!outcome.error.empty()) return Close(id, outcome.error);
    }
  }

  TorchStore& store_;
  int listen_fd_ = -1;
  int stop_[2] = {-1, -1};
  int port_ = 0;
  std::thread thread_;
  std::map<uint64_t, Connection> connections_;  // the server thread's alone
  uint64_t next_id_ = 1;
  mutable std::mutex mu_;
  Log log_;
};

constexpr char kPython[] = "/usr/bin/python3";

struct PythonRun {
  FILE* pipe = nullptr;
  std::string output;
  int status = -1;
};

// Starts `script` under torch's interpreter with `env`, bounded by `timeout` 60; Finish collects it.
PythonRun StartPython(const std::string& name, const std::string& script, const std::string& env) {
  const std::string path = ::testing::TempDir() + "/torch_store_" + name + ".py";
  std::ofstream(path) << script;
  PythonRun run;
  run.pipe = popen(("env " + env + " timeout 60 " + kPython + " " + path + " 2>&1").c_str(), "r");
  return run;
}
void Finish(PythonRun& run) {
  if (run.pipe == nullptr) return;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, run.pipe)) > 0) run.output.append(buffer, n);
  const int status = pclose(run.pipe);
  run.pipe = nullptr;
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool TorchAvailable() {
  const std::string command = std::string(kPython) + " -c 'import torch.distributed' >/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

// The Python API of a 1.13 TCPStore client, every method it has; expected values as measured on a real
// 1.13 server (TORCH_STORE_PROTOCOL.md §9). A second store sets keys from a thread while the first waits.
constexpr char kClientScript[] = R"(
import datetime, os, threading, time
import torch.distributed as d
T = datetime.timedelta
port = int(os.environ["STORE_PORT"])
s = d.TCPStore("127.0.0.1", port, 2, False, timeout=T(seconds=20))
out = []
s.set("a", "b"); out.append(s.get("a"))
out.append(s.add("n", 3)); out.append(s.add("n", 2)); out.append(s.get("n"))
out.append(s.compare_set("c", "", "v1")); out.append(s.compare_set("d", "x", "y"))
out.append(s.compare_set("c", "v1", "v1b")); out.append(s.compare_set("c", "v1", "zz"))
s.wait(["a", "n"]); s.wait(["a"], T(seconds=5))
out.append(s.num_keys())
out.append(s.delete_key("a")); out.append(s.delete_key("a"))
s.set("bin", bytes([0, 255, 10])); out.append(s.get("bin"))
s.set("s", "12abc"); out.append(s.add("s", 1))
s2 = d.TCPStore("127.0.0.1", port, 2, False, timeout=T(seconds=20))
threading.Timer(0.3, lambda: s2.set("late", "x")).start()
t0 = time.time(); s.wait(["late"]); out.append(time.time() - t0 >= 0.25)
threading.Timer(0.3, lambda: s2.add("late2", 7)).start()
out.append(s.get("late2"))
try:
    s2.wait(["never"], T(milliseconds=300)); out.append("no timeout")
except RuntimeError as e:
    out.append(str(e))
print("OUT", out, flush=True)
)";

TEST(TorchStoreInteropTest, Torch113ClientApi) {
  if (!TorchAvailable()) GTEST_SKIP() << kPython << " has no torch";
  TorchStore store;
  LoopbackTorchStoreServer server(store);
  PythonRun run = StartPython("client", kClientScript, "STORE_PORT=" + std::to_string(server.port()));
  Finish(run);
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_NE(
      run.output.find("OUT [b'b', 3, 5, b'5', b'v1', b'x', b'v1b', b'v1b', 4, True, False, b'\\x00\\xff\\n', "
                      "13, True, b'7', 'Socket Timeout']"),
      std::string::npos)
      << run.output;
  ASSERT_TRUE(server.AllClosed(10s));
  const auto log = server.log();
  EXPECT_TRUE(log.errors.empty()) << log.errors[0];
  // Two stores, each a main connection (1.13) and an idle callback one that was never closed on it.
  EXPECT_EQ(log.connections, 4);
  EXPECT_EQ(log.silent, 2);
  EXPECT_EQ(log.dialects.size(), 2u);
  for (const auto& entry : log.dialects) EXPECT_EQ(entry.second, TorchStoreDialect::kLegacy);
  // Clients add "/" to every key but "init/"; the timed-out wait was dropped with its connection.
  EXPECT_EQ(log.requests.front().substr(log.requests.front().find(' ')), " ADD init/");
  store.Connected(1000);
  EXPECT_TRUE(store.HandleRequest(1000, TorchStoreRequest{TorchStoreOp::kSet, {"/never"}, {"v"}, 0, 0})
                  .replies.empty());
  auto got = store.HandleRequest(1000, TorchStoreRequest{TorchStoreOp::kGet, {"/late2"}, {}, 0, 0});
  ASSERT_EQ(got.replies.size(), 1u);
  EXPECT_EQ(got.replies[0].bytes, std::string("\x01\0\0\0\0\0\0\0"
                                              "7",
                                              9));
}

// No torch 2.x here: a raw client speaks the 2.2+ handshake as torch's TestClientProtocol pins it.
TEST(TorchStoreInteropTest, ModernHandshakeCancelWaitAndUnknownOpcodeOverLoopback) {
  TorchStore store;
  LoopbackTorchStoreServer server(store);
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(server.port()));
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  const auto send_all = [fd](const std::string& bytes) {
    return send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  };
  const auto read_n = [fd](size_t n) {
    std::string out(n, '\0');
    size_t got = 0;
    while (got < n) {
      const ssize_t r = recv(fd, out.data() + got, n - got, 0);
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    out.resize(got);
    return out;
  };
  // The magic alone first: the server cannot tell the dialect until its 5th byte.
  ASSERT_TRUE(send_all(std::string("\x00\xCE\xF7", 3)));
  std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(send_all(std::string("\x85\x3C\x0D\x39\x30\x00\x00", 7)));
  EXPECT_EQ(read_n(4), std::string("\x39\x30\x00\x00", 4));
  // WAIT on a missing key, then CANCEL_WAIT: one byte, 01, and no 00 for the cancelled wait.
  std::string wire;
  EncodeTorchStoreRequest(TorchStoreDialect::kModern,
                          TorchStoreRequest{TorchStoreOp::kWait, {"/k"}, {}, 0, 0}, &wire);
  EncodeTorchStoreRequest(TorchStoreDialect::kModern,
                          TorchStoreRequest{TorchStoreOp::kCancelWait, {}, {}, 0, 0}, &wire);
  EncodeTorchStoreRequest(TorchStoreDialect::kModern,
                          TorchStoreRequest{TorchStoreOp::kSet, {"/k"}, {"v"}, 0, 0}, &wire);
  EncodeTorchStoreRequest(TorchStoreDialect::kModern, TorchStoreRequest{TorchStoreOp::kGet, {"/k"}, {}, 0, 0},
                          &wire);
  ASSERT_TRUE(send_all(wire));
  EXPECT_EQ(read_n(1 + 8 + 1), std::string("\x01\x01\0\0\0\0\0\0\0v", 10));
  // An opcode past LIST: the connection is closed.
  ASSERT_TRUE(send_all(std::string(1, '\x12')));
  EXPECT_EQ(read_n(1), "");
  close(fd);
  ASSERT_TRUE(server.AllClosed(10s));
  const auto log = server.log();
  ASSERT_EQ(log.errors.size(), 1u);
  EXPECT_EQ(log.errors[0], "tcpstore 2.2+ unknown opcode 18");
  ASSERT_EQ(log.dialects.size(), 1u);
  EXPECT_EQ(log.dialects.begin()->second, TorchStoreDialect::kModern);
}

// A 2-rank gloo job as distrun will start it: agent mode, no rank binds a store (§5).
constexpr char kGlooScript[] = R"(
import datetime, torch, torch.distributed as d
d.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=30))
t = torch.tensor([float(d.get_rank() + 1)])
d.all_reduce(t)
d.barrier()
print("RESULT", d.get_rank(), t.item(), flush=True)
d.destroy_process_group()
)";

void RunGlooJob(LoopbackTorchStoreServer& server, int restart_count) {
  std::vector<PythonRun> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string env =
        "RANK=" + std::to_string(rank) + " LOCAL_RANK=" + std::to_string(rank) +
        " WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(server.port()) +
        " TORCHELASTIC_USE_AGENT_STORE=True TORCHELASTIC_RESTART_COUNT=" + std::to_string(restart_count) +
        " GLOO_SOCKET_IFNAME=lo";
    ranks.push_back(StartPython("gloo" + std::to_string(rank), kGlooScript, env));
  }
  for (int rank = 0; rank < 2; ++rank) {
    Finish(ranks[rank]);
    EXPECT_EQ(ranks[rank].status, 0) << ranks[rank].output;
    EXPECT_NE(ranks[rank].output.find("RESULT " + std::to_string(rank) + " 3.0"), std::string::npos)
        << ranks[rank].output;
  }
}

TEST(TorchStoreInteropTest, Torch113GlooAllReduceTwoRanksTwoEpochs) {
  if (!TorchAvailable()) GTEST_SKIP() << kPython << " has no torch";
  TorchStore store;
  LoopbackTorchStoreServer server(store);
  RunGlooJob(server, 0);
  ASSERT_TRUE(server.AllClosed(10s));
  auto log = server.log();
  EXPECT_TRUE(log.errors.empty()) << log.errors[0];
  EXPECT_EQ(log.connections, 4);  // per rank: the main connection and the idle callback one
  EXPECT_EQ(log.silent, 2);
  int init_adds = 0;
  bool attempt_keys = false;
  for (const std::string& r : log.requests) {
    init_adds += r.ends_with(" ADD init/");
    attempt_keys |= r.find("//worker/attempt_0/default_pg/") != std::string::npos;
  }
  EXPECT_EQ(init_adds, 2);
  EXPECT_TRUE(attempt_keys);

  // A restart: the next epoch starts with a fresh keyspace, and the job runs again on the same port.
  EXPECT_TRUE(store.StartEpoch(1).empty());  // the first round's connections are all closed already
  EXPECT_EQ(store.size(), 0u);
  RunGlooJob(server, 1);
  ASSERT_TRUE(server.AllClosed(10s));
  log = server.log();
  EXPECT_TRUE(log.errors.empty()) << log.errors[0];
  EXPECT_EQ(log.connections, 8);
  EXPECT_NE(log.requests.back().find("//worker/attempt_1/default_pg/"), std::string::npos)
      << log.requests.back();
}

}  // namespace
}  // namespace distrun
