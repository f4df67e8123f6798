#include "detect/detection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "detect/errors.h"
#include "test_support.h"

namespace distrun {
namespace {

using Strings = std::vector<std::string>;

// MakeEnv with a file-system root that holds nothing, so no detector or device look-up reads this machine.
Environment Env(std::initializer_list<std::pair<std::string, std::string>> vars = {}) {
  Environment env = testing::MakeEnv(vars);
  env.root = "/nonexistent-distrun-detection-test-root";
  return env;
}

ExplicitTopology Method(const std::string& method) {
  ExplicitTopology ex;
  ex.method = method;
  return ex;
}

template <typename F>
std::string ErrorOf(F f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

bool AnyContains(const Strings& items, const std::string& part) {
  for (const auto& s : items) {
    if (Contains(s, part)) return true;
  }
  return false;
}

// The cluster detectors of DESIGN §2, in automatic order.
const Strings kClusterMethods = {"ompi", "pmi", "slurm", "tpu", "k8s", "lsf", "flux", "torchelastic"};

TEST(Detection, MethodNamesInAutomaticOrder) {
  Strings names = DetectionMethodNames();
  ASSERT_GE(names.size(), 3u);
  EXPECT_EQ(Strings(names.begin(), names.begin() + 3), (Strings{"auto", "deactivate", "local"}));
  // Every cluster method is there, in the documented order (others may be added between them).
  auto at = names.begin();
  for (const std::string& method : kClusterMethods) {
    auto found = std::find(at, names.end(), method);
    ASSERT_NE(found, names.end()) << method << " missing or out of order";
    at = found;
  }
}

TEST(Detection, NothingDetectedIsLocal) {
  Topology t = DetectTopology(Env(), ExplicitTopology{});
  EXPECT_EQ(t.method, "local");
  EXPECT_EQ(t.coordinator_host, "127.0.0.1");
  EXPECT_FALSE(t.coordinator_port);
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerNode);
  EXPECT_EQ(t.num_nodes, 1);
  EXPECT_EQ(t.node_rank, 0);
  EXPECT_EQ(t.hosts, Strings{"testhost"});
  EXPECT_EQ(t.num_tasks, 1);
  EXPECT_EQ(t.task_id, 0);
  EXPECT_TRUE(t.visible_devices.empty());
  EXPECT_TRUE(t.device_variable.empty());
  EXPECT_TRUE(t.warnings.empty());
}

TEST(Detection, LocalWithoutHostnameNamesLocalhost) {
  Environment env = Env();
  env.hostname.clear();
  EXPECT_EQ(DetectTopology(env, ExplicitTopology{}).hosts, Strings{"localhost"});
}

TEST(Detection, NamedLocalAndDeactivate) {
  Topology local = DetectTopology(Env(), Method("local"));
  EXPECT_EQ(local.method, "local");
  EXPECT_EQ(local.coordinator_host, "127.0.0.1");
  Topology off = DetectTopology(Env(), Method("deactivate"));
  EXPECT_EQ(off.method, "explicit");
  EXPECT_EQ(off.coordinator_host, "127.0.0.1");
  EXPECT_EQ(off.launch_mode, LaunchMode::kPerNode);
  EXPECT_EQ(off.num_nodes, 1);
}

TEST(Detection, DeactivateIgnoresTheLaunchersVariables) {
  Environment env = Env({{"OMPI_COMM_WORLD_SIZE", "4"},
                         {"OMPI_COMM_WORLD_RANK", "1"},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                         {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                         {"OMPI_MCA_orte_hnp_uri", "1234.0;tcp://10.0.0.1:5000"}});
  Topology t = DetectTopology(env, Method("deactivate"));
  EXPECT_EQ(t.method, "explicit");
  EXPECT_EQ(t.num_tasks, 1);
  EXPECT_EQ(t.task_id, 0);
  t = DetectTopology(env, Method("local"));
  EXPECT_EQ(t.method, "local");
  EXPECT_EQ(t.num_tasks, 1);
}

TEST(Detection, NamedMethodWithoutItsEnvironmentListsWhatIsMissing) {
  for (const std::string& name : kClusterMethods) {
    std::string message = ErrorOf([&] { DetectTopology(Env(), Method(name)); });
    EXPECT_TRUE(Contains(message, "--cluster-detection-method=" + name)) << name << ": " << message;
    EXPECT_TRUE(Contains(message, "not set")) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  std::string slurm = ErrorOf([] { DetectTopology(Env(), Method("slurm")); });
  for (const char* variable :
       {"SLURM_STEP_NODELIST", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_JOB_ID"}) {
    EXPECT_TRUE(Contains(slurm, variable)) << slurm;
  }
  std::string ompi = ErrorOf([] { DetectTopology(Env(), Method("ompi")); });
  EXPECT_TRUE(Contains(ompi, "OMPI_COMM_WORLD_SIZE")) << ompi;
}

TEST(Detection, NamedSlurmInABatchScriptSaysWhatIsMissing) {
  Environment env = Env({{"SLURM_JOB_ID", "77"}, {"SLURM_PROCID", "0"}, {"SLURM_LOCALID", "0"}});
  std::string message = ErrorOf([&] { DetectTopology(env, Method("slurm")); });
  EXPECT_TRUE(Contains(message, "SLURM_STEP_NODELIST")) << message;
  EXPECT_FALSE(Contains(message, "SLURM_JOB_ID,")) << message;
}

TEST(Detection, UnknownMethodListsTheKnownOnes) {
  std::string message = ErrorOf([] { DetectTopology(Env(), Method("pbs")); });
  EXPECT_TRUE(Contains(message, "'pbs'")) << message;
  EXPECT_TRUE(Contains(message, "slurm")) << message;
  EXPECT_TRUE(Contains(message, "deactivate")) << message;
}

TEST(Detection, BatchScriptWithoutSrunWarns) {
  Environment env = Env({{"SLURM_JOB_ID", "77"}, {"SLURM_PROCID", "0"}, {"SLURM_JOB_NODELIST", "n[1-2]"}});
  Topology t = DetectTopology(env, ExplicitTopology{});
  EXPECT_EQ(t.method, "local");
  ASSERT_EQ(t.warnings.size(), 1u);
  EXPECT_TRUE(Contains(t.warnings[0], "SLURM_JOB_ID=77")) << t.warnings[0];
  EXPECT_TRUE(Contains(t.warnings[0], "SLURM_STEP_NODELIST")) << t.warnings[0];
  EXPECT_TRUE(Contains(t.warnings[0], "srun distrun")) << t.warnings[0];
}

TEST(Detection, BatchScriptFixtureWarns) {
  Environment env = testing::LoadFixtureEnv("slurm-single/job-5.out", "BATCH: ");
  env.root = "/nonexistent-distrun-detection-test-root";
  Topology t = DetectTopology(env, ExplicitTopology{});
  EXPECT_NE(t.method, "slurm");
  EXPECT_TRUE(AnyContains(t.warnings, "srun")) << t.method;
}

// mpirun in a batch script: its ranks on the batch node inherit the batch script's SLURM_* variables.
TEST(Detection, MpiRanksInBatchScriptDoNotWarn) {
  Environment env = Env({{"SLURM_JOB_ID", "77"},
                         {"SLURM_PROCID", "0"},
                         {"SLURM_JOB_NODELIST", "n[1-2]"},
                         {"OMPI_COMM_WORLD_SIZE", "2"},
                         {"OMPI_COMM_WORLD_RANK", "1"},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                         {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                         {"OMPI_MCA_orte_hnp_uri", "695795712.0;tcp://10.99.0.11:51593"}});
  Topology t = DetectTopology(env, ExplicitTopology{});
  EXPECT_EQ(t.method, "ompi");
  EXPECT_TRUE(t.warnings.empty()) << t.warnings[0];
}

TEST(Detection, SallocShellWithoutTaskIdsDoesNotWarn) {
  Topology t = DetectTopology(Env({{"SLURM_JOB_ID", "77"}}), ExplicitTopology{});
  EXPECT_EQ(t.method, "local");
  EXPECT_TRUE(t.warnings.empty());
}

TEST(Detection, VisibleDevicesAreReadAsTokens) {
  Topology t = DetectTopology(Env({{"CUDA_VISIBLE_DEVICES", "GPU-aaaa,1"}}), ExplicitTopology{});
  EXPECT_EQ(t.visible_devices, (Strings{"GPU-aaaa", "1"}));
  EXPECT_EQ(t.device_variable, "CUDA_VISIBLE_DEVICES");
  t = DetectTopology(Env({{"CUDA_VISIBLE_DEVICES", ""}}), ExplicitTopology{});
  EXPECT_TRUE(t.visible_devices.empty());
  EXPECT_EQ(t.device_variable, "CUDA_VISIBLE_DEVICES");
  EXPECT_THROW(DetectTopology(Env({{"CUDA_VISIBLE_DEVICES", "0,,1"}}), ExplicitTopology{}), UsageError);
}

TEST(Detection, ExplicitCoordinatorAddress) {
  ExplicitTopology ex;
  ex.coordinator_address.emplace("head:7000");
  Topology t = DetectTopology(Env(), ex);
  EXPECT_EQ(t.method, "local");
  EXPECT_EQ(t.coordinator_host, "head");
  EXPECT_EQ(t.coordinator_port, 7000);

  ex.coordinator_address.emplace("head");
  t = DetectTopology(Env(), ex);
  EXPECT_EQ(t.coordinator_host, "head");
  EXPECT_FALSE(t.coordinator_port);

  ex.coordinator_address.emplace("[fd00::1]:9");
  t = DetectTopology(Env(), ex);
  EXPECT_EQ(t.coordinator_host, "fd00::1");
  EXPECT_EQ(t.coordinator_port, 9);
}

TEST(Detection, ExplicitPortWinsOverTheAddresssPort) {
  ExplicitTopology ex;
  ex.coordinator_address.emplace("head:7000");
  ex.coordinator_port = 7100;
  Topology t = DetectTopology(Env(), ex);
  EXPECT_EQ(t.coordinator_host, "head");
  EXPECT_EQ(t.coordinator_port, 7100);
  ex.coordinator_address.reset();
  t = DetectTopology(Env(), ex);
  EXPECT_EQ(t.coordinator_host, "127.0.0.1");
  EXPECT_EQ(t.coordinator_port, 7100);
}

// Out of line: GCC 12 with -O3 and the sanitizers reports a false "may be used uninitialized" for the
// optional<string> member when this is written inline in the test body.
[[gnu::noinline]] ExplicitTopology NodesWithAddress(int num_nodes, int node_rank,
                                                    const std::string& address) {
  ExplicitTopology ex;
  ex.num_nodes = num_nodes;
  ex.node_rank = node_rank;
  ex.coordinator_address = address;
  return ex;
}

TEST(Detection, ExplicitNodesFieldByField) {
  Topology t = DetectTopology(Env(), NodesWithAddress(4, 2, "head"));
  EXPECT_EQ(t.method, "local");
  EXPECT_EQ(t.num_nodes, 4);
  EXPECT_EQ(t.node_rank, 2);
  EXPECT_TRUE(t.hosts.empty());  // this host alone no longer lists the job's hosts
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerNode);
  EXPECT_TRUE(t.warnings.empty());
}

// An Indexed Job's pod: the node count and coordinator the Kubernetes detector needs may come as flags or
// config keys as well as their variables (DISTRUN_NUM_NODES, DISTRUN_COORDINATOR_ADDRESS).
TEST(Detection, KubernetesTakesTheNodeCountAndAddressHoweverTheyAreGiven) {
  Environment pod = Env({{"JOB_COMPLETION_INDEX", "2"}, {"DISTRUN_K8S_SUBDOMAIN", "workers"}});
  pod.hostname = "train-2";
  EXPECT_TRUE(Contains(ErrorOf([&] { DetectTopology(pod, Method("auto")); }), "DISTRUN_NUM_NODES"));

  ExplicitTopology flags;
  flags.num_nodes = 4;
  Topology t = DetectTopology(pod, flags);
  EXPECT_EQ(t.method, "k8s");
  EXPECT_EQ(t.num_nodes, 4);
  EXPECT_EQ(t.node_rank, 2);
  EXPECT_EQ(t.hosts, (Strings{"train-0.workers", "train-1.workers", "train-2.workers", "train-3.workers"}));
  EXPECT_EQ(t.coordinator_host, "train-0.workers");

  // A hostname that names no pod of the Job: only a coordinator address lets the pods meet.
  pod.hostname = "custom";
  EXPECT_TRUE(Contains(ErrorOf([&] { DetectTopology(pod, flags); }), "DISTRUN_COORDINATOR_ADDRESS"));
  flags.coordinator_address = "head.workers:29400";
  t = DetectTopology(pod, flags);
  EXPECT_EQ(t.method, "k8s");
  EXPECT_EQ(t.node_rank, 2);
  EXPECT_EQ(t.coordinator_host, "head.workers");
  EXPECT_EQ(t.coordinator_port, 29400);

  // The flag wins over the variable, as it does for every option.
  Environment both =
      Env({{"JOB_COMPLETION_INDEX", "2"}, {"DISTRUN_K8S_SUBDOMAIN", "workers"}, {"DISTRUN_NUM_NODES", "3"}});
  both.hostname = "train-2";
  flags = {};
  flags.num_nodes = 5;
  EXPECT_EQ(DetectTopology(both, flags).hosts.size(), 5u);
}

TEST(Detection, ExplicitSingleNodeKeepsTheHost) {
  ExplicitTopology ex;
  ex.num_nodes = 1;
  EXPECT_EQ(DetectTopology(Env(), ex).hosts, Strings{"testhost"});
}

TEST(Detection, ExplicitIdsMustBeBelowTheirCounts) {
  ExplicitTopology ex;
  ex.num_nodes = 2;
  ex.node_rank = 2;
  std::string message = ErrorOf([&] { DetectTopology(Env(), ex); });
  EXPECT_TRUE(Contains(message, "--node-rank=2")) << message;
  EXPECT_TRUE(Contains(message, "--num-nodes=2")) << message;

  ex = ExplicitTopology{};
  ex.node_rank = 1;  // against the detected single node
  EXPECT_THROW(DetectTopology(Env(), ex), UsageError);

  ex = Method("deactivate");
  ex.num_processes = 4;
  ex.process_id = 4;
  message = ErrorOf([&] { DetectTopology(Env(), ex); });
  EXPECT_TRUE(Contains(message, "--process-id=4")) << message;
  EXPECT_TRUE(Contains(message, "--num-processes=4")) << message;

  ex = Method("deactivate");
  ex.process_id = 1;  // against the default single process
  EXPECT_THROW(DetectTopology(Env(), ex), UsageError);
}

TEST(Detection, ExplicitZeroCountsAreRefused) {
  ExplicitTopology ex;
  ex.num_nodes = 0;
  EXPECT_THROW(DetectTopology(Env(), ex), UsageError);
  ex = ExplicitTopology{};
  ex.num_processes = 0;
  EXPECT_THROW(DetectTopology(Env(), ex), UsageError);
}

TEST(Detection, DeactivateWithExplicitProcessIsOneWorkerPerDistrun) {
  ExplicitTopology ex = Method("deactivate");
  ex.coordinator_address.emplace("head:7777");
  ex.num_processes = 8;
  ex.process_id = 3;
  Topology t = DetectTopology(Env(), ex);
  EXPECT_EQ(t.method, "explicit");
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerTask);
  EXPECT_EQ(t.num_tasks, 8);
  EXPECT_EQ(t.task_id, 3);
  EXPECT_EQ(t.num_nodes, 8);
  EXPECT_EQ(t.node_rank, 3);
  EXPECT_TRUE(t.hosts.empty());
  EXPECT_EQ(t.coordinator_host, "head");
  EXPECT_EQ(t.coordinator_port, 7777);
  EXPECT_TRUE(t.warnings.empty());
}

TEST(Detection, DeactivateKeepsExplicitNodeCountWithProcessIds) {
  ExplicitTopology ex = Method("deactivate");
  ex.coordinator_address.emplace("head");
  ex.num_processes = 8;
  ex.process_id = 5;
  ex.num_nodes = 2;
  ex.node_rank = 1;
  Topology t = DetectTopology(Env(), ex);
  EXPECT_EQ(t.num_nodes, 2);
  EXPECT_EQ(t.node_rank, 1);
  EXPECT_EQ(t.task_id, 5);
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerTask);
}

TEST(Detection, ExplicitProcessOnAWorkstationIsExplicit) {
  // The README's example: explicit values come before every detector, so where nothing else is detected,
  // --num-processes/--process-id describe this process exactly as with deactivate.
  ExplicitTopology ex;
  ex.coordinator_address.emplace("head-node:7777");
  ex.num_processes = 8;
  ex.process_id = 3;
  Topology t = DetectTopology(Env(), ex);
  EXPECT_EQ(t.method, "explicit");
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerTask);
  EXPECT_EQ(t.num_tasks, 8);
  EXPECT_EQ(t.task_id, 3);
  EXPECT_EQ(t.num_nodes, 8);
  EXPECT_EQ(t.node_rank, 3);
  EXPECT_EQ(t.coordinator_host, "head-node");
}

TEST(Detection, NamedLocalStaysOneNodeWithAnExplicitId) {
  ExplicitTopology ex = Method("local");
  ex.num_processes = 2;
  ex.process_id = 1;
  Topology t = DetectTopology(Env(), ex);
  EXPECT_EQ(t.method, "local");
  EXPECT_EQ(t.task_id, 1);
  EXPECT_EQ(t.num_tasks, 2);
}

TEST(Detection, ExplicitDeviceIdsWinOverTheVariable) {
  ExplicitTopology ex;
  ex.local_device_ids = Strings{"GPU-aaaa", "GPU-bbbb"};
  Topology t = DetectTopology(Env({{"CUDA_VISIBLE_DEVICES", "0,1,2,3"}}), ex);
  EXPECT_EQ(t.visible_devices, (Strings{"GPU-aaaa", "GPU-bbbb"}));
  EXPECT_EQ(t.device_variable, "--local-device-ids");
}

TEST(Detection, LoopbackCoordinatorAcrossHostsWarns) {
  for (const char* host : {"localhost", "127.0.0.1", "127.1.2.3", "::1", "ip6-localhost"}) {
    ExplicitTopology ex;
    ex.coordinator_address =
        std::string(host).find(':') != std::string::npos ? "[" + std::string(host) + "]" : std::string(host);
    ex.num_nodes = 2;
    ex.node_rank = 0;
    Topology t = DetectTopology(Env(), ex);
    ASSERT_EQ(t.warnings.size(), 1u) << host;
    EXPECT_TRUE(Contains(t.warnings[0], "loopback")) << t.warnings[0];
    EXPECT_TRUE(Contains(t.warnings[0], "'" + std::string(host) + "'")) << t.warnings[0];
    EXPECT_TRUE(Contains(t.warnings[0], "--coordinator-address")) << t.warnings[0];
  }
  // The workstation default across explicit processes on several hosts.
  ExplicitTopology ex = Method("deactivate");
  ex.num_processes = 2;
  ex.process_id = 0;
  EXPECT_TRUE(AnyContains(DetectTopology(Env(), ex).warnings, "loopback"));
}

TEST(Detection, LoopbackOnOneNodeDoesNotWarn) {
  ExplicitTopology ex;
  ex.coordinator_address.emplace("localhost");
  EXPECT_TRUE(DetectTopology(Env(), ex).warnings.empty());
  ex.coordinator_address.emplace("node127");
  ex.num_nodes = 2;
  EXPECT_TRUE(DetectTopology(Env(), ex).warnings.empty());
}

TEST(Detection, ProxyWarningsAreAdded) {
  Topology t = DetectTopology(Env({{"https_proxy", "http://u:secret@proxy:3128"}}), ExplicitTopology{});
  ASSERT_EQ(t.warnings.size(), 1u);
  EXPECT_TRUE(Contains(t.warnings[0], "https_proxy")) << t.warnings[0];
  EXPECT_TRUE(Contains(t.warnings[0], "'127.0.0.1'")) << t.warnings[0];
  EXPECT_FALSE(Contains(t.warnings[0], "secret")) << t.warnings[0];
  t = DetectTopology(Env({{"https_proxy", "http://proxy:3128"}, {"no_proxy", "127.0.0.1,localhost"}}),
                     ExplicitTopology{});
  EXPECT_TRUE(t.warnings.empty());
  // The check uses the coordinator host after explicit values.
  ExplicitTopology ex;
  ex.coordinator_address.emplace("head.cluster");
  t = DetectTopology(Env({{"https_proxy", "http://proxy:3128"}, {"no_proxy", "127.0.0.1"}}), ex);
  EXPECT_TRUE(AnyContains(t.warnings, "'head.cluster'"));
}

// Open MPI ranks on two hosts: the environment does not say where rank 0 runs (DESIGN §2, `ompi`).
Environment OmpiAcrossHosts() {
  return Env({{"OMPI_COMM_WORLD_SIZE", "8"},
              {"OMPI_COMM_WORLD_RANK", "5"},
              {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
              {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
              {"OMPI_MCA_orte_hnp_uri", "1234.0;tcp://10.0.0.1:5000"}});
}

TEST(Detection, UnknownCoordinatorHostAsksForAnAddress) {
  Topology t = DetectTopology(OmpiAcrossHosts(), ExplicitTopology{});
  const std::string& message = t.coordinator_problem;
  EXPECT_TRUE(std::find(t.warnings.begin(), t.warnings.end(), message) != t.warnings.end());
  EXPECT_TRUE(Contains(message, "--coordinator-address")) << message;
  EXPECT_TRUE(Contains(message, "DISTRUN_COORDINATOR_ADDRESS")) << message;
  EXPECT_TRUE(Contains(message, "ompi")) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST(Detection, ExplicitAddressFillsTheUnknownCoordinatorHost) {
  ExplicitTopology ex;
  ex.coordinator_address.emplace("node001");
  Topology t = DetectTopology(OmpiAcrossHosts(), ex);
  EXPECT_EQ(t.method, "ompi");
  EXPECT_EQ(t.coordinator_host, "node001");
  EXPECT_EQ(t.task_id, 5);
  EXPECT_EQ(t.num_tasks, 8);
  // Explicit values override the detected ones field by field.
  ex.process_id = 6;
  t = DetectTopology(OmpiAcrossHosts(), ex);
  EXPECT_EQ(t.method, "ompi");
  EXPECT_EQ(t.task_id, 6);
  EXPECT_EQ(t.num_tasks, 8);
  EXPECT_EQ(t.local_task, 1);
}

TEST(Detection, UnclaimedPmiVariablesWarn) {
  Topology t = DetectTopology(Env({{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}}), ExplicitTopology{});
  EXPECT_EQ(t.method, "local");
  ASSERT_EQ(t.warnings.size(), 1u);
  const std::string& w = t.warnings[0];
  EXPECT_TRUE(Contains(w, "PMI_RANK=2 and PMI_SIZE=4 are set but no launcher distrun knows claims them"))
      << w;
  EXPECT_TRUE(Contains(w, "MPI_LOCALRANKID")) << w;
  EXPECT_TRUE(Contains(w, "--cluster-detection-method mpi")) << w;
  EXPECT_EQ(w.find('\n'), std::string::npos) << w;

  Topology one = DetectTopology(Env({{"PMI_SIZE", "4"}}), ExplicitTopology{});
  ASSERT_EQ(one.warnings.size(), 1u);
  EXPECT_TRUE(Contains(one.warnings[0], "PMI_SIZE=4 is set but")) << one.warnings[0];
}

TEST(Detection, ClaimedOrChosenPmiVariablesDoNotWarn) {
  // MPICH's Hydra claims them.
  Topology hydra = DetectTopology(
      Env({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "0"}, {"MPI_LOCALNRANKS", "2"}}),
      ExplicitTopology{});
  EXPECT_EQ(hydra.method, "pmi");
  EXPECT_TRUE(hydra.warnings.empty());
  // The user chose the method.
  Topology local = DetectTopology(Env({{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}}), Method("local"));
  EXPECT_TRUE(local.warnings.empty());
}

}  // namespace
}  // namespace distrun
