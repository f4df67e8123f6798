#include "runtime/io/listening_socket.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace distrun {
namespace {

bool Connects(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

TEST(ListeningSocket, ListensOnThePortTheOsPickedUntilDestroyed) {
  int port = 0;
  {
    ListeningSocket s = ListeningSocket::Open("127.0.0.1", 0);
    ASSERT_TRUE(s.valid());
    port = s.port();
    ASSERT_GT(port, 0);
    EXPECT_TRUE(Connects(port));  // the backlog holds it before anyone accepts
    ListeningSocket moved = std::move(s);
    EXPECT_FALSE(s.valid());
    EXPECT_EQ(moved.port(), port);
  }
  EXPECT_FALSE(Connects(port));
}

TEST(ListeningSocket, ReleaseHandsTheDescriptorOver) {
  ListeningSocket s = ListeningSocket::Open("127.0.0.1", 0);
  const int port = s.port();
  const int fd = s.Release();
  EXPECT_FALSE(s.valid());
  EXPECT_TRUE(Connects(port));
  ::close(fd);
}

TEST(ListeningSocket, AReservedPortRefusesConnectionsUntilItListens) {
  ListeningSocket s = ListeningSocket::Reserve("127.0.0.1", 0);
  ASSERT_GT(s.port(), 0);
  EXPECT_FALSE(Connects(s.port()));
  EXPECT_THROW(ListeningSocket::Open("127.0.0.1", s.port()), std::runtime_error);  // held all the same
  s.Listen();
  EXPECT_TRUE(Connects(s.port()));
}

TEST(ListeningSocket, APortInUseIsAnErrorNamingTheAddress) {
  ListeningSocket s = ListeningSocket::Open("127.0.0.1", 0);
  try {
    ListeningSocket::Open("127.0.0.1", s.port());
    FAIL() << "bound twice";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(s.port())), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace distrun
