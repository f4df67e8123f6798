#include "runtime/metrics/http_server.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>

namespace distrun {
namespace {

TEST(ParseServerRequest, ReadsTheRequestLineAndHeaders) {
  ServerRequest r;
  ASSERT_TRUE(
      ParseServerRequest("GET /job.json?x=1 HTTP/1.1\r\nHost: a\r\nAuthorization:  Bearer t \r\n\r\n", &r));
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.path, "/job.json");
  EXPECT_EQ(r.query, "x=1");
  EXPECT_EQ(r.headers.at("authorization"), "Bearer t");
  EXPECT_EQ(r.headers.at("host"), "a");
  EXPECT_FALSE(ParseServerRequest("hello\r\n\r\n", &r));
  EXPECT_FALSE(ParseServerRequest("GET nothing HTTP/1.1\r\n\r\n", &r));
  EXPECT_FALSE(ParseServerRequest("GET / HTTP/1.1\r\nno colon\r\n\r\n", &r));
}

// What a client reads from the server for `request`.
std::string Exchange(int port, const std::string& request) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(::send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  std::string reply;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) reply.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return reply;
}

TEST(HttpServer, AnswersGetAndHeadAndRefusesTheRest) {
  std::atomic<int> calls = 0;
  HttpServer server(ListeningSocket::Open("127.0.0.1", 0), [&](const ServerRequest& r) {
    ++calls;
    ServerResponse out;
    out.body = "path " + r.path + "\n";
    out.headers.emplace_back("Cache-Control", "no-store");
    return out;
  });
  std::string reply = Exchange(server.port(), "GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(reply.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << reply;
  EXPECT_NE(reply.find("Content-Length: 8\r\n"), std::string::npos) << reply;
  EXPECT_NE(reply.find("Cache-Control: no-store\r\n"), std::string::npos);
  EXPECT_NE(reply.find("\r\n\r\npath /a\n"), std::string::npos);
  reply = Exchange(server.port(), "HEAD /a HTTP/1.1\r\n\r\n");
  EXPECT_NE(reply.find("Content-Length: 8\r\n"), std::string::npos);
  EXPECT_EQ(reply.find("path"), std::string::npos);  // a HEAD has no body
  reply = Exchange(server.port(), "POST /a HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(reply.rfind("HTTP/1.1 405 Method Not Allowed\r\n", 0), 0u) << reply;
  reply = Exchange(server.port(), "garbage\r\n\r\n");
  EXPECT_EQ(reply.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << reply;
  reply = Exchange(server.port(), "GET /" + std::string(HttpServer::kMaxHeadBytes + 10, 'x'));
  EXPECT_EQ(reply.rfind("HTTP/1.1 431", 0), 0u) << reply.substr(0, 80);
  EXPECT_EQ(calls, 2);
}

TEST(HttpServer, AHandlersExceptionIsA503) {
  HttpServer server(ListeningSocket::Open("127.0.0.1", 0), [](const ServerRequest&) -> ServerResponse {
    throw std::runtime_error("the job is gone");
  });
  const std::string reply = Exchange(server.port(), "GET / HTTP/1.1\r\n\r\n");
  EXPECT_EQ(reply.rfind("HTTP/1.1 503 Service Unavailable\r\n", 0), 0u) << reply;
  EXPECT_NE(reply.find("the job is gone\n"), std::string::npos);
}

}  // namespace
}  // namespace distrun
