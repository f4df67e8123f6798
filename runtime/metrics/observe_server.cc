#include "runtime/metrics/observe_server.h"

#include <future>
#include <thread>

#include "detect/parse.h"
#include "runtime/metrics/job_page.h"
#include "runtime/metrics/job_view_text.h"
#include "runtime/metrics/prometheus_text.h"

namespace distrun {
namespace {

ServerResponse Text(int status, std::string body) {
  ServerResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

ServerResponse Json(int status, std::string body) {
  ServerResponse r;
  r.status = status;
  r.content_type = "application/json";
  r.body = std::move(body);
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

}  // namespace

bool TokensMatch(const std::string& given, const std::string& expected) {
  if (expected.empty()) return false;
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i) {
    diff |= static_cast<unsigned char>(given[i] ^ expected[i % expected.size()]);
  }
  return diff == 0;
}

ObserveServer::ObserveServer(CoordinationService& service, ObserveConfig config)
    : service_(service), config_(std::move(config)) {
  server_ = std::make_unique<HttpServer>(ListeningSocket::Open(config_.host, config_.port),
                                         [this](const ServerRequest& r) { return Handle(r); });
}

ObserveServer::~ObserveServer() = default;

int ObserveServer::port() const { return server_->port(); }

std::string ObserveServer::url() const { return "http://" + FormatHostPort(config_.host, port()) + "/"; }

ServerResponse ObserveServer::Handle(const ServerRequest& request) {
  if (!config_.bearer_token.empty()) {
    auto it = request.headers.find("authorization");
    const std::string given = it == request.headers.end() ? "" : it->second;
    if (!given.starts_with("Bearer ") || !TokensMatch(given.substr(7), config_.bearer_token)) {
      ServerResponse r =
          Text(401, "this job's metrics need `Authorization: Bearer TOKEN` (--metrics-token-file)\n");
      r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"distrun\"");
      return r;
    }
  }
  if (request.path == "/metrics") {
    ServerResponse r = Text(200, JobMetricsText(service_.Overview()));
    r.content_type = kPrometheusContentType;
    return r;
  }
  if (request.path == "/job.json") return Json(200, JobJson(service_.Overview()));
  if (request.path == "/" || request.path == "/index.html") {
    ServerResponse r = Text(200, std::string(embedded::kJobPageHtml));
    r.content_type = "text/html; charset=utf-8";
    r.headers.emplace_back("Cache-Control", "no-store");
    // The page fetches only its own origin's documents and runs only its own inline script.
    r.headers.emplace_back("Content-Security-Policy",
                           "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                           "connect-src 'self'; img-src data:");
    return r;
  }
  if (request.path == "/stacks.json") return Stacks(request);
  return Text(404, "no such page: " + request.path + " (try /, /metrics, /job.json)\n");
}

ServerResponse ObserveServer::Stacks(const ServerRequest& request) {
  auto it = request.headers.find("x-distrun-token");
  if (!config_.stacks_json || it == request.headers.end() || !TokensMatch(it->second, config_.job_token)) {
    return Json(403,
                "{\"error\":\"collecting stacks needs the job token (what `distrun stacks` needs) in "
                "X-Distrun-Token\"}");
  }
  // The reply may come after this request gave up (the server stopping): it holds its own promise.
  auto done = std::make_shared<std::promise<StacksReply>>();
  std::future<StacksReply> reply = done->get_future();
  service_.CollectStacks(config_.stacks_timeout, [done](const StacksReply& r) { done->set_value(r); });
  while (reply.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready) {
    if (server_ && server_->stopping()) return Json(503, "{\"error\":\"the job's coordinator is stopping\"}");
  }
  return Json(200, config_.stacks_json(reply.get()));
}

}  // namespace distrun
