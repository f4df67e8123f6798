#include "runtime/metrics/observe_server.h"

#include <gtest/gtest.h>

namespace distrun {
namespace {

ServerRequest Get(const std::string& path, std::map<std::string, std::string> headers = {}) {
  ServerRequest r;
  r.method = "GET";
  r.path = path;
  r.headers = std::move(headers);
  return r;
}

class ObserveServerTest : public ::testing::Test {
 protected:
  ObserveServerTest() : service_(Config()) {}
  static ServiceConfig Config() {
    ServiceConfig c;
    c.num_nodes = 1;
    c.run_id = "run-7";
    return c;
  }
  ObserveConfig Observe() {
    ObserveConfig c;
    c.host = "127.0.0.1";
    c.job_token = "job-secret";
    c.stacks_json = [](const StacksReply& r) {
      return "{\"workers\":" + std::to_string(r.workers.size()) + "}";
    };
    c.stacks_timeout = std::chrono::milliseconds(200);
    return c;
  }
  CoordinationService service_;
};

TEST_F(ObserveServerTest, ServesMetricsThePageAndTheJobsDocument) {
  ObserveServer server(service_, Observe());
  EXPECT_GT(server.port(), 0);
  EXPECT_EQ(server.url(), "http://127.0.0.1:" + std::to_string(server.port()) + "/");
  ServerResponse metrics = server.Handle(Get("/metrics"));
  EXPECT_EQ(metrics.status, 200);
  EXPECT_EQ(metrics.content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(metrics.body.find("\ndistrun_epoch 0\n"), std::string::npos);
  ServerResponse page = server.Handle(Get("/"));
  EXPECT_EQ(page.content_type, "text/html; charset=utf-8");
  EXPECT_NE(page.body.find("<html"), std::string::npos);
  EXPECT_EQ(server.Handle(Get("/index.html")).body, page.body);
  ServerResponse job = server.Handle(Get("/job.json"));
  EXPECT_EQ(job.content_type, "application/json");
  EXPECT_NE(job.body.find("\"run_id\":\"run-7\",\"state\":\"rendezvous\""), std::string::npos) << job.body;
  EXPECT_EQ(server.Handle(Get("/elsewhere")).status, 404);
}

TEST_F(ObserveServerTest, StacksNeedTheJobTokenAndAnswerWhenNoNodeIs) {
  ObserveServer server(service_, Observe());
  EXPECT_EQ(server.Handle(Get("/stacks.json")).status, 403);
  EXPECT_EQ(server.Handle(Get("/stacks.json", {{"x-distrun-token", "job-secrex"}})).status, 403);
  EXPECT_EQ(server.Handle(Get("/stacks.json", {{"x-distrun-token", "job"}})).status, 403);
  ServerResponse stacks = server.Handle(Get("/stacks.json", {{"x-distrun-token", "job-secret"}}));
  EXPECT_EQ(stacks.status, 200);
  EXPECT_EQ(stacks.body, "{\"workers\":0}");  // no agent attached: nobody to ask
  EXPECT_EQ(stacks.body.find("job-secret"), std::string::npos);
}

TEST_F(ObserveServerTest, ABearerTokenGuardsEveryPage) {
  ObserveConfig c = Observe();
  c.bearer_token = "scrape";
  ObserveServer server(service_, c);
  for (const char* path : {"/", "/metrics", "/job.json", "/stacks.json"}) {
    ServerResponse r = server.Handle(Get(path));
    EXPECT_EQ(r.status, 401) << path;
    EXPECT_EQ(server.Handle(Get(path, {{"authorization", "Bearer scrap"}})).status, 401) << path;
    EXPECT_EQ(server.Handle(Get(path, {{"authorization", "scrape"}})).status, 401) << path;
  }
  EXPECT_EQ(server.Handle(Get("/metrics", {{"authorization", "Bearer scrape"}})).status, 200);
}

TEST_F(ObserveServerTest, AnAddressInUseIsRefusedNamingIt) {
  ObserveServer first(service_, Observe());
  ObserveConfig c = Observe();
  c.port = first.port();
  EXPECT_THROW(ObserveServer(service_, c), std::runtime_error);
}

TEST(TokensMatch, OnlyTheWholeToken) {
  EXPECT_TRUE(TokensMatch("abc", "abc"));
  EXPECT_FALSE(TokensMatch("abcd", "abc"));
  EXPECT_FALSE(TokensMatch("ab", "abc"));
  EXPECT_FALSE(TokensMatch("", ""));
}

}  // namespace
}  // namespace distrun
