#include "runtime/io/tcp_retransmits.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "runtime/io/loopback_test_sockets.h"

namespace distrun {
namespace {

using namespace std::chrono_literals;

// A non-blocking connection to 127.0.0.1:port, under way.
int StartConnect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  return fd;
}

TEST(TcpRetransmitsTest, AHealthyConnectionRetransmitsNothingAndOtherSocketsAreNotTcp) {
  int port = 0;
  int listener = testing::ListenLoopback(&port);
  int client = testing::ConnectLoopback(port);
  ASSERT_EQ(::write(client, "x", 1), 1);
  EXPECT_EQ(TcpRetransmits(client), 0u);
  RetransmitCounter counter;
  EXPECT_EQ(counter.Since(client), 0u);

  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  EXPECT_EQ(TcpRetransmits(pair[0]), std::nullopt);
  EXPECT_EQ(counter.Since(pair[0]), 0u);
  for (int fd : {client, listener, pair[0], pair[1]}) ::close(fd);
}

TEST(TcpRetransmitsTest, CountsSegmentsSentAgain) {
  // A full accept queue drops new SYNs: the kernel sends them again after its initial timeout (1 s).
  int port = 0;
  int listener = testing::ListenLoopback(&port);
  ASSERT_EQ(::listen(listener, 0), 0);
  std::vector<int> clients;
  for (int i = 0; i < 4; ++i) clients.push_back(StartConnect(port));
  std::vector<RetransmitCounter> counters(clients.size());
  for (size_t i = 0; i < clients.size(); ++i) EXPECT_EQ(counters[i].Since(clients[i]), 0u);
  uint32_t seen = 0;
  for (auto deadline = std::chrono::steady_clock::now() + 10s;
       seen == 0 && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(50ms);
    for (size_t i = 0; i < clients.size(); ++i) seen += counters[i].Since(clients[i]);
  }
  EXPECT_GE(seen, 1u);
  for (int fd : clients) ::close(fd);
  ::close(listener);
}

}  // namespace
}  // namespace distrun
