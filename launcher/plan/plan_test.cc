#include "launcher/plan/plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "detect/errors.h"
#include "detect/test_temp_root.h"
#include "test_support.h"

namespace distrun {
namespace {

using Tokens = std::vector<std::string>;
using Ids = std::vector<int>;
using testing::MakeEnv;

// An environment whose GPU discovery finds exactly `gpus` devices (through a fake driver query) and reads
// nothing from this machine.
Environment EnvWithGpus(int gpus, std::initializer_list<std::pair<std::string, std::string>> vars = {}) {
  Environment env = MakeEnv(vars);
  env.root = "/nonexistent-distrun-plan-test-root";
  env.cuda_query = [gpus]() -> std::optional<std::vector<GpuInfo>> {
    std::vector<GpuInfo> found;
    for (int i = 0; i < gpus; ++i) {
      GpuInfo g;
      g.ordinal = i;
      g.uuid = "GPU-" + std::to_string(1000 + i);
      found.push_back(g);
    }
    return found;
  };
  return env;
}

// No driver, and a file-system root with nothing in it: no GPU at all.
Environment EnvWithoutGpus(std::initializer_list<std::pair<std::string, std::string>> vars = {}) {
  Environment env = MakeEnv(vars);
  env.root = "/nonexistent-distrun-plan-test-root";
  return env;
}

Topology LocalNode() {
  Topology t;
  t.method = "local";
  t.coordinator_host = "127.0.0.1";
  t.launch_mode = LaunchMode::kPerNode;
  t.hosts = {"testhost"};
  return t;
}

// Task `task` of an srun step with 8 tasks on 2 nodes, 4 per node.
Topology SlurmTask(int task, int local_task, int node) {
  Topology t;
  t.method = "slurm";
  t.coordinator_host = "node001";
  t.coordinator_port = 61497;
  t.launch_mode = LaunchMode::kPerTask;
  t.num_nodes = 2;
  t.node_rank = node;
  t.hosts = {"node001", "node002"};
  t.num_tasks = 8;
  t.task_id = task;
  t.local_task = local_task;
  t.local_tasks = 4;
  t.job_id = "1234";
  return t;
}

// One distrun per node of a 2-node srun step (per-node layout).
Topology SlurmNode(int node) {
  Topology t = SlurmTask(node, 0, node);
  t.launch_mode = LaunchMode::kPerNode;
  t.num_tasks = 2;
  t.local_tasks = 1;
  return t;
}

Topology WithDevices(Topology t, Tokens tokens, std::string variable = "CUDA_VISIBLE_DEVICES") {
  t.visible_devices = std::move(tokens);
  t.device_variable = std::move(variable);
  return t;
}

Plan Build(const Topology& t, const Options& o, const Environment& env) {
  LocalLayout layout = ComputeLocalLayout(t, o, env);
  JobAssignment a = ProvisionalAssignment(t, layout, o);
  return MakePlan(t, layout, a, o, env);
}

std::map<std::string, std::string> EnvOf(const WorkerPlan& w) {
  std::map<std::string, std::string> m;
  for (const auto& [name, value] : w.env) {
    EXPECT_TRUE(m.emplace(name, value).second) << "variable set twice: " << name;
  }
  return m;
}

std::vector<std::string> Column(const Plan& plan, const std::string& name) {
  std::vector<std::string> values;
  for (const WorkerPlan& w : plan.workers) {
    auto env = EnvOf(w);
    values.push_back(env.count(name) ? env[name] : "<unset>");
  }
  return values;
}

bool AnyContains(const std::vector<std::string>& items, const std::string& part) {
  for (const auto& s : items) {
    if (s.find(part) != std::string::npos) return true;
  }
  return false;
}

TEST(Plan, PickFreePortIsAValidPort) {
  int port = PickFreePort();
  EXPECT_GE(port, 1);
  EXPECT_LE(port, 65535);
}

TEST(Plan, LocalNodeGetsOneWorkerPerGpu) {
  Plan plan = Build(LocalNode(), Options{}, EnvWithGpus(4));
  EXPECT_EQ(plan.layout.mode, LaunchMode::kPerNode);
  EXPECT_EQ(plan.layout.local_workers, 4);
  EXPECT_EQ(plan.layout.node_devices, (Tokens{"0", "1", "2", "3"}));
  EXPECT_EQ(plan.layout.device_source, "cuda-driver");
  ASSERT_EQ(plan.workers.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const WorkerPlan& w = plan.workers[static_cast<size_t>(i)];
    EXPECT_EQ(w.process_id, i);
    EXPECT_EQ(w.local_rank, i);
    EXPECT_EQ(w.device_tokens, Tokens{std::to_string(i)});
    EXPECT_EQ(w.local_device_ids, Ids{0});
  }
  EXPECT_EQ(Column(plan, "CUDA_VISIBLE_DEVICES"), (Tokens{"0", "1", "2", "3"}));
  EXPECT_EQ(Column(plan, "RANK"), (Tokens{"0", "1", "2", "3"}));
  EXPECT_EQ(Column(plan, "LOCAL_RANK"), (Tokens{"0", "1", "2", "3"}));
  EXPECT_EQ(Column(plan, "WORLD_SIZE"), (Tokens(4, "4")));
  EXPECT_EQ(Column(plan, "LOCAL_WORLD_SIZE"), (Tokens(4, "4")));
  EXPECT_EQ(Column(plan, "MASTER_ADDR"), (Tokens(4, "127.0.0.1")));
  EXPECT_EQ(Column(plan, "DISTRUN_LOCAL_DEVICE_IDS"), (Tokens(4, "0")));
  EXPECT_TRUE(plan.warnings.empty()) << plan.warnings.front();
}

TEST(Plan, SharedPortsAreTheSameForAllWorkers) {
  Options rank0;
  rank0.torch_store = TorchStoreHost::kRank0;
  Plan plan = Build(LocalNode(), rank0, EnvWithGpus(4));
  auto ports = Column(plan, "MASTER_PORT");
  std::set<std::string> master(ports.begin(), ports.end());
  ASSERT_TRUE(plan.assignment.master_port);
  EXPECT_EQ(master, std::set<std::string>{std::to_string(*plan.assignment.master_port)});
  EXPECT_EQ(Column(plan, "TORCHELASTIC_USE_AGENT_STORE"), Tokens(4, "<unset>"));
  auto jax = Column(plan, "JAX_COORDINATOR_ADDRESS");
  EXPECT_EQ(std::set<std::string>(jax.begin(), jax.end()).size(), 1u);
  auto coordinator = Column(plan, "DISTRUN_COORDINATOR_ADDRESS");
  EXPECT_EQ(std::set<std::string>(coordinator.begin(), coordinator.end()).size(), 1u);
  EXPECT_EQ(coordinator.front(), plan.assignment.coordinator_address);
}

TEST(Plan, EveryContractVariableIsSetByDefault) {
  Plan plan = Build(LocalNode(), Options{}, EnvWithGpus(1));
  ASSERT_EQ(plan.workers.size(), 1u);
  auto env = EnvOf(plan.workers[0]);
  for (const char* name : {"DISTRUN_PROCESS_ID",
                           "DISTRUN_NUM_PROCESSES",
                           "DISTRUN_LOCAL_RANK",
                           "DISTRUN_LOCAL_WORLD_SIZE",
                           "DISTRUN_NODE_RANK",
                           "DISTRUN_NUM_NODES",
                           "DISTRUN_LOCAL_DEVICE_IDS",
                           "DISTRUN_COORDINATOR_ADDRESS",
                           "DISTRUN_RUN_ID",
                           "DISTRUN_RESTART_COUNT",
                           "DISTRUN_EPOCH",
                           "DISTRUN_CLUSTER",
                           "RANK",
                           "WORLD_SIZE",
                           "LOCAL_RANK",
                           "LOCAL_WORLD_SIZE",
                           "GROUP_RANK",
                           "GROUP_WORLD_SIZE",
                           "ROLE_RANK",
                           "ROLE_WORLD_SIZE",
                           "ROLE_NAME",
                           "MASTER_ADDR",
                           "MASTER_PORT",
                           "TORCHELASTIC_RUN_ID",
                           "TORCHELASTIC_RESTART_COUNT",
                           "TORCHELASTIC_MAX_RESTARTS",
                           "TORCH_NCCL_ASYNC_ERROR_HANDLING",
                           "OMP_NUM_THREADS",
                           "JAX_COORDINATOR_ADDRESS",
                           "KERAS_DISTRIBUTION_JOB_ADDRESSES",
                           "KERAS_DISTRIBUTION_NUM_PROCESSES",
                           "KERAS_DISTRIBUTION_PROCESS_ID",
                           "CUDA_VISIBLE_DEVICES"}) {
    EXPECT_EQ(env.count(name), 1u) << name;
  }
  EXPECT_EQ(env["DISTRUN_CLUSTER"], "local");
  EXPECT_EQ(env["DISTRUN_RESTART_COUNT"], "0");
  EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "0");
  EXPECT_EQ(env["TORCHELASTIC_MAX_RESTARTS"], "0");
  EXPECT_EQ(env["ROLE_NAME"], "default");
  EXPECT_EQ(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "1");
  EXPECT_EQ(env["OMP_NUM_THREADS"], "1");
  EXPECT_EQ(env["DISTRUN_RUN_ID"], env["TORCHELASTIC_RUN_ID"]);
  EXPECT_EQ(env["KERAS_DISTRIBUTION_JOB_ADDRESSES"], env["JAX_COORDINATOR_ADDRESS"]);
  EXPECT_EQ(env["KERAS_DISTRIBUTION_NUM_PROCESSES"], "1");
  EXPECT_EQ(env["KERAS_DISTRIBUTION_PROCESS_ID"], "0");
  // JAX's device list only matters when CUDA_VISIBLE_DEVICES is not narrowed.
  EXPECT_EQ(env.count("JAX_LOCAL_DEVICE_IDS"), 0u);
}

TEST(Plan, MaxRestartsReachesTorchelastic) {
  Options o;
  o.max_restarts = 3;
  auto env = EnvOf(Build(LocalNode(), o, EnvWithGpus(1)).workers.at(0));
  EXPECT_EQ(env["TORCHELASTIC_MAX_RESTARTS"], "3");
}

TEST(Plan, ThreadAndNcclDefaultsOnlyWhenUnset) {
  Plan plan = Build(LocalNode(), Options{},
                    EnvWithGpus(2, {{"OMP_NUM_THREADS", "8"}, {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "0"}}));
  for (const WorkerPlan& w : plan.workers) {
    auto env = EnvOf(w);
    EXPECT_EQ(env.count("OMP_NUM_THREADS"), 0u);
    EXPECT_EQ(env.count("TORCH_NCCL_ASYNC_ERROR_HANDLING"), 0u);
  }
  // An empty value counts as set: the user said something.
  plan = Build(LocalNode(), Options{}, EnvWithGpus(1, {{"OMP_NUM_THREADS", ""}}));
  EXPECT_EQ(EnvOf(plan.workers.at(0)).count("OMP_NUM_THREADS"), 0u);
  EXPECT_EQ(EnvOf(plan.workers.at(0))["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "1");
}

TEST(Plan, FlightRecorderVariablesOnlyWhenUnsetNamingTheOnesDistrunSet) {
  auto env = EnvOf(Build(LocalNode(), Options{}, EnvWithGpus(1)).workers.at(0));
  EXPECT_EQ(env["TORCH_NCCL_TRACE_BUFFER_SIZE"], "2000");
  EXPECT_EQ(env["TORCH_NCCL_DUMP_ON_TIMEOUT"], "1");
  EXPECT_FALSE(env["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"].empty());
  EXPECT_EQ(env["TORCH_FR_DUMP_TEMP_FILE"], env["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"]);
  EXPECT_EQ(env["DISTRUN_TORCH_RENAME"], "TORCH_NCCL_TRACE_BUFFER_SIZE,TORCH_NCCL_DEBUG_INFO_TEMP_FILE");

  // The user's names, old or new, are theirs: distrun adds neither spelling and renames nothing of them.
  env = EnvOf(Build(LocalNode(), Options{},
                    EnvWithGpus(1, {{"TORCH_FR_BUFFER_SIZE", "50"}, {"TORCH_FR_DUMP_TEMP_FILE", "/x/fr-"}}))
                  .workers.at(0));
  EXPECT_EQ(env.count("TORCH_NCCL_TRACE_BUFFER_SIZE"), 0u);
  EXPECT_EQ(env.count("TORCH_NCCL_DEBUG_INFO_TEMP_FILE"), 0u);
  EXPECT_EQ(env.count("TORCH_FR_DUMP_TEMP_FILE"), 0u);
  EXPECT_EQ(env.count("DISTRUN_TORCH_RENAME"), 0u);
  env = EnvOf(
      Build(LocalNode(), Options{}, EnvWithGpus(1, {{"TORCH_NCCL_TRACE_BUFFER_SIZE", "50"}})).workers.at(0));
  EXPECT_EQ(env.count("TORCH_NCCL_TRACE_BUFFER_SIZE"), 0u);
  EXPECT_EQ(env["DISTRUN_TORCH_RENAME"], "TORCH_NCCL_DEBUG_INFO_TEMP_FILE");
}

TEST(Plan, NoGpuMeansOneWorkerWithoutDeviceNarrowing) {
  Plan plan = Build(LocalNode(), Options{}, EnvWithoutGpus());
  EXPECT_EQ(plan.layout.device_source, "none");
  EXPECT_TRUE(plan.layout.node_devices.empty());
  ASSERT_EQ(plan.workers.size(), 1u);
  auto env = EnvOf(plan.workers[0]);
  EXPECT_EQ(env.count("CUDA_VISIBLE_DEVICES"), 0u);
  EXPECT_EQ(env["DISTRUN_LOCAL_DEVICE_IDS"], "");
  EXPECT_TRUE(plan.workers[0].device_tokens.empty());
  EXPECT_TRUE(plan.warnings.empty());
}

TEST(Plan, NprocPerNodeGpuWithoutGpuIsAnError) {
  Options o;
  o.nproc_per_node = "gpu";
  try {
    Build(LocalNode(), o, EnvWithoutGpus());
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--nproc-per-node=gpu"), std::string::npos) << e.what();
  }
  EXPECT_EQ(Build(LocalNode(), o, EnvWithGpus(3)).workers.size(), 3u);
}

TEST(Plan, NprocPerNodeCpuAndNumber) {
  Options o;
  o.nproc_per_node = "cpu";
  Environment env = EnvWithoutGpus();
  env.cpu_count = 6;
  EXPECT_EQ(Build(LocalNode(), o, env).workers.size(), 6u);
  o.nproc_per_node = "3";
  Plan plan = Build(LocalNode(), o, env);
  ASSERT_EQ(plan.workers.size(), 3u);
  EXPECT_EQ(Column(plan, "WORLD_SIZE"), Tokens(3, "3"));
  EXPECT_EQ(Column(plan, "CUDA_VISIBLE_DEVICES"), Tokens(3, "<unset>"));
}

TEST(Plan, MoreWorkersThanGpusShareThemWithAWarning) {
  Options o;
  o.nproc_per_node = "3";
  Plan plan = Build(LocalNode(), o, EnvWithGpus(2));
  EXPECT_EQ(Column(plan, "CUDA_VISIBLE_DEVICES"), (Tokens{"0", "1", "0"}));
  ASSERT_EQ(plan.warnings.size(), 1u);
  EXPECT_NE(plan.warnings[0].find("share"), std::string::npos) << plan.warnings[0];
  EXPECT_NE(plan.warnings[0].find("--nproc-per-node"), std::string::npos) << plan.warnings[0];
}

TEST(Plan, GpusPerWorkerSlicesConsecutiveDevices) {
  Options o;
  o.gpus_per_worker = 2;
  Plan plan = Build(LocalNode(), o, EnvWithGpus(4));
  ASSERT_EQ(plan.workers.size(), 2u);
  EXPECT_EQ(Column(plan, "CUDA_VISIBLE_DEVICES"), (Tokens{"0,1", "2,3"}));
  EXPECT_EQ(plan.workers[0].local_device_ids, (Ids{0, 1}));
  EXPECT_EQ(plan.workers[1].local_device_ids, (Ids{0, 1}));
  EXPECT_EQ(Column(plan, "DISTRUN_LOCAL_DEVICE_IDS"), (Tokens{"0,1", "0,1"}));
  EXPECT_TRUE(plan.warnings.empty());
}

TEST(Plan, GpusPerWorkerBeyondSupplyWarns) {
  Options o;
  o.gpus_per_worker = 2;
  o.nproc_per_node = "2";
  Plan plan = Build(LocalNode(), o, EnvWithGpus(3));
  EXPECT_EQ(plan.workers.size(), 2u);
  EXPECT_TRUE(AnyContains(plan.warnings, "--gpus-per-worker")) << plan.warnings.size();
}

// What an engineer would expect from "auto": never more workers than the GPUs can serve without sharing.
TEST(Plan, AutoNeverMakesWorkersShareGpus) {
  Options o;
  o.gpus_per_worker = 2;
  Plan plan = Build(LocalNode(), o, EnvWithGpus(3));
  EXPECT_EQ(Column(plan, "CUDA_VISIBLE_DEVICES"), (Tokens{"0,1"}));
  ASSERT_EQ(plan.warnings.size(), 1u);
  EXPECT_NE(plan.warnings[0].find("1 of the 3 GPUs"), std::string::npos) << plan.warnings[0];
}

TEST(Plan, DeviceTokensAreKeptAsGiven) {
  Topology t = WithDevices(LocalNode(), {"GPU-aaaa", "MIG-bbbb"});
  Plan plan = Build(t, Options{}, EnvWithGpus(8));
  EXPECT_EQ(plan.layout.node_devices, (Tokens{"GPU-aaaa", "MIG-bbbb"}));
  EXPECT_EQ(plan.layout.device_source, "CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(Column(plan, "CUDA_VISIBLE_DEVICES"), (Tokens{"GPU-aaaa", "MIG-bbbb"}));
  EXPECT_EQ(plan.workers.at(1).device_tokens, Tokens{"MIG-bbbb"});
  EXPECT_EQ(plan.workers.at(1).local_device_ids, Ids{0});
}

TEST(Plan, VisibleDevicesSetButEmptyMeansNoGpu) {
  // CUDA_VISIBLE_DEVICES="" hides every GPU: no discovery, one worker, nothing narrowed.
  Topology t = WithDevices(LocalNode(), {});
  Plan plan = Build(t, Options{}, EnvWithGpus(4));
  EXPECT_TRUE(plan.layout.node_devices.empty());
  EXPECT_EQ(plan.layout.device_source, "CUDA_VISIBLE_DEVICES");
  ASSERT_EQ(plan.workers.size(), 1u);
  EXPECT_EQ(EnvOf(plan.workers[0]).count("CUDA_VISIBLE_DEVICES"), 0u);
}

TEST(Plan, WorkersAreNarrowedThroughTheVariableThatNarrowedDistrun) {
  Plan hip = Build(WithDevices(LocalNode(), {"0", "1"}, "HIP_VISIBLE_DEVICES"), Options{}, EnvWithoutGpus());
  EXPECT_EQ(Column(hip, "HIP_VISIBLE_DEVICES"), (Tokens{"0", "1"}));
  EXPECT_EQ(Column(hip, "CUDA_VISIBLE_DEVICES"), (Tokens{"<unset>", "<unset>"}));

  // Global ids from Slurm and ids given to distrun are handed to CUDA.
  for (const char* variable : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "--local-device-ids"}) {
    Plan plan = Build(WithDevices(LocalNode(), {"4", "5"}, variable), Options{}, EnvWithoutGpus());
    EXPECT_EQ(Column(plan, "CUDA_VISIBLE_DEVICES"), (Tokens{"4", "5"})) << variable;
    EXPECT_EQ(Column(plan, variable), (Tokens{"<unset>", "<unset>"})) << variable;
  }
}

TEST(Plan, PerTaskSeeingTheNodesGpusTakesItsShareByLocalRank) {
  Topology t = WithDevices(SlurmTask(6, 2, 1), {"0", "1", "2", "3"});
  Plan plan = Build(t, Options{}, EnvWithoutGpus());
  EXPECT_EQ(plan.layout.mode, LaunchMode::kPerTask);
  ASSERT_EQ(plan.workers.size(), 1u);
  const WorkerPlan& w = plan.workers[0];
  EXPECT_EQ(w.process_id, 6);
  EXPECT_EQ(w.local_rank, 2);
  EXPECT_EQ(w.device_tokens, Tokens{"2"});
  EXPECT_EQ(w.local_device_ids, Ids{0});
  auto env = EnvOf(w);
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "2");
  EXPECT_EQ(env["RANK"], "6");
  EXPECT_EQ(env["WORLD_SIZE"], "8");
  EXPECT_EQ(env["LOCAL_RANK"], "2");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "4");
  EXPECT_EQ(env["GROUP_RANK"], "1");
  EXPECT_EQ(env["GROUP_WORLD_SIZE"], "2");
  EXPECT_EQ(env["ROLE_RANK"], "6");
  EXPECT_EQ(env["ROLE_WORLD_SIZE"], "8");
  EXPECT_EQ(env["DISTRUN_PROCESS_ID"], "6");
  EXPECT_EQ(env["DISTRUN_NUM_PROCESSES"], "8");
  EXPECT_EQ(env["DISTRUN_LOCAL_RANK"], "2");
  EXPECT_EQ(env["DISTRUN_LOCAL_WORLD_SIZE"], "4");
  EXPECT_EQ(env["DISTRUN_NODE_RANK"], "1");
  EXPECT_EQ(env["DISTRUN_NUM_NODES"], "2");
  EXPECT_EQ(env["DISTRUN_CLUSTER"], "slurm");
  EXPECT_EQ(env["DISTRUN_COORDINATOR_ADDRESS"], "node001:61497");
  EXPECT_EQ(env["MASTER_ADDR"], "node001");
  EXPECT_EQ(env["DISTRUN_RUN_ID"], "1234");
  EXPECT_EQ(env["KERAS_DISTRIBUTION_PROCESS_ID"], "6");
  EXPECT_EQ(env["KERAS_DISTRIBUTION_NUM_PROCESSES"], "8");
  EXPECT_TRUE(plan.warnings.empty());
}

TEST(Plan, PerTaskWithItsOwnGpuKeepsIt) {
  // srun --gpus-per-task=1: CUDA_VISIBLE_DEVICES=0 in every task; local rank 3 must not index it.
  Plan plan = Build(WithDevices(SlurmTask(3, 3, 0), {"0"}), Options{}, EnvWithoutGpus());
  ASSERT_EQ(plan.workers.size(), 1u);
  EXPECT_EQ(EnvOf(plan.workers[0])["CUDA_VISIBLE_DEVICES"], "0");
  EXPECT_TRUE(plan.warnings.empty());

  Options o;
  o.gpus_per_worker = 2;
  plan = Build(WithDevices(SlurmTask(3, 3, 0), {"GPU-a", "GPU-b"}), o, EnvWithoutGpus());
  EXPECT_EQ(EnvOf(plan.workers.at(0))["CUDA_VISIBLE_DEVICES"], "GPU-a,GPU-b");
  EXPECT_TRUE(plan.warnings.empty());
}

TEST(Plan, PerTaskBeyondTheVisibleGpusWarnsAndNamesTheVariable) {
  Plan plan = Build(WithDevices(SlurmTask(3, 3, 0), {"0", "1"}), Options{}, EnvWithoutGpus());
  ASSERT_EQ(plan.warnings.size(), 1u);
  EXPECT_NE(plan.warnings[0].find("SLURM_LOCALID=3"), std::string::npos) << plan.warnings[0];
  EXPECT_NE(plan.warnings[0].find("CUDA_VISIBLE_DEVICES=0,1"), std::string::npos) << plan.warnings[0];
  EXPECT_EQ(EnvOf(plan.workers.at(0))["CUDA_VISIBLE_DEVICES"], "1");

  Topology ompi = WithDevices(SlurmTask(3, 3, 0), {"0", "1"});
  ompi.method = "ompi";
  plan = Build(ompi, Options{}, EnvWithoutGpus());
  EXPECT_TRUE(AnyContains(plan.warnings, "OMPI_COMM_WORLD_LOCAL_RANK=3"));
}

TEST(Plan, PerTaskUsesDiscoveredGpusWhenNothingNarrows) {
  Plan plan = Build(SlurmTask(1, 1, 0), Options{}, EnvWithGpus(4));
  EXPECT_EQ(plan.layout.device_source, "cuda-driver");
  EXPECT_EQ(EnvOf(plan.workers.at(0))["CUDA_VISIBLE_DEVICES"], "1");
}

TEST(Plan, PerTaskWithoutGpus) {
  Plan plan = Build(SlurmTask(5, 1, 1), Options{}, EnvWithoutGpus());
  ASSERT_EQ(plan.workers.size(), 1u);
  EXPECT_EQ(EnvOf(plan.workers[0]).count("CUDA_VISIBLE_DEVICES"), 0u);
  EXPECT_TRUE(plan.warnings.empty());
}

TEST(Plan, PerNodeRanksFollowTheNodeRank) {
  Plan plan = Build(WithDevices(SlurmNode(1), {"0", "1", "2", "3"}), Options{}, EnvWithoutGpus());
  EXPECT_EQ(plan.layout.mode, LaunchMode::kPerNode);
  EXPECT_EQ(plan.layout.unit_index, 1);
  EXPECT_EQ(plan.layout.units, 2);
  EXPECT_EQ(plan.assignment.rank_offset, 4);
  EXPECT_EQ(plan.assignment.num_processes, 8);
  EXPECT_EQ(Column(plan, "RANK"), (Tokens{"4", "5", "6", "7"}));
  EXPECT_EQ(Column(plan, "LOCAL_RANK"), (Tokens{"0", "1", "2", "3"}));
  EXPECT_EQ(Column(plan, "WORLD_SIZE"), Tokens(4, "8"));
  EXPECT_EQ(Column(plan, "GROUP_RANK"), Tokens(4, "1"));
  EXPECT_EQ(Column(plan, "LOCAL_WORLD_SIZE"), Tokens(4, "4"));
  EXPECT_EQ(Column(plan, "CUDA_VISIBLE_DEVICES"), (Tokens{"0", "1", "2", "3"}));
}

TEST(Plan, LaunchModeOptionOverridesTheLayout) {
  // Forced per-node on a per-task layout: every task spawns workers, numbered by task.
  Options o;
  o.launch_mode = LaunchMode::kPerNode;
  o.nproc_per_node = "2";
  Plan plan = Build(SlurmTask(3, 3, 0), o, EnvWithoutGpus());
  EXPECT_EQ(plan.layout.mode, LaunchMode::kPerNode);
  EXPECT_EQ(plan.layout.unit_index, 3);
  EXPECT_EQ(plan.layout.units, 8);
  EXPECT_EQ(Column(plan, "RANK"), (Tokens{"6", "7"}));
  EXPECT_EQ(Column(plan, "WORLD_SIZE"), Tokens(2, "16"));

  // Forced per-task on a workstation: one worker as process 0.
  o = Options{};
  o.launch_mode = LaunchMode::kPerTask;
  plan = Build(LocalNode(), o, EnvWithGpus(4));
  EXPECT_EQ(plan.layout.mode, LaunchMode::kPerTask);
  ASSERT_EQ(plan.workers.size(), 1u);
  EXPECT_EQ(EnvOf(plan.workers[0])["CUDA_VISIBLE_DEVICES"], "0");
  EXPECT_EQ(EnvOf(plan.workers[0])["WORLD_SIZE"], "1");
}

TEST(Plan, DeviceBindingNoneLeavesDevicesAndTellsJax) {
  Options o;
  o.device_binding = false;
  Plan plan = Build(LocalNode(), o, EnvWithGpus(4));
  ASSERT_EQ(plan.workers.size(), 4u);
  EXPECT_EQ(Column(plan, "CUDA_VISIBLE_DEVICES"), Tokens(4, "<unset>"));
  EXPECT_EQ(Column(plan, "JAX_LOCAL_DEVICE_IDS"), (Tokens{"0", "1", "2", "3"}));
  EXPECT_EQ(Column(plan, "DISTRUN_LOCAL_DEVICE_IDS"), (Tokens{"0", "1", "2", "3"}));
  for (const WorkerPlan& w : plan.workers) EXPECT_TRUE(w.device_tokens.empty());
  EXPECT_EQ(plan.workers[2].local_device_ids, Ids{2});

  o.gpus_per_worker = 2;
  plan = Build(WithDevices(LocalNode(), {"GPU-a", "GPU-b", "GPU-c", "GPU-d"}), o, EnvWithoutGpus());
  EXPECT_EQ(Column(plan, "JAX_LOCAL_DEVICE_IDS"), (Tokens{"0,1", "2,3"}));
  EXPECT_EQ(Column(plan, "CUDA_VISIBLE_DEVICES"), Tokens(2, "<unset>"));
}

TEST(Plan, DeviceBindingNoneInPerTaskModeUsesTheLocalRank) {
  Options o;
  o.device_binding = false;
  Plan plan = Build(WithDevices(SlurmTask(6, 2, 1), {"0", "1", "2", "3"}), o, EnvWithoutGpus());
  auto env = EnvOf(plan.workers.at(0));
  EXPECT_EQ(env.count("CUDA_VISIBLE_DEVICES"), 0u);
  EXPECT_EQ(env["JAX_LOCAL_DEVICE_IDS"], "2");
  EXPECT_EQ(plan.workers[0].local_device_ids, Ids{2});
}

TEST(Plan, DeviceBindingNoneWithoutJaxExportSetsNoJaxVariable) {
  Options o;
  o.device_binding = false;
  o.export_jax = false;
  Plan plan = Build(LocalNode(), o, EnvWithGpus(2));
  EXPECT_EQ(Column(plan, "JAX_LOCAL_DEVICE_IDS"), Tokens(2, "<unset>"));
  EXPECT_EQ(Column(plan, "DISTRUN_LOCAL_DEVICE_IDS"), (Tokens{"0", "1"}));
}

TEST(Plan, ExportChoosesFamilies) {
  auto names = [](const Options& o) {
    std::set<std::string> out;
    Plan plan = Build(LocalNode(), o, EnvWithGpus(1));
    for (const auto& [name, value] : plan.workers.at(0).env) out.insert(name);
    return out;
  };
  auto only = [](bool torch, bool jax, bool keras, bool distrun) {
    Options o;
    o.export_torch = torch;
    o.export_jax = jax;
    o.export_keras = keras;
    o.export_distrun = distrun;
    return o;
  };
  // JAX has no variables for the count and id: distrun's JAX cluster reads distrun's.
  EXPECT_EQ(names(only(false, true, false, false)),
            (std::set<std::string>{"JAX_COORDINATOR_ADDRESS", "DISTRUN_PROCESS_ID", "DISTRUN_NUM_PROCESSES",
                                   "CUDA_VISIBLE_DEVICES"}));
  EXPECT_EQ(names(only(false, false, true, false)),
            (std::set<std::string>{"KERAS_DISTRIBUTION_JOB_ADDRESSES", "KERAS_DISTRIBUTION_NUM_PROCESSES",
                                   "KERAS_DISTRIBUTION_PROCESS_ID", "CUDA_VISIBLE_DEVICES"}));
  std::set<std::string> torch = names(only(true, false, false, false));
  EXPECT_TRUE(torch.count("RANK") && torch.count("MASTER_PORT") && torch.count("OMP_NUM_THREADS"));
  for (const auto& name : torch) {
    EXPECT_FALSE(name.starts_with("DISTRUN_") || name.starts_with("JAX_") || name.starts_with("KERAS_"))
        << name;
  }
  std::set<std::string> distrun = names(only(false, false, false, true));
  for (const auto& name : distrun) {
    EXPECT_TRUE(name.starts_with("DISTRUN_") || name == "CUDA_VISIBLE_DEVICES") << name;
  }
  EXPECT_EQ(distrun.size(), 13u);  // with DISTRUN_EPOCH
  // Devices are narrowed whatever families are exported.
  EXPECT_EQ(names(only(false, false, false, false)), std::set<std::string>{"CUDA_VISIBLE_DEVICES"});
}

TEST(Plan, JaxAddressUsesProcessZerosHostAndAllocatedPort) {
  Options o;
  Plan plan = Build(SlurmTask(5, 1, 1), o, EnvWithoutGpus());
  ASSERT_TRUE(plan.assignment.jax_port);
  auto env = EnvOf(plan.workers.at(0));
  EXPECT_EQ(env["JAX_COORDINATOR_ADDRESS"], "node001:" + std::to_string(*plan.assignment.jax_port));
}

Options WithJax(const std::string& host, int port) {
  Options o;
  o.jax_coordinator_host.emplace(host);
  o.jax_coordinator_port.emplace(port);
  return o;
}

TEST(Plan, JaxVariablesFromTheUserAreHonoured) {
  Plan plan = Build(SlurmTask(5, 1, 1), WithJax("jaxhost", 8476), EnvWithoutGpus());
  EXPECT_EQ(plan.assignment.jax_port, 8476);
  auto env = EnvOf(plan.workers.at(0));
  EXPECT_EQ(env["JAX_COORDINATOR_ADDRESS"], "jaxhost:8476");
  EXPECT_EQ(env["KERAS_DISTRIBUTION_JOB_ADDRESSES"], "jaxhost:8476");
  // torch still points at process 0's host.
  EXPECT_EQ(env["MASTER_ADDR"], "node001");

  plan = Build(SlurmTask(5, 1, 1), WithJax("fd00::5", 8476), EnvWithoutGpus());
  EXPECT_EQ(EnvOf(plan.workers.at(0))["JAX_COORDINATOR_ADDRESS"], "[fd00::5]:8476");
}

TEST(Plan, ProvisionalAssignmentPorts) {
  Topology t = SlurmTask(0, 0, 0);
  LocalLayout layout = ComputeLocalLayout(t, Options{}, EnvWithoutGpus());
  JobAssignment a = ProvisionalAssignment(t, layout, Options{});
  EXPECT_EQ(a.coordinator_address, "node001:61497");
  EXPECT_EQ(a.process0_host, "node001");
  ASSERT_TRUE(a.master_port);
  EXPECT_GE(*a.master_port, 1);
  EXPECT_LE(*a.master_port, 65535);
  EXPECT_EQ(a.num_nodes, 2);
  EXPECT_EQ(a.node_rank, 0);
  EXPECT_EQ(a.restart_count, 0);

  // Without a derived port, the local one is chosen free here.
  Topology local = LocalNode();
  a = ProvisionalAssignment(local, ComputeLocalLayout(local, Options{}, EnvWithoutGpus()), Options{});
  ASSERT_TRUE(a.coordinator_address.starts_with("127.0.0.1:")) << a.coordinator_address;
  int port = std::stoi(a.coordinator_address.substr(10));
  EXPECT_GE(port, 1);
  EXPECT_LE(port, 65535);
}

TEST(Plan, ProvisionalAssignmentBracketsIpv6Coordinator) {
  Topology t = SlurmTask(0, 0, 0);
  t.coordinator_host = "fd00::1";
  JobAssignment a = ProvisionalAssignment(t, ComputeLocalLayout(t, Options{}, EnvWithoutGpus()), Options{});
  EXPECT_EQ(a.coordinator_address, "[fd00::1]:61497");
}

TEST(Plan, RunIdFromOptionElseJobElseRandom) {
  Topology t = SlurmTask(0, 0, 0);
  LocalLayout layout = ComputeLocalLayout(t, Options{}, EnvWithoutGpus());
  Options o;
  o.run_id = "mine";
  EXPECT_EQ(ProvisionalAssignment(t, layout, o).run_id, "mine");
  EXPECT_EQ(ProvisionalAssignment(t, layout, Options{}).run_id, "1234");
  t.job_id.clear();
  std::string random = ProvisionalAssignment(t, layout, Options{}).run_id;
  EXPECT_EQ(random.size(), 12u);
  EXPECT_EQ(random.find_first_not_of("0123456789abcdef"), std::string::npos) << random;
  EXPECT_NE(random, ProvisionalAssignment(t, layout, Options{}).run_id);
}

TEST(Plan, MakePlanUsesTheAssignmentItIsGiven) {
  // After rendezvous: this node's first rank, the job size and ports come from the assignment.
  Topology t = WithDevices(SlurmNode(1), {"0", "1"});
  LocalLayout layout = ComputeLocalLayout(t, Options{}, EnvWithoutGpus());
  JobAssignment a;
  a.rank_offset = 10;
  a.num_processes = 12;
  a.num_nodes = 2;
  a.node_rank = 1;
  a.process0_host = "node009";
  a.coordinator_address = "node001:61497";
  a.master_port = 29511;
  a.jax_port = 29512;
  a.run_id = "r1";
  a.restart_count = 2;
  Options rank0;
  rank0.torch_store = TorchStoreHost::kRank0;
  Plan plan = MakePlan(t, layout, a, rank0, EnvWithoutGpus());
  EXPECT_EQ(Column(plan, "RANK"), (Tokens{"10", "11"}));
  EXPECT_EQ(Column(plan, "WORLD_SIZE"), Tokens(2, "12"));
  EXPECT_EQ(Column(plan, "MASTER_ADDR"), Tokens(2, "node009"));
  EXPECT_EQ(Column(plan, "MASTER_PORT"), Tokens(2, "29511"));
  EXPECT_EQ(Column(plan, "JAX_COORDINATOR_ADDRESS"), Tokens(2, "node009:29512"));
  EXPECT_EQ(Column(plan, "DISTRUN_RESTART_COUNT"), Tokens(2, "2"));
  EXPECT_EQ(Column(plan, "DISTRUN_EPOCH"), Tokens(2, "2"));
  EXPECT_EQ(Column(plan, "TORCHELASTIC_RESTART_COUNT"), Tokens(2, "2"));
  EXPECT_EQ(Column(plan, "TORCHELASTIC_RUN_ID"), Tokens(2, "r1"));

  a.master_port.reset();
  a.jax_port.reset();
  plan = MakePlan(t, layout, a, rank0, EnvWithoutGpus());
  EXPECT_EQ(Column(plan, "MASTER_PORT"), Tokens(2, "<unset>"));
  EXPECT_EQ(Column(plan, "JAX_COORDINATOR_ADDRESS"), Tokens(2, "node009"));

  // A hot spare of an elastic job holds no workers.
  a.spare = true;
  EXPECT_TRUE(MakePlan(t, layout, a, Options{}, EnvWithoutGpus()).workers.empty());
}

TEST(Plan, TorchsStoreIsDistrunsPortByDefault) {
  // torch's agent-store mode: every worker dials node 0's runtime, whatever port rank 0 would have bound.
  Topology t = WithDevices(SlurmNode(1), {"0", "1"});
  LocalLayout layout = ComputeLocalLayout(t, Options{}, EnvWithoutGpus());
  JobAssignment a;
  a.num_processes = 4;
  a.num_nodes = 2;
  a.node_rank = 1;
  a.rank_offset = 2;
  a.process0_host = "node009";
  a.coordinator_address = "node001:61497";
  a.master_port = 29511;
  a.restart_count = 3;
  Plan plan = MakePlan(t, layout, a, Options{}, EnvWithoutGpus());
  EXPECT_EQ(Column(plan, "MASTER_ADDR"), Tokens(2, "node001"));
  EXPECT_EQ(Column(plan, "MASTER_PORT"), Tokens(2, "61497"));
  EXPECT_EQ(Column(plan, "TORCHELASTIC_USE_AGENT_STORE"), Tokens(2, "True"));
  EXPECT_EQ(Column(plan, "TORCHELASTIC_RESTART_COUNT"), Tokens(2, "3"));  // 1.13 prefixes keys with it
  a.coordinator_address = "[fd00::1]:61497";
  plan = MakePlan(t, layout, a, Options{}, EnvWithoutGpus());
  EXPECT_EQ(Column(plan, "MASTER_ADDR"), Tokens(2, "fd00::1"));  // torch takes a bare address
  Options no_torch;
  no_torch.export_torch = false;
  EXPECT_EQ(Column(MakePlan(t, layout, a, no_torch, EnvWithoutGpus()), "TORCHELASTIC_USE_AGENT_STORE"),
            Tokens(2, "<unset>"));
}

TEST(Plan, WarningsAreTheTopologysThenTheLayouts) {
  Topology t = WithDevices(SlurmTask(3, 3, 0), {"0", "1"});
  t.warnings = {"from detection"};
  Plan plan = Build(t, Options{}, EnvWithoutGpus());
  ASSERT_EQ(plan.warnings.size(), 2u);
  EXPECT_EQ(plan.warnings[0], "from detection");
  EXPECT_NE(plan.warnings[1].find("SLURM_LOCALID"), std::string::npos);
  EXPECT_EQ(plan.topology.warnings, Tokens{"from detection"});
}

TEST(Plan, AnElasticSlurmStepIsToldAboutNoKill) {
  Options o;
  o.elastic = ElasticRange{2, 3, ElasticPolicy::kResize};
  Topology t = SlurmTask(3, 3, 0);
  t.method = "slurm";
  Plan plan = Build(t, o, EnvWithoutGpus());
  ASSERT_FALSE(plan.warnings.empty());
  EXPECT_NE(plan.warnings.back().find("--nnodes 2:3 in a Slurm step"), std::string::npos)
      << plan.warnings.back();
  EXPECT_NE(plan.warnings.back().find("srun --no-kill"), std::string::npos);
  t.method = "local";
  for (const std::string& w : Build(t, o, EnvWithoutGpus()).warnings) {
    EXPECT_EQ(w.find("--no-kill"), std::string::npos) << w;
  }
}

// A per-node Slurm step: the workers see Slurm's task variables as a per-task step would set them, and none
// of the PMIx variables that would make MPI_Init join as the distrun task (launcher/plan/task_variables.h).
TEST(Plan, WorkersOfAPerNodeStepSeeThePlanInSlurmsVariables) {
  Options o;
  o.nproc_per_node = "2";
  Environment env = EnvWithoutGpus({{"SLURM_JOB_ID", "1234"},
                                    {"SLURM_PROCID", "1"},
                                    {"SLURM_NTASKS", "2"},
                                    {"SLURM_LOCALID", "0"},
                                    {"SLURM_NODEID", "1"},
                                    {"PMIX_RANK", "1"}});
  Plan plan = Build(SlurmNode(1), o, env);
  ASSERT_EQ(plan.workers.size(), 2u);
  EXPECT_EQ(Column(plan, "SLURM_PROCID"), (std::vector<std::string>{"2", "3"}));
  EXPECT_EQ(Column(plan, "SLURM_NTASKS"), (std::vector<std::string>{"4", "4"}));
  EXPECT_EQ(Column(plan, "SLURM_LOCALID"), (std::vector<std::string>{"<unset>", "1"}));  // 0 already
  EXPECT_EQ(Column(plan, "SLURM_NTASKS_PER_NODE"), (std::vector<std::string>{"2", "2"}));
  for (const WorkerPlan& w : plan.workers) EXPECT_EQ(w.unset, std::vector<std::string>{"PMIX_RANK"});
  // One worker per node is the task itself: nothing changes.
  o.nproc_per_node = "1";
  Plan alone = Build(SlurmNode(1), o, env);
  EXPECT_EQ(Column(alone, "SLURM_PROCID"), std::vector<std::string>{"<unset>"});
  EXPECT_TRUE(alone.workers.at(0).unset.empty());
}

// Workers reach the distrun that launched them even where it is not on PATH (issue: a venv's bin, /opt).
TEST(Plan, WorkersFindTheDistrunThatLaunchedThem) {
  auto env_of = [](const char* path) {
    Environment env = EnvWithoutGpus();
    if (path) env.vars["PATH"] = path;
    env.program = "/opt/x/bin/distrun";
    return EnvOf(Build(LocalNode(), Options{}, env).workers.at(0));
  };
  auto env = env_of("/usr/bin:/bin");
  EXPECT_EQ(env["DISTRUN_PROGRAM"], "/opt/x/bin/distrun");
  EXPECT_EQ(env["PATH"], "/usr/bin:/bin:/opt/x/bin");  // last: what PATH finds first still wins
  EXPECT_EQ(env_of("/opt/x/bin/:/usr/bin").count("PATH"), 0u);
  EXPECT_EQ(env_of("/usr/bin:/opt/x/bin").count("PATH"), 0u);
  EXPECT_EQ(env_of(nullptr)["PATH"], "/opt/x/bin");
  // Without distrun's family the workers call no verb.
  Options o;
  o.export_distrun = false;
  Environment plain = EnvWithoutGpus({{"PATH", "/usr/bin"}});
  plain.program = "/opt/x/bin/distrun";
  auto without = EnvOf(Build(LocalNode(), o, plain).workers.at(0));
  EXPECT_EQ(without.count("DISTRUN_PROGRAM") + without.count("PATH"), 0u);
}

TEST(Plan, EnvOrderIsStable) {
  Plan a = Build(SlurmTask(5, 1, 1), Options{}, EnvWithoutGpus());
  Plan b = Build(SlurmTask(5, 1, 1), Options{}, EnvWithoutGpus());
  ASSERT_EQ(a.workers.at(0).env.size(), b.workers.at(0).env.size());
  for (size_t i = 0; i < a.workers[0].env.size(); ++i) {
    EXPECT_EQ(a.workers[0].env[i].first, b.workers[0].env[i].first);
  }
  EXPECT_EQ(a.workers[0].env.front().first, "DISTRUN_PROCESS_ID");
}

// ---- GPUs in the layout and --cpu-bind ----

// A node with 4 GPUs on two sockets (CPUs 0-7 and 8-15) seen through a fake file-system root: procfs
// lists them in PCI order, sysfs holds their local CPUs and NUMA nodes, and distrun may use every CPU.
class GpuNode {
 public:
  GpuNode() {
    Status("0-15");
    root.Write("sys/devices/system/node/node0/cpulist", "0-7\n");
    root.Write("sys/devices/system/node/node1/cpulist", "8-15\n");
    const char* pci[] = {"0000:1b:00.0", "0000:3b:00.0", "0000:9c:00.0", "0000:bc:00.0"};
    for (int i = 0; i < 4; ++i) {
      const std::string dir = std::string("sys/bus/pci/devices/") + pci[i];
      root.Write(dir + "/local_cpulist", i < 2 ? "0-7\n" : "8-15\n");
      root.Write(dir + "/numa_node", i < 2 ? "0\n" : "1\n");
      root.Write(std::string("proc/driver/nvidia/gpus/") + pci[i] + "/information",
                 "Model: \t\t NVIDIA H100\nGPU UUID: \t GPU-" + std::to_string(i) +
                     "aaaaaaa-0000-0000-0000-000000000000\nBus Location: \t " + pci[i] + "\n");
    }
  }
  void Status(const std::string& allowed) const {
    root.Write("proc/self/status", "Cpus_allowed_list:\t" + allowed + "\n");
  }
  Environment Env(std::initializer_list<std::pair<std::string, std::string>> vars = {}) const {
    Environment env = MakeEnv(vars);
    env.root = root.path();
    return env;
  }
  testing::TempRoot root;
};

std::vector<std::string> CpuColumn(const Plan& plan) {
  std::vector<std::string> out;
  for (const WorkerPlan& w : plan.workers) {
    std::string s;
    for (int cpu : w.cpus) s += (s.empty() ? "" : ",") + std::to_string(cpu);
    out.push_back(s);
  }
  return out;
}

TEST(PlanGpus, DiscoveredGpusAreKeptInTheLayout) {
  GpuNode node;
  Plan plan = Build(LocalNode(), Options{}, node.Env());
  EXPECT_EQ(plan.layout.gpu_source, "procfs");
  ASSERT_EQ(plan.layout.node_gpus.size(), 4u);
  ASSERT_TRUE(plan.layout.node_gpus[2].gpu.has_value());
  EXPECT_EQ(plan.layout.node_gpus[2].token, "2");
  EXPECT_EQ(plan.layout.node_gpus[2].gpu->pci_bus_id, "0000:9c:00.0");
  EXPECT_EQ(plan.layout.node_gpus[2].gpu->uuid, "GPU-2aaaaaaa-0000-0000-0000-000000000000");
  for (const WorkerPlan& w : plan.workers) EXPECT_TRUE(w.cpus.empty());  // --cpu-bind none
}

TEST(PlanGpus, VariableTokensAreResolvedToTheNodesGpus) {
  GpuNode node;
  Environment env = node.Env({{"CUDA_VISIBLE_DEVICES", "GPU-3,1"}});
  Plan plan = Build(WithDevices(LocalNode(), {"GPU-3", "1"}), Options{}, env);
  EXPECT_EQ(plan.layout.device_source, "CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(plan.layout.gpu_source, "procfs");
  ASSERT_EQ(plan.layout.node_gpus.size(), 2u);
  EXPECT_EQ(plan.layout.node_gpus[0].gpu->pci_bus_id, "0000:bc:00.0");
  EXPECT_EQ(plan.layout.node_gpus[1].gpu->pci_bus_id, "0000:3b:00.0");
}

TEST(PlanCpuBind, GpuPinsEachWorkerToItsGpusCpus) {
  GpuNode node;
  Options o;
  o.cpu_bind = CpuBind::kGpu;
  Plan plan = Build(LocalNode(), o, node.Env());
  EXPECT_EQ(CpuColumn(plan),
            (Tokens{"0,1,2,3,4,5,6,7", "0,1,2,3,4,5,6,7", "8,9,10,11,12,13,14,15", "8,9,10,11,12,13,14,15"}));
  EXPECT_TRUE(plan.warnings.empty()) << plan.warnings.front();
  // The CPUs follow the devices, not the rank: GPU 3 first.
  Plan narrowed = Build(WithDevices(LocalNode(), {"3", "0"}), o, node.Env({{"CUDA_VISIBLE_DEVICES", "3,0"}}));
  EXPECT_EQ(CpuColumn(narrowed), (Tokens{"8,9,10,11,12,13,14,15", "0,1,2,3,4,5,6,7"}));
}

TEST(PlanCpuBind, NumaAndTheAllowedCpus) {
  GpuNode node;
  node.Status("4-11");  // a cgroup that spans both sockets
  Options o;
  o.cpu_bind = CpuBind::kNuma;
  o.gpus_per_worker = 2;
  Plan plan = Build(LocalNode(), o, node.Env());
  EXPECT_EQ(CpuColumn(plan), (Tokens{"4,5,6,7", "8,9,10,11"}));
}

TEST(PlanCpuBind, PerTaskWorkerUsesItsOwnGpu) {
  GpuNode node;
  Options o;
  o.cpu_bind = CpuBind::kGpu;
  // Task with local rank 2 of 4, seeing every GPU of the node: it takes GPU 2.
  Plan plan = Build(WithDevices(SlurmTask(6, 2, 1), {"0", "1", "2", "3"}), o,
                    node.Env({{"CUDA_VISIBLE_DEVICES", "0,1,2,3"}}));
  ASSERT_EQ(plan.workers.size(), 1u);
  EXPECT_EQ(plan.workers[0].device_tokens, Tokens{"2"});
  EXPECT_EQ(CpuColumn(plan), Tokens{"8,9,10,11,12,13,14,15"});
}

TEST(PlanCpuBind, DeviceBindingNoneStillPinsToTheWorkersShare) {
  GpuNode node;
  Options o;
  o.cpu_bind = CpuBind::kGpu;
  o.device_binding = false;
  Plan plan = Build(LocalNode(), o, node.Env());
  EXPECT_EQ(Column(plan, "CUDA_VISIBLE_DEVICES"), Tokens(4, "<unset>"));
  EXPECT_EQ(CpuColumn(plan)[3], "8,9,10,11,12,13,14,15");
}

TEST(PlanCpuBind, WithoutAnyGpuItIsAnError) {
  Options o;
  o.cpu_bind = CpuBind::kGpu;
  try {
    Build(LocalNode(), o, EnvWithoutGpus());
    FAIL() << "--cpu-bind gpu without a GPU was accepted";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(),
                ::testing::StartsWith("--cpu-bind=gpu but no GPU was found (/proc/driver/nvidia/gpus"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("use --cpu-bind none"));
  }
  o.cpu_bind = CpuBind::kNuma;
  try {
    Build(WithDevices(LocalNode(), {}), o, EnvWithoutGpus({{"CUDA_VISIBLE_DEVICES", ""}}));
    FAIL() << "--cpu-bind numa with every GPU hidden was accepted";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), ::testing::StartsWith("--cpu-bind=numa but CUDA_VISIBLE_DEVICES leaves no GPU"));
  }
}

TEST(PlanCpuBind, GpusWithoutSysfsEntriesWarnAndStayUnpinned) {
  // The driver knows the GPUs, but this root has no sysfs for them (a container without /sys/bus/pci).
  Environment env = EnvWithGpus(2);
  Options o;
  o.cpu_bind = CpuBind::kGpu;
  Plan plan = Build(LocalNode(), o, env);
  EXPECT_EQ(CpuColumn(plan), (Tokens{"", ""}));
  ASSERT_EQ(plan.warnings.size(), 2u);
  EXPECT_EQ(plan.warnings[0],
            "--cpu-bind=gpu: local rank 0 is not pinned: the PCI bus id of device '0' is not known here");
}

}  // namespace
}  // namespace distrun
