#include <gtest/gtest.h>

#include "detect/coordinator_port.h"
#include "detect/detector.h"
#include "detect/errors.h"
#include "test_support.h"

namespace distrun {
namespace {

using testing::MakeEnv;

std::string UsageMessage(const Environment& env) {
  try {
    TorchelasticDetector().detect(env);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

// What torchrun --nnodes=2 --nproc-per-node=4 gives the worker with global rank 5.
Environment TorchrunWorker() {
  return MakeEnv({{"MASTER_ADDR", "node001"},
                  {"MASTER_PORT", "29500"},
                  {"WORLD_SIZE", "8"},
                  {"RANK", "5"},
                  {"LOCAL_RANK", "1"},
                  {"LOCAL_WORLD_SIZE", "4"},
                  {"GROUP_RANK", "1"},
                  {"GROUP_WORLD_SIZE", "2"},
                  {"ROLE_RANK", "5"},
                  {"ROLE_WORLD_SIZE", "8"},
                  {"TORCHELASTIC_RUN_ID", "job-42"},
                  {"TORCHELASTIC_RESTART_COUNT", "0"}});
}

TEST(TorchelasticDetector, MissingNamesTheAbsentVariables) {
  EXPECT_EQ(TorchelasticDetector().missing(MakeEnv({{"MASTER_ADDR", "h"}, {"RANK", "0"}})),
            (std::vector<std::string>{"MASTER_PORT", "WORLD_SIZE"}));
  EXPECT_TRUE(TorchelasticDetector().missing(TorchrunWorker()).empty());
}

TEST(TorchelasticDetector, TorchrunWorkerIsPerTask) {
  Topology t = TorchelasticDetector().detect(TorchrunWorker());
  EXPECT_EQ(t.method, "torchelastic");
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerTask);
  EXPECT_EQ(t.num_tasks, 8);
  EXPECT_EQ(t.task_id, 5);
  EXPECT_EQ(t.local_task, 1);
  EXPECT_EQ(t.local_tasks, 4);
  EXPECT_EQ(t.num_nodes, 2);
  EXPECT_EQ(t.node_rank, 1);
  EXPECT_EQ(t.coordinator_host, "node001");
  EXPECT_EQ(t.job_id, "job-42");
  ASSERT_TRUE(t.coordinator_port.has_value());
  EXPECT_NE(*t.coordinator_port, 29500);
  EXPECT_GE(*t.coordinator_port, kCoordinatorPortBase);
  EXPECT_LT(*t.coordinator_port, kCoordinatorPortBase + kCoordinatorPortRange);
  EXPECT_TRUE(t.hosts.empty());
  EXPECT_TRUE(t.visible_devices.empty());
}

TEST(TorchelasticDetector, NodeCountAndRankDerivedWithoutGroupVariables) {
  Environment env = TorchrunWorker();
  env.vars.erase("GROUP_RANK");
  env.vars.erase("GROUP_WORLD_SIZE");
  Topology t = TorchelasticDetector().detect(env);
  EXPECT_EQ(t.num_nodes, 2);
  EXPECT_EQ(t.node_rank, 1);
}

TEST(TorchelasticDetector, PerTaskErrors) {
  Environment no_local_size = TorchrunWorker();
  no_local_size.vars.erase("LOCAL_WORLD_SIZE");
  EXPECT_NE(UsageMessage(no_local_size).find("LOCAL_WORLD_SIZE"), std::string::npos);

  Environment uneven = TorchrunWorker();
  uneven.vars.erase("GROUP_WORLD_SIZE");
  uneven.vars["WORLD_SIZE"] = "7";
  std::string uneven_message = UsageMessage(uneven);
  EXPECT_NE(uneven_message.find("WORLD_SIZE=7"), std::string::npos) << uneven_message;
  EXPECT_NE(uneven_message.find("GROUP_WORLD_SIZE"), std::string::npos) << uneven_message;

  Environment scattered = TorchrunWorker();
  scattered.vars.erase("GROUP_RANK");
  scattered.vars["LOCAL_RANK"] = "0";  // rank 5 with local rank 0 is not node-by-node numbering
  EXPECT_NE(UsageMessage(scattered).find("GROUP_RANK"), std::string::npos);

  Environment local_too_big = TorchrunWorker();
  local_too_big.vars["LOCAL_RANK"] = "4";
  EXPECT_NE(UsageMessage(local_too_big).find("LOCAL_RANK=4"), std::string::npos);

  Environment group_too_big = TorchrunWorker();
  group_too_big.vars["GROUP_RANK"] = "2";
  EXPECT_NE(UsageMessage(group_too_big).find("GROUP_RANK=2"), std::string::npos);
}

TEST(TorchelasticDetector, PyTorchJobPodsArePerNode) {
  Environment worker = MakeEnv(
      {{"MASTER_ADDR", "resnet-master-0"}, {"MASTER_PORT", "23456"}, {"WORLD_SIZE", "3"}, {"RANK", "2"}});
  worker.hostname = "resnet-worker-1";
  Topology w = TorchelasticDetector().detect(worker);
  EXPECT_EQ(w.launch_mode, LaunchMode::kPerNode);
  EXPECT_EQ(w.num_nodes, 3);
  EXPECT_EQ(w.node_rank, 2);
  EXPECT_EQ(w.num_tasks, 3);
  EXPECT_EQ(w.task_id, 2);
  EXPECT_EQ(w.coordinator_host, "resnet-master-0");
  EXPECT_EQ(w.job_id, "");

  // The operator tells the master pod MASTER_ADDR=localhost; its hostname is what the workers use.
  Environment master =
      MakeEnv({{"MASTER_ADDR", "localhost"}, {"MASTER_PORT", "23456"}, {"WORLD_SIZE", "3"}, {"RANK", "0"}});
  master.hostname = "resnet-master-0";
  Topology m = TorchelasticDetector().detect(master);
  EXPECT_EQ(m.coordinator_host, "resnet-master-0");
  EXPECT_EQ(m.coordinator_port, w.coordinator_port);
}

TEST(TorchelasticDetector, SingleNodeKeepsLoopback) {
  Environment env =
      MakeEnv({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}, {"WORLD_SIZE", "1"}, {"RANK", "0"}});
  EXPECT_EQ(TorchelasticDetector().detect(env).coordinator_host, "127.0.0.1");
}

TEST(TorchelasticDetector, MalformedValues) {
  auto message = [](std::initializer_list<std::pair<std::string, std::string>> changes) {
    Environment env =
        MakeEnv({{"MASTER_ADDR", "head"}, {"MASTER_PORT", "29500"}, {"WORLD_SIZE", "4"}, {"RANK", "1"}});
    for (const auto& [k, v] : changes) env.vars[k] = v;
    return UsageMessage(env);
  };
  EXPECT_NE(message({{"RANK", "4"}}).find("RANK=4"), std::string::npos);
  EXPECT_NE(message({{"RANK", "one"}}).find("RANK='one'"), std::string::npos);
  EXPECT_NE(message({{"WORLD_SIZE", "0"}}).find("WORLD_SIZE=0"), std::string::npos);
  EXPECT_NE(message({{"MASTER_PORT", "0"}}).find("MASTER_PORT='0'"), std::string::npos);
  EXPECT_NE(message({{"MASTER_PORT", "http"}}).find("MASTER_PORT='http'"), std::string::npos);
  EXPECT_NE(message({{"MASTER_ADDR", "head:29500"}}).find("MASTER_ADDR='head:29500'"), std::string::npos);
  EXPECT_NE(message({{"MASTER_ADDR", ""}}).find("MASTER_ADDR=''"), std::string::npos);
  EXPECT_NE(message({{"MASTER_ADDR", "tcp://head"}}).find("MASTER_ADDR='tcp://head'"), std::string::npos);
}

TEST(TorchelasticDetector, Ipv6MasterAddress) {
  for (const char* addr : {"fd00::1", "[fd00::1]"}) {
    Environment env =
        MakeEnv({{"MASTER_ADDR", addr}, {"MASTER_PORT", "29500"}, {"WORLD_SIZE", "2"}, {"RANK", "1"}});
    EXPECT_EQ(TorchelasticDetector().detect(env).coordinator_host, "fd00::1") << addr;
  }
}

TEST(TorchelasticDetector, CoordinatorPortNeverEqualsMasterPort) {
  for (int master_port = kCoordinatorPortBase; master_port < kCoordinatorPortBase + kCoordinatorPortRange;
       ++master_port) {
    Environment env = MakeEnv({{"MASTER_ADDR", "h"},
                               {"MASTER_PORT", std::to_string(master_port)},
                               {"WORLD_SIZE", "2"},
                               {"RANK", "0"}});
    ASSERT_NE(TorchelasticDetector().detect(env).coordinator_port, master_port);
  }
}

TEST(TorchelasticDetector, KubeflowTrainerPetVariables) {
  Environment env = MakeEnv({{"PET_MASTER_ADDR", "tj-node-0-0.tj"},
                             {"PET_MASTER_PORT", "29400"},
                             {"PET_NNODES", "4"},
                             {"PET_NPROC_PER_NODE", "8"},
                             {"PET_NODE_RANK", "3"}});
  ASSERT_TRUE(TorchelasticDetector().missing(env).empty());
  Topology t = TorchelasticDetector().detect(env);
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerNode);
  EXPECT_EQ(t.num_nodes, 4);
  EXPECT_EQ(t.node_rank, 3);
  EXPECT_EQ(t.coordinator_host, "tj-node-0-0.tj");
  EXPECT_NE(t.coordinator_port, 29400);

  env.vars["PET_NNODES"] = "2:4";
  EXPECT_NE(UsageMessage(env).find("PET_NNODES='2:4'"), std::string::npos);
  env.vars["PET_NNODES"] = "4";
  env.vars["PET_NODE_RANK"] = "4";
  EXPECT_NE(UsageMessage(env).find("PET_NODE_RANK=4"), std::string::npos);
}

}  // namespace
}  // namespace distrun
