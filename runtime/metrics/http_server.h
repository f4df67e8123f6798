#pragma once
// A small HTTP/1.1 server for what node 0 shows of the job (observe_server.h): GET and HEAD, one request per
// connection (Connection: close), a thread per connection up to kMaxConnections (more get 503 at once), the
// request's head read within kReadTimeout and at most kMaxHeadBytes. Enough for Prometheus, a browser and
// curl; no keep-alive, no bodies, no TLS (a proxy in front gives that).

#include <atomic>
#include <chrono>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/io/listening_socket.h"

namespace distrun {

struct ServerRequest {
  std::string method;
  std::string path;                            // without the query
  std::string query;                           // after '?', undecoded
  std::map<std::string, std::string> headers;  // names lower-cased
};

struct ServerResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // more of them
};

// "200 OK", "404 Not Found", ...
std::string HttpStatusLine(int status);

// The request's head ("GET /x?y HTTP/1.1\r\nHost: ...\r\n\r\n"); false for anything else.
bool ParseServerRequest(const std::string& head, ServerRequest* request);

class HttpServer {
 public:
  using Handler = std::function<ServerResponse(const ServerRequest&)>;
  static constexpr size_t kMaxConnections = 32;
  static constexpr size_t kMaxHeadBytes = 16 * 1024;
  static constexpr std::chrono::seconds kReadTimeout{5};
  static constexpr std::chrono::seconds kWriteTimeout{10};

  // Serves on `socket` (listening) until destroyed. `handler` runs on the connections' threads, several at
  // once. Throws std::runtime_error when the threads cannot start.
  HttpServer(ListeningSocket socket, Handler handler);
  // Stops accepting, shuts the open connections down (a client that sends nothing holds no one up) and
  // waits for their threads.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return socket_.port(); }
  // Set once the server is being destroyed: a handler that waits long (stacks) gives up on it.
  const std::atomic<bool>& stopping() const { return stopping_; }

 private:
  struct Connection {
    int fd = -1;  // closed by Reap, after the thread ended, so that the destructor may shut it down
    std::thread thread;
    std::atomic<bool> done = false;
  };
  void AcceptLoop();
  void Serve(int fd);
  void Reap(bool all);

  ListeningSocket socket_;
  Handler handler_;
  int wake_[2] = {-1, -1};  // a pipe: the destructor's byte ends the accept loop's poll
  std::atomic<bool> stopping_ = false;
  std::mutex mu_;
  std::list<std::unique_ptr<Connection>> connections_;
  std::thread accept_thread_;
};

}  // namespace distrun
