#pragma once
// What node 0 serves of the job at --metrics-address (http_server.h underneath): read-only.
//   GET /metrics       Prometheus' text format 0.0.4 (job_view_text.h)
//   GET /, /index.html the job's page (job_page.h): one self-contained file that polls job.json
//   GET /job.json      the job now, as the page reads it
//   GET /stacks.json   every rank's stack, merged; needs the job token in X-Distrun-Token (what
//                      `distrun stacks` needs), for a stack shows what a process is doing
// With a bearer token (--metrics-token-file), every request must carry `Authorization: Bearer TOKEN`.
// The job token is never in a reply.

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "runtime/metrics/http_server.h"
#include "runtime/service/service.h"

namespace distrun {

struct ObserveConfig {
  std::string host;          // where to bind, as told; never a wildcard unless told so
  int port = 0;              // 0: the OS picks
  std::string bearer_token;  // empty: no Authorization needed
  std::string job_token;     // what /stacks.json needs; empty: /stacks.json is refused
  // The merged stacks as the page's JSON (the launcher's stack merge); unset: /stacks.json is refused.
  std::function<std::string(const StacksReply&)> stacks_json;
  std::chrono::milliseconds stacks_timeout{15'000};
};

class ObserveServer {
 public:
  // Binds and serves. Throws std::runtime_error naming the address when it cannot bind.
  ObserveServer(CoordinationService& service, ObserveConfig config);
  ~ObserveServer();
  ObserveServer(const ObserveServer&) = delete;
  ObserveServer& operator=(const ObserveServer&) = delete;

  int port() const;
  std::string url() const;  // "http://HOST:PORT/"

  // One request, as the server's threads handle it (tests call it directly).
  ServerResponse Handle(const ServerRequest& request);

 private:
  ServerResponse Stacks(const ServerRequest& request);

  CoordinationService& service_;
  ObserveConfig config_;
  std::unique_ptr<HttpServer> server_;  // last: its threads call Handle
};

// Equal without telling, by its time, how much of a token matched.
bool TokensMatch(const std::string& given, const std::string& expected);

}  // namespace distrun
