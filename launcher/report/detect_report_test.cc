#include "launcher/report/detect_report.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "launcher/plan/plan.h"
#include "test_support.h"

namespace distrun {
namespace {

using testing::MakeEnv;

Environment NoGpuEnv() {
  Environment env = MakeEnv({});
  env.root = "/nonexistent-distrun-report-test-root";
  return env;
}

Topology SlurmTask() {
  Topology t;
  t.method = "slurm";
  t.coordinator_host = "node001";
  t.coordinator_port = 61497;
  t.launch_mode = LaunchMode::kPerTask;
  t.num_nodes = 2;
  t.node_rank = 1;
  t.hosts = {"node001", "node002"};
  t.num_tasks = 8;
  t.task_id = 5;
  t.local_task = 1;
  t.local_tasks = 4;
  t.visible_devices = {"0", "1", "2", "3"};
  t.device_variable = "CUDA_VISIBLE_DEVICES";
  t.job_id = "1234";
  return t;
}

Topology LocalNode(int gpus) {
  Topology t;
  t.method = "local";
  t.coordinator_host = "127.0.0.1";
  t.hosts = {"testhost"};
  for (int i = 0; i < gpus; ++i) t.visible_devices.push_back(std::to_string(i));
  if (gpus > 0) t.device_variable = "CUDA_VISIBLE_DEVICES";
  return t;
}

Plan Build(const Topology& t, const Options& o) {
  Environment env = NoGpuEnv();
  LocalLayout layout = ComputeLocalLayout(t, o, env);
  return MakePlan(t, layout, ProvisionalAssignment(t, layout, o), o, env);
}

Options WithFormat(DetectFormat format) {
  Options o = ResolveOptions({{"nproc-per-node", RawValue{"auto", "--nproc-per-node"}}},
                             {{"DISTRUN_GPUS_PER_WORKER", "1"}}, {});
  o.format = format;
  return o;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// One text for a parsed document: structure, order, every value and whether a scalar was quoted.
std::string Canonical(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Scalar:
      return (node.Tag() == "!" ? "s:" : "p:") + node.Scalar();
    case YAML::NodeType::Sequence: {
      std::string out = "[";
      for (const auto& item : node) out += Canonical(item) + ",";
      return out + "]";
    }
    case YAML::NodeType::Map: {
      std::string out = "{";
      for (const auto& entry : node) out += entry.first.Scalar() + "=" + Canonical(entry.second) + ",";
      return out + "}";
    }
    case YAML::NodeType::Undefined:
      break;
  }
  return "undefined";
}

TEST(DetectReport, JsonHasTheStableKeysInOrder) {
  Plan plan = Build(SlurmTask(), Options{});
  YAML::Node doc = YAML::Load(RenderDetectReport(plan, WithFormat(DetectFormat::kJson)));
  ASSERT_TRUE(doc.IsMap());
  std::vector<std::string> keys;
  for (const auto& entry : doc) keys.push_back(entry.first.Scalar());
  const std::vector<std::string> stable = {
      "method",    "launch_mode", "coordinator_address", "num_processes", "num_nodes",
      "node_rank", "hosts",       "process_id",          "local_rank",    "local_world_size"};
  ASSERT_GE(keys.size(), stable.size());
  EXPECT_EQ(std::vector<std::string>(keys.begin(), keys.begin() + static_cast<long>(stable.size())), stable);
  for (const char* key : {"workers", "warnings", "options", "run_id", "local_devices", "device_source"}) {
    EXPECT_TRUE(doc[key]) << key;
  }
}

TEST(DetectReport, PerTaskContent) {
  Plan plan = Build(SlurmTask(), Options{});
  YAML::Node doc = YAML::Load(RenderDetectReport(plan, WithFormat(DetectFormat::kJson)));
  EXPECT_EQ(doc["method"].as<std::string>(), "slurm");
  EXPECT_EQ(doc["launch_mode"].as<std::string>(), "per-task");
  EXPECT_EQ(doc["coordinator_address"].as<std::string>(), "node001:61497");
  EXPECT_EQ(doc["torch_store"].as<std::string>(), "distrun");
  EXPECT_EQ(doc["num_processes"].as<int>(), 8);
  EXPECT_EQ(doc["num_nodes"].as<int>(), 2);
  EXPECT_EQ(doc["node_rank"].as<int>(), 1);
  EXPECT_EQ(doc["hosts"].as<std::vector<std::string>>(), (std::vector<std::string>{"node001", "node002"}));
  EXPECT_EQ(doc["process_id"].as<int>(), 5);
  EXPECT_EQ(doc["local_rank"].as<int>(), 1);
  EXPECT_EQ(doc["local_world_size"].as<int>(), 4);
  EXPECT_EQ(doc["run_id"].as<std::string>(), "1234");
  EXPECT_TRUE(doc["slice_index"].IsNull());
  EXPECT_EQ(doc["device_source"].as<std::string>(), "CUDA_VISIBLE_DEVICES");
  ASSERT_EQ(doc["workers"].size(), 1u);
  YAML::Node w = doc["workers"][0];
  EXPECT_EQ(w["process_id"].as<int>(), 5);
  EXPECT_EQ(w["local_rank"].as<int>(), 1);
  EXPECT_EQ(w["local_device_ids"].as<std::vector<int>>(), std::vector<int>{0});
  EXPECT_EQ(w["device_tokens"].as<std::vector<std::string>>(), std::vector<std::string>{"1"});
  EXPECT_EQ(w["env"]["RANK"].as<std::string>(), "5");
  EXPECT_EQ(w["env"]["CUDA_VISIBLE_DEVICES"].as<std::string>(), "1");
  // workers[i].env is exactly the plan's variables, in order.
  size_t i = 0;
  for (const auto& entry : w["env"]) {
    ASSERT_LT(i, plan.workers[0].env.size());
    EXPECT_EQ(entry.first.Scalar(), plan.workers[0].env[i].first);
    EXPECT_EQ(entry.second.Scalar(), plan.workers[0].env[i].second);
    ++i;
  }
  EXPECT_EQ(i, plan.workers[0].env.size());
  EXPECT_EQ(doc["warnings"].size(), 0u);
}

TEST(DetectReport, PerNodeHasNullProcessIdAndLocalRank) {
  Plan plan = Build(LocalNode(3), Options{});
  YAML::Node doc = YAML::Load(RenderDetectReport(plan, WithFormat(DetectFormat::kJson)));
  EXPECT_EQ(doc["launch_mode"].as<std::string>(), "per-node");
  EXPECT_TRUE(doc["process_id"].IsNull());
  EXPECT_TRUE(doc["local_rank"].IsNull());
  EXPECT_EQ(doc["local_world_size"].as<int>(), 3);
  EXPECT_EQ(doc["num_processes"].as<int>(), 3);
  ASSERT_EQ(doc["workers"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(doc["workers"][i]["process_id"].as<int>(), i);
    EXPECT_EQ(doc["workers"][i]["env"]["CUDA_VISIBLE_DEVICES"].as<std::string>(), std::to_string(i));
  }
}

TEST(DetectReport, OptionsShowValueAndSource) {
  Options o = WithFormat(DetectFormat::kJson);
  YAML::Node doc = YAML::Load(RenderDetectReport(Build(LocalNode(1), o), o));
  EXPECT_EQ(doc["options"]["nproc-per-node"]["value"].as<std::string>(), "auto");
  EXPECT_EQ(doc["options"]["nproc-per-node"]["source"].as<std::string>(), "flag");
  EXPECT_EQ(doc["options"]["gpus-per-worker"]["source"].as<std::string>(), "environment");
  EXPECT_EQ(doc["options"]["log-level"]["source"].as<std::string>(), "default");
  EXPECT_FALSE(doc["options"]["coordinator-address"]);
}

TEST(DetectReport, WarningsAppearInJson) {
  Topology t = SlurmTask();
  t.warnings = {"first \"quoted\"", "second\nline"};
  YAML::Node doc = YAML::Load(RenderDetectReport(Build(t, Options{}), WithFormat(DetectFormat::kJson)));
  EXPECT_EQ(doc["warnings"].as<std::vector<std::string>>(),
            (std::vector<std::string>{"first \"quoted\"", "second\nline"}));
}

TEST(DetectReport, YamlCarriesTheSameContentAsJson) {
  Topology t = SlurmTask();
  t.warnings = {"yes", "a: b"};
  t.slice_index = 1;
  Plan plan = Build(t, Options{});
  YAML::Node json = YAML::Load(RenderDetectReport(plan, WithFormat(DetectFormat::kJson)));
  YAML::Node yaml = YAML::Load(RenderDetectReport(plan, WithFormat(DetectFormat::kYaml)));
  EXPECT_EQ(Canonical(json), Canonical(yaml));
  EXPECT_FALSE(Canonical(yaml).empty());
  EXPECT_EQ(yaml["slice_index"].as<int>(), 1);
  EXPECT_EQ(yaml["warnings"][0].as<std::string>(), "yes");
  EXPECT_EQ(yaml["workers"][0]["env"]["RANK"].as<std::string>(), "5");
}

TEST(DetectReport, BuildDetectReportIsWhatJsonPrints) {
  Plan plan = Build(SlurmTask(), Options{});
  Options o = WithFormat(DetectFormat::kJson);
  EXPECT_EQ(RenderDetectReport(plan, o), ToJson(BuildDetectReport(plan, o)));
  o.format = DetectFormat::kYaml;
  EXPECT_EQ(RenderDetectReport(plan, o), ToYaml(BuildDetectReport(plan, o)));
}

TEST(DetectReport, TextIsAReadableSummary) {
  Topology t = SlurmTask();
  t.warnings = {"a warning for stderr"};
  Plan plan = Build(t, Options{});
  std::string text = RenderDetectReport(plan, WithFormat(DetectFormat::kText));
  EXPECT_TRUE(Contains(text, "slurm (per-task)")) << text;
  EXPECT_TRUE(Contains(text, "node001:61497")) << text;
  EXPECT_TRUE(Contains(text, "8 in the job, 1 started here")) << text;
  EXPECT_TRUE(Contains(text, "process id")) << text;
  EXPECT_TRUE(Contains(text, "5 (local rank 1 of 4)")) << text;
  EXPECT_TRUE(Contains(text, "node001 node002")) << text;
  EXPECT_TRUE(Contains(text, "0,1,2,3 (CUDA_VISIBLE_DEVICES)")) << text;
  EXPECT_TRUE(Contains(text, "    RANK=5\n")) << text;
  EXPECT_FALSE(Contains(text, "a warning for stderr")) << text;
}

TEST(DetectReport, TextWithoutDevicesOrHosts) {
  Topology t = LocalNode(0);
  t.hosts.clear();
  std::string text = RenderDetectReport(Build(t, Options{}), WithFormat(DetectFormat::kText));
  EXPECT_TRUE(Contains(text, "none (no GPU found)")) << text;
  EXPECT_TRUE(Contains(text, "(known after rendezvous)")) << text;
  EXPECT_TRUE(Contains(text, "devices -")) << text;
  EXPECT_FALSE(Contains(text, "process id")) << text;
}

TEST(DetectReport, EnvWithOneWorkerExportsItsVariablesByName) {
  Plan plan = Build(SlurmTask(), Options{});
  std::string env = RenderDetectReport(plan, WithFormat(DetectFormat::kEnv));
  EXPECT_TRUE(Contains(env, "export DISTRUN_DETECT_METHOD='slurm'\n")) << env;
  EXPECT_TRUE(Contains(env, "export DISTRUN_DETECT_NUM_PROCESSES=8\n")) << env;
  EXPECT_TRUE(Contains(env, "export DISTRUN_DETECT_PROCESS_ID=5\n")) << env;
  EXPECT_TRUE(Contains(env, "export DISTRUN_DETECT_HOSTS='node001,node002'\n")) << env;
  EXPECT_TRUE(Contains(env, "export DISTRUN_DETECT_LOCAL_DEVICES='0,1,2,3'\n")) << env;
  EXPECT_TRUE(Contains(env, "unset DISTRUN_DETECT_SLICE_INDEX\n")) << env;
  EXPECT_TRUE(Contains(env, "export RANK='5'\n")) << env;
  EXPECT_TRUE(Contains(env, "export CUDA_VISIBLE_DEVICES='1'\n")) << env;
  EXPECT_FALSE(Contains(env, "DISTRUN_DETECT_WORKERS")) << env;
  EXPECT_FALSE(Contains(env, "DISTRUN_DETECT_OPTIONS")) << env;
  EXPECT_FALSE(Contains(env, "DISTRUN_DETECT_WARNINGS")) << env;
}

TEST(DetectReport, EnvWithSeveralWorkersPrefixesThem) {
  std::string env = RenderDetectReport(Build(LocalNode(2), Options{}), WithFormat(DetectFormat::kEnv));
  EXPECT_TRUE(Contains(env, "export DISTRUN_WORKER_0_RANK='0'\n")) << env;
  EXPECT_TRUE(Contains(env, "export DISTRUN_WORKER_1_RANK='1'\n")) << env;
  EXPECT_TRUE(Contains(env, "export DISTRUN_WORKER_1_CUDA_VISIBLE_DEVICES='1'\n")) << env;
  EXPECT_TRUE(Contains(env, "unset DISTRUN_DETECT_PROCESS_ID\n")) << env;
  EXPECT_FALSE(Contains(env, "export RANK=")) << env;
}

TEST(DetectReport, EnvWarningsAreComments) {
  Topology t = SlurmTask();
  t.warnings = {"watch out"};
  std::string env = RenderDetectReport(Build(t, Options{}), WithFormat(DetectFormat::kEnv));
  EXPECT_TRUE(env.starts_with("# warning: watch out\n")) << env;
}

// Every line of the env format is a comment, an export of a single-quoted value (or a number), or an
// unset, so `eval` cannot run anything a value smuggles in.
void ExpectSafeToEval(const std::string& env) {
  for (const std::string& line : Lines(env)) {
    if (line.starts_with("# ")) continue;
    if (line.starts_with("unset ")) {
      EXPECT_EQ(line.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_", 6), std::string::npos)
          << line;
      continue;
    }
    ASSERT_TRUE(line.starts_with("export ")) << "line: " << line << "\nin:\n" << env;
    size_t eq = line.find('=');
    ASSERT_NE(eq, std::string::npos) << line;
    std::string name = line.substr(7, eq - 7);
    EXPECT_EQ(name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"), std::string::npos) << line;
    std::string value = line.substr(eq + 1);
    if (value.find_first_not_of("0123456789") == std::string::npos && !value.empty()) continue;
    EXPECT_EQ(value.front(), '\'') << line;
    EXPECT_EQ(value.back(), '\'') << line;
  }
}

TEST(DetectReport, EnvIsSafeToEvalWithHostileValues) {
  const std::string hostile = "x'; touch /tmp/pwned; echo '$(id)`id`";
  Topology t = SlurmTask();
  t.hosts = {hostile, "node002"};
  t.coordinator_host = "node001";
  Options o = WithFormat(DetectFormat::kEnv);
  o.run_id = hostile;
  Plan plan = Build(t, o);
  plan.workers[0].env.emplace_back("HOSTILE", hostile);
  std::string env = RenderDetectReport(plan, o);
  ExpectSafeToEval(env);
  EXPECT_TRUE(Contains(env, "export HOSTILE='x'\\''; touch /tmp/pwned; echo '\\''$(id)`id`'\n")) << env;
}

TEST(DetectReport, EnvWarningWithANewlineStaysAComment) {
  // Warnings quote variables (SLURM_JOB_ID, *_proxy, hosts) whose values may hold a newline; the text
  // after it must not become a shell command.
  Topology t = SlurmTask();
  t.warnings = {"SLURM_JOB_ID=1\ntouch /tmp/distrun-pwned\r\nrm -rf x # is set"};
  std::string env = RenderDetectReport(Build(t, Options{}), WithFormat(DetectFormat::kEnv));
  ExpectSafeToEval(env);
}

// ---- GPUs and CPU binding ----

// Two GPUs as the driver reports them, no files: the report's GPU list comes from the driver.
Plan BuildWithDriver(const Topology& t, const Options& o) {
  Environment env = NoGpuEnv();
  env.cuda_query = [] {
    return std::optional<std::vector<GpuInfo>>(
        std::vector<GpuInfo>{{0, "GPU-aaaa0000-0000-0000-0000-000000000000", "0000:1b:00.0", "NVIDIA H100"},
                             {1, "GPU-bbbb0000-0000-0000-0000-000000000000", "0000:9c:00.0", "NVIDIA H100"}});
  };
  LocalLayout layout = ComputeLocalLayout(t, o, env);
  return MakePlan(t, layout, ProvisionalAssignment(t, layout, o), o, env);
}

TEST(DetectReport, JsonListsEachGpuWithIndexUuidAndPciBusId) {
  Plan plan = BuildWithDriver(LocalNode(0), Options{});
  YAML::Node doc = YAML::Load(RenderDetectReport(plan, WithFormat(DetectFormat::kJson)));
  EXPECT_EQ(doc["gpu_source"].as<std::string>(), "cuda-driver");
  EXPECT_EQ(doc["cpu_bind"].as<std::string>(), "none");
  ASSERT_EQ(doc["gpus"].size(), 2u);
  YAML::Node g = doc["gpus"][1];
  std::vector<std::string> keys;
  for (const auto& entry : g) keys.push_back(entry.first.Scalar());
  EXPECT_EQ(keys, (std::vector<std::string>{"index", "token", "uuid", "pci_bus_id", "name", "problem"}));
  EXPECT_EQ(g["index"].as<int>(), 1);
  EXPECT_EQ(g["token"].as<std::string>(), "1");
  EXPECT_EQ(g["uuid"].as<std::string>(), "GPU-bbbb0000-0000-0000-0000-000000000000");
  EXPECT_EQ(g["pci_bus_id"].as<std::string>(), "0000:9c:00.0");
  EXPECT_EQ(g["name"].as<std::string>(), "NVIDIA H100");
  EXPECT_TRUE(g["problem"].IsNull());
  // Every worker says which CPUs it is pinned to: none without --cpu-bind.
  EXPECT_EQ(doc["workers"][0]["cpus"].size(), 0u);
  EXPECT_TRUE(doc["workers"][0]["cpus"].IsSequence());
}

TEST(DetectReport, UnknownDevicesHaveNullsAndTheReason) {
  Plan plan = Build(SlurmTask(), Options{});  // tokens 0-3 from CUDA_VISIBLE_DEVICES, no GPU here
  YAML::Node doc = YAML::Load(RenderDetectReport(plan, WithFormat(DetectFormat::kJson)));
  ASSERT_EQ(doc["gpus"].size(), 4u);
  EXPECT_EQ(doc["gpus"][3]["token"].as<std::string>(), "3");
  EXPECT_TRUE(doc["gpus"][3]["uuid"].IsNull());
  EXPECT_TRUE(doc["gpus"][3]["pci_bus_id"].IsNull());
  EXPECT_TRUE(Contains(doc["gpus"][3]["problem"].as<std::string>(), "no GPU found"));
  EXPECT_EQ(doc["gpu_source"].as<std::string>(), "none");
}

TEST(DetectReport, WorkerCpusInEveryFormat) {
  Plan plan = BuildWithDriver(LocalNode(0), Options{});
  plan.workers[0].cpus = {0, 1, 2, 3, 8};
  YAML::Node doc = YAML::Load(RenderDetectReport(plan, WithFormat(DetectFormat::kJson)));
  EXPECT_EQ(doc["workers"][0]["cpus"].as<std::vector<int>>(), (std::vector<int>{0, 1, 2, 3, 8}));
  YAML::Node yaml = YAML::Load(RenderDetectReport(plan, WithFormat(DetectFormat::kYaml)));
  EXPECT_EQ(yaml["workers"][0]["cpus"].as<std::vector<int>>(), (std::vector<int>{0, 1, 2, 3, 8}));
  std::string text = RenderDetectReport(plan, WithFormat(DetectFormat::kText));
  EXPECT_TRUE(Contains(text, "  rank 0  local rank 0  devices 0  cpus 0-3,8\n")) << text;
  EXPECT_TRUE(Contains(text, "  rank 1  local rank 1  devices 1\n")) << text;  // not pinned
}

TEST(DetectReport, TextListsTheGpus) {
  std::string text =
      RenderDetectReport(BuildWithDriver(LocalNode(0), Options{}), WithFormat(DetectFormat::kText));
  EXPECT_TRUE(Contains(text,
                       "gpus (cuda-driver)\n"
                       "  0  GPU-aaaa0000-0000-0000-0000-000000000000  0000:1b:00.0  NVIDIA H100\n"
                       "  1  GPU-bbbb0000-0000-0000-0000-000000000000  0000:9c:00.0  NVIDIA H100\n"))
      << text;
  // Tokens that say more than the index are shown, and devices that name no GPU say why.
  Topology t = LocalNode(0);
  t.visible_devices = {"GPU-bbbb", "GPU-cccc"};
  t.device_variable = "CUDA_VISIBLE_DEVICES";
  text = RenderDetectReport(BuildWithDriver(t, Options{}), WithFormat(DetectFormat::kText));
  EXPECT_TRUE(Contains(text, "  0  GPU-bbbb =  GPU-bbbb0000-0000-0000-0000-000000000000  0000:9c:00.0"))
      << text;
  EXPECT_TRUE(Contains(text, "  1  GPU-cccc  (matches none of the 2 GPU UUIDs the CUDA driver lists"))
      << text;
}

TEST(DetectReport, EnvNumbersTheGpus) {
  std::string env =
      RenderDetectReport(BuildWithDriver(LocalNode(0), Options{}), WithFormat(DetectFormat::kEnv));
  EXPECT_TRUE(Contains(env, "export DISTRUN_DETECT_GPUS_COUNT=2\n")) << env;
  EXPECT_TRUE(Contains(env, "export DISTRUN_DETECT_GPUS_1_PCI_BUS_ID='0000:9c:00.0'\n")) << env;
  EXPECT_TRUE(Contains(env, "export DISTRUN_DETECT_GPUS_0_UUID='GPU-aaaa0000-0000-0000-0000-000000000000'\n"))
      << env;
  EXPECT_TRUE(Contains(env, "unset DISTRUN_DETECT_GPUS_0_PROBLEM\n")) << env;
  EXPECT_TRUE(Contains(env, "export DISTRUN_DETECT_CPU_BIND='none'\n")) << env;
  ExpectSafeToEval(env);
}

}  // namespace
}  // namespace distrun
