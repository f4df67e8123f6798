// The NCCL helper's id exchange and settings (runtime/nccl/bootstrap.h), against a real server on
// 127.0.0.1:0. NCCL itself is not needed: the id is opaque bytes here.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "distrun/client.h"
#include "runtime/nccl/bootstrap.h"
#include "runtime/service/service.h"
#include "runtime/transport/grpc_server.h"
#include "runtime/transport/test_node0.h"

namespace distrun {
namespace {

using ::testing::HasSubstr;
using Vars = std::map<std::string, std::string>;

std::optional<nccl::WorkerSettings> Read(const Vars& vars, std::string* error) {
  return nccl::ReadWorkerSettings(
      [&vars](const char* name) -> const char* {
        auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
      },
      error);
}

const Vars kWorker = {{"DISTRUN_PROCESS_ID", "3"}, {"DISTRUN_NUM_PROCESSES", "8"},
                      {"DISTRUN_LOCAL_RANK", "1"}, {"DISTRUN_LOCAL_DEVICE_IDS", "0"},
                      {"DISTRUN_RUN_ID", "job42"}, {"DISTRUN_RESTART_COUNT", "2"}};

TEST(NcclSettings, ReadsWhatDistrunSetsForAWorker) {
  std::string error;
  auto s = Read(kWorker, &error);
  ASSERT_TRUE(s.has_value()) << error;
  EXPECT_EQ(s->rank, 3);
  EXPECT_EQ(s->nranks, 8);
  EXPECT_EQ(s->local_rank, 1);
  EXPECT_EQ(s->local_device_ids, std::vector<int>{0});
  EXPECT_EQ(s->run_id, "job42");
  EXPECT_EQ(s->restart_count, 2);
  EXPECT_EQ(nccl::UniqueIdKey(*s, "default"), "distrun/nccl/job42/2/default");
}

TEST(NcclSettings, MissingOrBadVariablesSayWhichAndWhy) {
  std::string error;
  Vars v = kWorker;
  v.erase("DISTRUN_PROCESS_ID");
  EXPECT_FALSE(Read(v, &error).has_value());
  EXPECT_EQ(error,
            "DISTRUN_PROCESS_ID is not set; run this program as a worker of distrun (distrun -- PROGRAM)");
  v = kWorker;
  v["DISTRUN_NUM_PROCESSES"] = "eight";
  EXPECT_FALSE(Read(v, &error).has_value());
  EXPECT_THAT(error, HasSubstr("DISTRUN_NUM_PROCESSES='eight' is not a count"));
  v = kWorker;
  v["DISTRUN_PROCESS_ID"] = "8";
  EXPECT_FALSE(Read(v, &error).has_value());
  EXPECT_THAT(error, HasSubstr("DISTRUN_PROCESS_ID=8 is not below DISTRUN_NUM_PROCESSES=8"));
  v = kWorker;
  v["DISTRUN_LOCAL_DEVICE_IDS"] = "0,x";
  EXPECT_FALSE(Read(v, &error).has_value());
  EXPECT_THAT(error, HasSubstr("DISTRUN_LOCAL_DEVICE_IDS='0,x'"));
}

TEST(NcclSettings, TheLocalDevice) {
  std::string error;
  auto s = Read(kWorker, &error);
  ASSERT_TRUE(s);
  EXPECT_EQ(nccl::LocalDevice(*s, 1), 0);  // narrowed by CUDA_VISIBLE_DEVICES: its first (only) device
  Vars v = kWorker;
  v["DISTRUN_LOCAL_DEVICE_IDS"] = "2,3";  // --device-binding none: its share of the node's devices
  EXPECT_EQ(nccl::LocalDevice(*Read(v, &error), 8), 2);
  v["DISTRUN_LOCAL_DEVICE_IDS"] = "";  // distrun knew of no GPU: by local rank
  v["DISTRUN_LOCAL_RANK"] = "5";
  EXPECT_EQ(nccl::LocalDevice(*Read(v, &error), 4), 1);
}

TEST(NcclSettings, CommunicatorNames) {
  EXPECT_TRUE(nccl::ValidCommName("default"));
  EXPECT_TRUE(nccl::ValidCommName("tp-0.dp_1"));
  for (const char* bad : {"", "a/b", "a b", "ü"}) EXPECT_FALSE(nccl::ValidCommName(bad)) << bad;
  EXPECT_FALSE(nccl::ValidCommName(std::string(65, 'a')));
}

class NcclExchange : public ::testing::Test {
 protected:
  void SetUp() override {
    service = std::make_unique<CoordinationService>(ServiceConfig{});
    server = std::make_unique<GrpcServer>(*service, testing::TestGrpcServerConfig("nccl-token"));
  }
  distrun_client* Open(int process_id) {
    return distrun_client_open(server->address().c_str(), "nccl-token", process_id, 5000, nullptr, 0);
  }
  std::unique_ptr<CoordinationService> service;
  std::unique_ptr<GrpcServer> server;
};

TEST_F(NcclExchange, EveryRankGetsWorkerZerosId) {
  const std::string key = "distrun/nccl/run/0/default";
  const std::string id(128, '\x07');
  // Ranks 1-3 wait before rank 0 has published.
  std::vector<std::future<std::pair<int, std::string>>> others;
  for (int rank = 1; rank < 4; ++rank) {
    others.push_back(std::async(std::launch::async, [this, rank, &key] {
      distrun_client* c = Open(rank);
      std::string got, error;
      int rc = nccl::ShareUniqueId(c, key, rank, 128, 10'000, &got, &error);
      distrun_client_close(c);
      return std::make_pair(rc, rc == 0 ? got : error);
    }));
  }
  distrun_client* zero = Open(0);
  std::string mine = id, error;
  ASSERT_EQ(nccl::ShareUniqueId(zero, key, 0, 128, 10'000, &mine, &error), DISTRUN_OK) << error;
  for (auto& f : others) {
    auto [rc, got] = f.get();
    EXPECT_EQ(rc, DISTRUN_OK) << got;
    EXPECT_EQ(got, id);
  }
  // The same name again in this run: refused, two communicators must not share an id.
  std::string again = std::string(128, '\x08');
  EXPECT_EQ(nccl::ShareUniqueId(zero, key, 0, 128, 10'000, &again, &error), DISTRUN_ALREADY_EXISTS);
  EXPECT_THAT(error, HasSubstr("already holds an NCCL id"));
  distrun_client_close(zero);
}

TEST_F(NcclExchange, WaitingEndsWithTheKeyInTheMessage) {
  distrun_client* c = Open(1);
  std::string got, error;
  EXPECT_EQ(nccl::ShareUniqueId(c, "distrun/nccl/run/0/late", 1, 128, 200, &got, &error),
            DISTRUN_DEADLINE_EXCEEDED);
  EXPECT_THAT(error, HasSubstr("worker 0 did not publish the NCCL id under 'distrun/nccl/run/0/late'"));
  distrun_client_close(c);
}

TEST_F(NcclExchange, AValueOfTheWrongSizeIsRefused) {
  distrun_client* c = Open(1);
  ASSERT_EQ(distrun_kv_set(c, "distrun/nccl/run/0/odd", "short", 5), DISTRUN_OK);
  std::string got, error;
  EXPECT_EQ(nccl::ShareUniqueId(c, "distrun/nccl/run/0/odd", 1, 128, 1000, &got, &error),
            DISTRUN_FAILED_PRECONDITION);
  EXPECT_THAT(error, HasSubstr("holds 5 bytes, not an NCCL id of 128"));
  distrun_client_close(c);
}

}  // namespace
}  // namespace distrun
