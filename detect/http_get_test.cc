#include "detect/http_get.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "detect/test_http_server.h"

namespace distrun {
namespace {

using testing::ChunkedReply;
using testing::RawReply;
using testing::Reply;
using testing::SilentReply;
using testing::TestHttpRequest;
using testing::TestHttpServer;

HttpRequest Get(const TestHttpServer& server, std::string path, std::string host = "127.0.0.1") {
  HttpRequest request;
  request.host = std::move(host);
  request.port = server.port();
  request.path = std::move(path);
  request.timeout = std::chrono::milliseconds(2000);
  return request;
}

TEST(HttpGetBlocking, ContentLengthBodyAndHeadersSent) {
  TestHttpRequest seen;
  TestHttpServer server([&](const TestHttpRequest& r) {
    seen = r;
    return Reply(200, "hello world");
  });
  ASSERT_TRUE(server.ok());
  HttpRequest request = Get(server, "/computeMetadata/v1/instance/attributes/x");
  request.headers = {{"Metadata-Flavor", "Google"}};
  auto response = HttpGetBlocking(request);
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "hello world");
  EXPECT_EQ(seen.method, "GET");
  EXPECT_EQ(seen.path, "/computeMetadata/v1/instance/attributes/x");
  ASSERT_NE(seen.Header("Metadata-Flavor"), nullptr);
  EXPECT_EQ(*seen.Header("Metadata-Flavor"), "Google");
  ASSERT_NE(seen.Header("Host"), nullptr);
  EXPECT_EQ(*seen.Header("Host"), "127.0.0.1:" + std::to_string(server.port()));
}

TEST(HttpGetBlocking, ChunkedBodyIsDecoded) {
  std::string body = "t1v-n-0,t1v-n-1,t1v-n-2,t1v-n-3";
  TestHttpServer server([&](const TestHttpRequest&) { return ChunkedReply(200, body); });
  ASSERT_TRUE(server.ok());
  auto response = HttpGetBlocking(Get(server, "/chunked"));
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, body);
}

TEST(HttpGetBlocking, EmptyChunkedBody) {
  TestHttpServer server([](const TestHttpRequest&) { return ChunkedReply(200, ""); });
  ASSERT_TRUE(server.ok());
  auto response = HttpGetBlocking(Get(server, "/"));
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->body, "");
}

TEST(HttpGetBlocking, BodyUntilCloseWithoutLength) {
  TestHttpServer server([](const TestHttpRequest&) {
    return RawReply("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end");
  });
  ASSERT_TRUE(server.ok());
  auto response = HttpGetBlocking(Get(server, "/"));
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->body, "until the end");
}

TEST(HttpGetBlocking, ErrorStatusIsAResponseNotAFailure) {
  TestHttpServer server([](const TestHttpRequest&) { return Reply(404, "not found\n"); });
  ASSERT_TRUE(server.ok());
  auto response = HttpGetBlocking(Get(server, "/missing"));
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 404);
}

TEST(HttpGetBlocking, TimesOutWhenTheServerNeverAnswers) {
  TestHttpServer server([](const TestHttpRequest&) { return SilentReply(); });
  ASSERT_TRUE(server.ok());
  HttpRequest request = Get(server, "/slow");
  request.timeout = std::chrono::milliseconds(300);
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(HttpGetBlocking(request).has_value());
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_GE(elapsed, std::chrono::milliseconds(250));
  EXPECT_LT(elapsed, std::chrono::milliseconds(1500));
}

TEST(HttpGetBlocking, ConnectionRefusedIsNullopt) {
  // Bind a port and close it again: nothing listens there afterwards.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), len), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ::close(fd);
  HttpRequest request;
  request.host = "127.0.0.1";
  request.port = ntohs(addr.sin_port);
  request.path = "/";
  EXPECT_FALSE(HttpGetBlocking(request).has_value());
}

TEST(HttpGetBlocking, TruncatedBodyIsNullopt) {
  TestHttpServer server(
      [](const TestHttpRequest&) { return RawReply("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort"); });
  ASSERT_TRUE(server.ok());
  EXPECT_FALSE(HttpGetBlocking(Get(server, "/")).has_value());
}

TEST(HttpGetBlocking, TruncatedChunkedBodyIsNullopt) {
  TestHttpServer server([](const TestHttpRequest&) {
    return RawReply("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n");
  });
  ASSERT_TRUE(server.ok());
  EXPECT_FALSE(HttpGetBlocking(Get(server, "/")).has_value());
}

TEST(ParseHttpAnswer, AChunkSizeLineOverOneKibIsRefusedWholeAsAsItArrives) {
  // Found by the fuzzer: a size line whose extension ran past 1 KiB was refused while it arrived (no line
  // end yet) but taken once its line end came.
  const std::string head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string line = "5;" + std::string(1100, 'x') + "\r\nhello\r\n0\r\n\r\n";
  HttpResponse r;
  EXPECT_EQ(ParseHttpAnswer(head + line.substr(0, 1050), /*closed=*/false, &r), HttpAnswer::kBad);
  EXPECT_EQ(ParseHttpAnswer(head + line, /*closed=*/true, &r), HttpAnswer::kBad);
  // Extensions within the limit are ignored, as before.
  EXPECT_EQ(ParseHttpAnswer(head + "5;name=value\r\nhello\r\n0\r\n\r\n", /*closed=*/true, &r),
            HttpAnswer::kComplete);
  EXPECT_EQ(r.body, "hello");
}

TEST(HttpGetBlocking, MalformedResponsesAreNullopt) {
  for (const char* raw : {"garbage\r\n\r\n", "HTTP/1.1 2x0 OK\r\n\r\n", "HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
                          "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nzz",
                          "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"}) {
    TestHttpServer server([&](const TestHttpRequest&) { return RawReply(raw); });
    ASSERT_TRUE(server.ok());
    EXPECT_FALSE(HttpGetBlocking(Get(server, "/")).has_value()) << raw;
  }
}

TEST(HttpGetBlocking, OversizedBodyIsRefused) {
  TestHttpServer server([](const TestHttpRequest&) { return Reply(200, std::string(2 << 20, 'x')); });
  ASSERT_TRUE(server.ok());
  EXPECT_FALSE(HttpGetBlocking(Get(server, "/")).has_value());
}

TEST(HttpGetBlocking, RefusesHeaderInjection) {
  TestHttpServer server([](const TestHttpRequest&) { return Reply(200, "x"); });
  ASSERT_TRUE(server.ok());
  HttpRequest request = Get(server, "/");
  request.headers = {{"Metadata-Flavor", "Google\r\nX-Evil: 1"}};
  EXPECT_FALSE(HttpGetBlocking(request).has_value());
  EXPECT_FALSE(HttpGetBlocking(Get(server, "no-slash")).has_value());
  EXPECT_EQ(server.requests(), 0);
}

TEST(HttpGetBlocking, Ipv6Loopback) {
  TestHttpServer server([](const TestHttpRequest& r) { return Reply(200, *r.Header("Host")); }, "::1");
  if (!server.ok()) GTEST_SKIP() << "no IPv6 loopback on this machine";
  auto response = HttpGetBlocking(Get(server, "/", "::1"));
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->body, "[::1]:" + std::to_string(server.port()));
}

}  // namespace
}  // namespace distrun
