#include "launcher/recovery/worker_channel.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

namespace distrun {
namespace {

UniqueFd Connect(const std::string& address) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string name = address.substr(1);  // "@name": the abstract namespace
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), len), 0) << std::strerror(errno);
  return fd;
}

void Write(const UniqueFd& fd, const std::string& bytes) {
  ASSERT_EQ(::write(fd.get(), bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
}

// Processes the channel until `want` events came or a second passed (want 0: until it is quiet).
std::vector<ChannelEvent> Events(WorkerChannel& channel, size_t want) {
  std::vector<ChannelEvent> events;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while ((want == 0 || events.size() < want) && std::chrono::steady_clock::now() < deadline) {
    pollfd p{channel.fd(), POLLIN, 0};
    if (::poll(&p, 1, want == 0 ? 100 : 20) == 0 && want == 0) break;
    for (ChannelEvent& e : channel.Process()) events.push_back(std::move(e));
  }
  return events;
}

// The next message the channel sent on `fd`, or nullopt at its end.
std::optional<WorkerMessage> Receive(const UniqueFd& fd) {
  FrameReader reader;
  char buffer[4096];
  while (true) {
    if (std::optional<std::string> payload = reader.Next()) return DecodePayload(*payload);
    pollfd p{fd.get(), POLLIN, 0};
    if (::poll(&p, 1, 1000) <= 0) return std::nullopt;
    ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n <= 0) return std::nullopt;
    reader.Append(std::string_view(buffer, static_cast<size_t>(n)));
  }
}

TEST(WorkerChannel, AWorkersMessagesArriveAndItsMessagesGoOut) {
  WorkerChannel channel([](pid_t pid) -> std::optional<size_t> {
    if (pid == ::getpid()) return 2;
    return std::nullopt;
  });
  EXPECT_TRUE(channel.address().starts_with("@distrun-"));
  UniqueFd worker = Connect(channel.address());
  Write(worker,
        EncodeFrame(ToMessage(HelloMessage{1, ::getpid(), -1})) + EncodeFrame(GenerationMessage("up", 0)));
  std::vector<ChannelEvent> events = Events(channel, 2);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].slot, 2u);
  EXPECT_EQ(events[0].message->name, "hello");
  EXPECT_EQ(events[1].message->name, "up");
  EXPECT_TRUE(channel.Connected(2));
  ASSERT_TRUE(channel.Send(2, GenerationMessage("changed", 1)));
  std::optional<WorkerMessage> got = Receive(worker);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->name, "changed");
  EXPECT_FALSE(channel.Send(1, GenerationMessage("changed", 1)));  // nobody there
  worker.Reset();
  events = Events(channel, 1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_FALSE(events[0].message);  // its connection closed
  EXPECT_FALSE(channel.Connected(2));
}

TEST(WorkerChannel, AProcessThatIsNoWorkerIsRefused) {
  WorkerChannel channel([](pid_t) -> std::optional<size_t> { return std::nullopt; });
  UniqueFd stranger = Connect(channel.address());
  Events(channel, 1);
  std::optional<WorkerMessage> got = Receive(stranger);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->name, "error");
  EXPECT_NE(got->Find("message")->find("is not one of this distrun's workers"), std::string::npos);
  EXPECT_FALSE(Receive(stranger));  // then closed
  std::vector<std::string> problems = channel.TakeProblems();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("refused a connection"), std::string::npos);
}

TEST(WorkerChannel, ASecondConnectionOfOneWorkerIsRefused) {
  WorkerChannel channel([](pid_t) -> std::optional<size_t> { return 0; });
  UniqueFd first = Connect(channel.address());
  Events(channel, 0);
  UniqueFd second = Connect(channel.address());
  Events(channel, 0);
  std::optional<WorkerMessage> got = Receive(second);
  ASSERT_TRUE(got);
  EXPECT_NE(got->Find("message")->find("already has a connection"), std::string::npos);
  EXPECT_TRUE(channel.Connected(0));
}

TEST(WorkerChannel, AFrameItCannotReadClosesTheConnection) {
  WorkerChannel channel([](pid_t) -> std::optional<size_t> { return 0; });
  UniqueFd worker = Connect(channel.address());
  Write(worker, std::string("\x7f\xff\xff\xff", 4));
  std::vector<ChannelEvent> events = Events(channel, 1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_FALSE(events[0].message);
  std::vector<std::string> problems = channel.TakeProblems();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("over the limit"), std::string::npos);
}

TEST(WorkerChannel, AWorkersChildIsTheWorkers) {
  // The worker is this process's parent's child: a process it started (a shell, a wrapper) connects.
  const pid_t worker = ::getpid();
  WorkerChannel channel([worker](pid_t pid) -> std::optional<size_t> {
    if (pid == worker) return 5;
    return std::nullopt;
  });
  const pid_t child = ::fork();
  if (child == 0) {
    UniqueFd fd = Connect(channel.address());
    const std::string frame = EncodeFrame(ToMessage(HelloMessage{1, ::getpid(), -1}));
    ssize_t ignored = ::write(fd.get(), frame.data(), frame.size());
    (void)ignored;
    char c;
    ignored = ::read(fd.get(), &c, 1);  // until the parent has read it and closed
    ::_exit(0);
  }
  std::vector<ChannelEvent> events = Events(channel, 1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].slot, 5u);
  EXPECT_EQ(HelloFrom(*events[0].message).pid, child);
  channel.Drop(5);
  int status = 0;
  ::waitpid(child, &status, 0);
}

}  // namespace
}  // namespace distrun
