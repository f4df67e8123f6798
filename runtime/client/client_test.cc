// The workers' C API against a real server on 127.0.0.1:0.

#include "runtime/client/client.h"

#include <gtest/gtest.h>

#include <future>
#include <string>

#include "detect/errors.h"
#include "distrun/client.h"
#include "runtime/transport/grpc_server.h"
#include "runtime/transport/test_node0.h"

namespace distrun {
namespace {

using namespace std::chrono_literals;

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServiceConfig sc;
    service = std::make_unique<CoordinationService>(sc);
    server = std::make_unique<GrpcServer>(*service, testing::TestGrpcServerConfig("client-token"));
  }
  void TearDown() override {
    server.reset();
    service.reset();
  }
  distrun_client* Open(int process_id, const char* token = "client-token") {
    return distrun_client_open(server->address().c_str(), token, process_id, 5000, nullptr, 0);
  }
  static std::string LastError(distrun_client* c) {
    char buf[512];
    distrun_client_last_error(c, buf, sizeof buf);
    return buf;
  }

  std::unique_ptr<CoordinationService> service;
  std::unique_ptr<GrpcServer> server;
};

TEST_F(ClientTest, CApiKeyValueRoundTrip) {
  distrun_client* c = Open(0);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(distrun_kv_set(c, "job/id", "abc", 3), DISTRUN_OK);
  char* value = nullptr;
  size_t len = 0;
  ASSERT_EQ(distrun_kv_get(c, "job/id", 1000, &value, &len), DISTRUN_OK);
  EXPECT_EQ(std::string(value, len), "abc");
  EXPECT_EQ(value[len], '\0');
  distrun_free(value);

  int found = 1;
  ASSERT_EQ(distrun_kv_try_get(c, "job/none", &found, &value, &len), DISTRUN_OK);
  EXPECT_EQ(found, 0);
  EXPECT_EQ(value, nullptr);

  int64_t n = 0;
  ASSERT_EQ(distrun_kv_add(c, "job/count", 2, &n), DISTRUN_OK);
  ASSERT_EQ(distrun_kv_add(c, "job/count", 3, &n), DISTRUN_OK);
  EXPECT_EQ(n, 5);

  int swapped = 0;
  ASSERT_EQ(distrun_kv_cas(c, "job/leader", nullptr, 0, "w0", 2, &swapped), DISTRUN_OK);
  EXPECT_EQ(swapped, 1);
  ASSERT_EQ(distrun_kv_cas(c, "job/leader", nullptr, 0, "w1", 2, &swapped), DISTRUN_OK);
  EXPECT_EQ(swapped, 0);
  ASSERT_EQ(distrun_kv_cas(c, "job/leader", "w0", 2, "w1", 2, &swapped), DISTRUN_OK);
  EXPECT_EQ(swapped, 1);

  distrun_kv_entry* entries = nullptr;
  size_t count = 0;
  ASSERT_EQ(distrun_kv_list(c, "job/", &entries, &count), DISTRUN_OK);
  ASSERT_EQ(count, 3u);
  EXPECT_STREQ(entries[0].key, "job/count");
  EXPECT_EQ(std::string(entries[2].value, entries[2].value_len), "w1");
  distrun_kv_list_free(entries, count);

  int deleted = 0;
  ASSERT_EQ(distrun_kv_del(c, "job/id", &deleted), DISTRUN_OK);
  EXPECT_EQ(deleted, 1);

  EXPECT_EQ(distrun_kv_get(c, "job/id", 50, &value, &len), DISTRUN_DEADLINE_EXCEEDED);
  EXPECT_NE(LastError(c).find("'job/id'"), std::string::npos) << LastError(c);
  distrun_client_close(c);
}

TEST_F(ClientTest, CApiBarrier) {
  auto arrive = [this](int p) {
    distrun_client* c = Open(p);
    int rc = distrun_barrier(c, "start", 2, 5000);
    distrun_client_close(c);
    return rc;
  };
  auto other = std::async(std::launch::async, arrive, 1);
  EXPECT_EQ(arrive(0), DISTRUN_OK);
  EXPECT_EQ(other.get(), DISTRUN_OK);
}

TEST_F(ClientTest, CApiErrors) {
  char error[256] = "";
  EXPECT_EQ(distrun_client_open("", "t", 0, 0, error, sizeof error), nullptr);
  EXPECT_NE(std::string(error).find("DISTRUN_COORDINATOR_ADDRESS"), std::string::npos);
  EXPECT_EQ(distrun_client_open("127.0.0.1:1", "t", -1, 0, error, sizeof error), nullptr);
  EXPECT_NE(std::string(error).find("DISTRUN_PROCESS_ID"), std::string::npos);

  distrun_client* wrong = Open(0, "wrong");
  EXPECT_EQ(distrun_kv_set(wrong, "k", "v", 1), DISTRUN_UNAUTHENTICATED);
  EXPECT_EQ(distrun_kv_set(wrong, nullptr, "v", 1), DISTRUN_INVALID_ARGUMENT);
  distrun_client_close(wrong);
  EXPECT_EQ(distrun_kv_set(nullptr, "k", "v", 1), DISTRUN_INVALID_ARGUMENT);
}

TEST_F(ClientTest, CppClient) {
  ClientOptions o;
  o.coordinator_address = server->address();
  o.token = "client-token";
  o.process_id = 0;
  Client c(o);
  ASSERT_TRUE(c.Set("k", "v").ok());
  std::optional<std::string> v;
  ASSERT_TRUE(c.TryGet("k", &v).ok());
  EXPECT_EQ(v, "v");
  EXPECT_TRUE(c.Barrier("solo", 1, 1s).ok());
  o.coordinator_address.clear();
  EXPECT_THROW(Client{o}, UsageError);
}

}  // namespace
}  // namespace distrun
