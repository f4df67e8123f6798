#include <gtest/gtest.h>

#include "detect/coordinator_port.h"
#include "detect/detector.h"
#include "detect/errors.h"
#include "detect/test_temp_root.h"
#include "test_support.h"

namespace distrun {
namespace {

using testing::MakeEnv;
using testing::TempRoot;

// A pod: its variables, its hostname, and the /etc/hosts the kubelet wrote for it (if any).
Environment Pod(const TempRoot& root, const std::string& hostname,
                std::initializer_list<std::pair<std::string, std::string>> vars,
                const std::string& hosts_file = "") {
  Environment env = MakeEnv(vars);
  env.hostname = hostname;
  env.root = root.path();
  if (!hosts_file.empty()) root.Write("etc/hosts", hosts_file);
  return env;
}

// What the kubelet writes for a pod with `subdomain` set.
std::string KubeletHosts(const std::string& hostname, const std::string& subdomain) {
  return "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
         "fe00::0\tip6-localnet\n10.244.1.17\t" +
         hostname + "." + subdomain + ".default.svc.cluster.local\t" + hostname + "\n";
}

std::string UsageMessage(const Environment& env) {
  try {
    K8sDetector().detect(env);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(K8sDetector, PresentWithCompletionIndexOnly) {
  EXPECT_EQ(K8sDetector().missing(MakeEnv({})), std::vector<std::string>{"JOB_COMPLETION_INDEX"});
  EXPECT_TRUE(K8sDetector().missing(MakeEnv({{"JOB_COMPLETION_INDEX", "0"}})).empty());
}

TEST(K8sDetector, IndexedJobWithSubdomainFromEtcHosts) {
  TempRoot root;
  Environment env = Pod(root, "train-2", {{"JOB_COMPLETION_INDEX", "2"}, {"DISTRUN_NUM_NODES", "4"}},
                        KubeletHosts("train-2", "workers"));
  Topology t = K8sDetector().detect(env);
  EXPECT_EQ(t.method, "k8s");
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerNode);
  EXPECT_EQ(t.num_nodes, 4);
  EXPECT_EQ(t.node_rank, 2);
  EXPECT_EQ(t.num_tasks, 4);
  EXPECT_EQ(t.task_id, 2);
  EXPECT_EQ(t.hosts, (std::vector<std::string>{"train-0.workers", "train-1.workers", "train-2.workers",
                                               "train-3.workers"}));
  EXPECT_EQ(t.coordinator_host, "train-0.workers");
  EXPECT_EQ(t.job_id, "train");
  ASSERT_TRUE(t.coordinator_port.has_value());
  EXPECT_GE(*t.coordinator_port, kCoordinatorPortBase);
  EXPECT_TRUE(t.warnings.empty());
}

TEST(K8sDetector, EveryPodAgreesOnCoordinatorAndPort) {
  TempRoot root0, root3;
  Topology a = K8sDetector().detect(Pod(root0, "bert-pretrain-0",
                                        {{"JOB_COMPLETION_INDEX", "0"}, {"DISTRUN_NUM_NODES", "4"}},
                                        KubeletHosts("bert-pretrain-0", "bert")));
  Topology b = K8sDetector().detect(Pod(root3, "bert-pretrain-3",
                                        {{"JOB_COMPLETION_INDEX", "3"}, {"DISTRUN_NUM_NODES", "4"}},
                                        KubeletHosts("bert-pretrain-3", "bert")));
  EXPECT_EQ(a.coordinator_host, "bert-pretrain-0.bert");
  EXPECT_EQ(a.coordinator_host, b.coordinator_host);
  EXPECT_EQ(a.coordinator_port, b.coordinator_port);
  EXPECT_EQ(a.hosts, b.hosts);
}

TEST(K8sDetector, SubdomainFromFqdnHostnameAndExplicitVariable) {
  TempRoot root;
  Topology fqdn = K8sDetector().detect(Pod(root, "train-1.svc-a.ml.svc.cluster.local",
                                           {{"JOB_COMPLETION_INDEX", "1"}, {"DISTRUN_NUM_NODES", "2"}}));
  EXPECT_EQ(fqdn.coordinator_host, "train-0.svc-a");
  Topology explicit_sub = K8sDetector().detect(
      Pod(root, "train-1",
          {{"JOB_COMPLETION_INDEX", "1"}, {"DISTRUN_NUM_NODES", "2"}, {"DISTRUN_K8S_SUBDOMAIN", "svc-b"}},
          KubeletHosts("train-1", "svc-a")));
  EXPECT_EQ(explicit_sub.coordinator_host, "train-0.svc-b");
  EXPECT_NE(UsageMessage(Pod(root, "train-1",
                             {{"JOB_COMPLETION_INDEX", "1"},
                              {"DISTRUN_NUM_NODES", "2"},
                              {"DISTRUN_K8S_SUBDOMAIN", "svc.ns"}}))
                .find("DISTRUN_K8S_SUBDOMAIN='svc.ns'"),
            std::string::npos);
}

TEST(K8sDetector, HostnameFromVariableWhenUnknown) {
  TempRoot root;
  Environment env = Pod(root, "",
                        {{"JOB_COMPLETION_INDEX", "1"},
                         {"DISTRUN_NUM_NODES", "2"},
                         {"HOSTNAME", "job-1"},
                         {"DISTRUN_K8S_SUBDOMAIN", "s"}});
  EXPECT_EQ(K8sDetector().detect(env).coordinator_host, "job-0.s");
}

TEST(K8sDetector, JobSetSpansTheReplicatedJob) {
  TempRoot root;
  Environment env = Pod(root, "llama-workers-1-3",
                        {{"JOB_COMPLETION_INDEX", "3"},
                         {"JOBSET_NAME", "llama"},
                         {"REPLICATED_JOB_NAME", "workers"},
                         {"REPLICATED_JOB_REPLICAS", "2"},
                         {"JOB_INDEX", "1"},
                         {"DISTRUN_NUM_NODES", "8"}},
                        KubeletHosts("llama-workers-1-3", "llama"));
  Topology t = K8sDetector().detect(env);
  EXPECT_EQ(t.num_nodes, 8);
  EXPECT_EQ(t.node_rank, 7);
  EXPECT_EQ(t.coordinator_host, "llama-workers-0-0.llama");
  ASSERT_EQ(t.hosts.size(), 8u);
  EXPECT_EQ(t.hosts[3], "llama-workers-0-3.llama");
  EXPECT_EQ(t.hosts[4], "llama-workers-1-0.llama");
  EXPECT_EQ(t.job_id, "llama-workers");
}

TEST(K8sDetector, JobSetDefaultsSubdomainToItsNameAndJobIndexToTheHostname) {
  TempRoot root;
  Environment env = Pod(root, "pt-node-2-0",
                        {{"JOB_COMPLETION_INDEX", "0"},
                         {"JOBSET_NAME", "pt"},
                         {"REPLICATED_JOB_NAME", "node"},
                         {"REPLICATED_JOB_REPLICAS", "4"},
                         {"DISTRUN_NUM_NODES", "4"}});
  Topology t = K8sDetector().detect(env);
  EXPECT_EQ(t.node_rank, 2);
  EXPECT_EQ(t.coordinator_host, "pt-node-0-0.pt");
}

TEST(K8sDetector, JobSetErrors) {
  TempRoot root;
  auto env = [&](const std::string& hostname,
                 std::initializer_list<std::pair<std::string, std::string>> extra) {
    Environment e = Pod(root, hostname,
                        {{"JOB_COMPLETION_INDEX", "1"}, {"JOBSET_NAME", "js"}, {"REPLICATED_JOB_NAME", "w"}});
    for (const auto& [k, v] : extra) e.vars[k] = v;
    return e;
  };
  std::string wrong_host =
      UsageMessage(env("other-0-1", {{"REPLICATED_JOB_REPLICAS", "1"}, {"DISTRUN_NUM_NODES", "2"}}));
  EXPECT_NE(wrong_host.find("'other-0-1'"), std::string::npos) << wrong_host;
  EXPECT_NE(wrong_host.find("js-w-<job index>-1"), std::string::npos) << wrong_host;
  std::string index_mismatch = UsageMessage(
      env("js-w-0-1", {{"JOB_INDEX", "1"}, {"REPLICATED_JOB_REPLICAS", "2"}, {"DISTRUN_NUM_NODES", "4"}}));
  EXPECT_NE(index_mismatch.find("js-w-1-1"), std::string::npos) << index_mismatch;
  std::string no_replicas = UsageMessage(env("js-w-0-1", {{"DISTRUN_NUM_NODES", "2"}}));
  EXPECT_NE(no_replicas.find("REPLICATED_JOB_REPLICAS"), std::string::npos) << no_replicas;
  std::string uneven =
      UsageMessage(env("js-w-0-1", {{"REPLICATED_JOB_REPLICAS", "2"}, {"DISTRUN_NUM_NODES", "5"}}));
  EXPECT_NE(uneven.find("DISTRUN_NUM_NODES=5"), std::string::npos) << uneven;
  std::string pod_too_big =
      UsageMessage(env("js-w-0-1", {{"REPLICATED_JOB_REPLICAS", "2"}, {"DISTRUN_NUM_NODES", "2"}}));
  EXPECT_NE(pod_too_big.find("JOB_COMPLETION_INDEX=1"), std::string::npos) << pod_too_big;
  std::string job_too_big =
      UsageMessage(env("js-w-2-1", {{"REPLICATED_JOB_REPLICAS", "2"}, {"DISTRUN_NUM_NODES", "4"}}));
  EXPECT_NE(job_too_big.find("JOB_INDEX=2"), std::string::npos) << job_too_big;
}

TEST(K8sDetector, KubeflowTrainJobUsesPetNnodes) {
  TempRoot root;
  Environment env = Pod(root, "mytrain-node-0-2",
                        {{"JOB_COMPLETION_INDEX", "2"},
                         {"PET_NNODES", "3"},
                         {"PET_NPROC_PER_NODE", "auto"},
                         {"PET_NODE_RANK", "2"},
                         {"PET_MASTER_ADDR", "mytrain-node-0-0.mytrain"},
                         {"PET_MASTER_PORT", "29400"}},
                        KubeletHosts("mytrain-node-0-2", "mytrain"));
  Topology t = K8sDetector().detect(env);
  EXPECT_EQ(t.num_nodes, 3);
  EXPECT_EQ(t.node_rank, 2);
  EXPECT_EQ(t.coordinator_host, "mytrain-node-0-0.mytrain");
  env.vars["PET_NNODES"] = "3:3";
  EXPECT_EQ(K8sDetector().detect(env).num_nodes, 3);
  env.vars["PET_NNODES"] = "1:4";
  EXPECT_NE(UsageMessage(env).find("PET_NNODES='1:4'"), std::string::npos);
}

TEST(K8sDetector, CountIsRequiredAndStrict) {
  TempRoot root;
  std::string none = UsageMessage(Pod(root, "job-0", {{"JOB_COMPLETION_INDEX", "0"}}));
  EXPECT_NE(none.find("DISTRUN_NUM_NODES"), std::string::npos) << none;
  EXPECT_NE(UsageMessage(Pod(root, "job-0", {{"JOB_COMPLETION_INDEX", "0"}, {"DISTRUN_NUM_NODES", "four"}}))
                .find("DISTRUN_NUM_NODES='four'"),
            std::string::npos);
  EXPECT_NE(UsageMessage(Pod(root, "job-0", {{"JOB_COMPLETION_INDEX", "0"}, {"DISTRUN_NUM_NODES", "0"}}))
                .find("DISTRUN_NUM_NODES=0"),
            std::string::npos);
  EXPECT_NE(UsageMessage(Pod(root, "job-x", {{"JOB_COMPLETION_INDEX", "x"}, {"DISTRUN_NUM_NODES", "2"}}))
                .find("JOB_COMPLETION_INDEX='x'"),
            std::string::npos);
  std::string too_big =
      UsageMessage(Pod(root, "job-4", {{"JOB_COMPLETION_INDEX", "4"}, {"DISTRUN_NUM_NODES", "4"}}));
  EXPECT_NE(too_big.find("JOB_COMPLETION_INDEX=4"), std::string::npos) << too_big;
}

TEST(K8sDetector, HostnameMustFollowTheConvention) {
  TempRoot root;
  std::string message =
      UsageMessage(Pod(root, "custom-name", {{"JOB_COMPLETION_INDEX", "1"}, {"DISTRUN_NUM_NODES", "2"}}));
  EXPECT_NE(message.find("'custom-name'"), std::string::npos) << message;
  EXPECT_NE(message.find("'-1'"), std::string::npos) << message;
  // Suffix must be the whole index: "job-11" is not pod 1 of "job-1".
  EXPECT_NE(UsageMessage(Pod(root, "job-11", {{"JOB_COMPLETION_INDEX", "1"}, {"DISTRUN_NUM_NODES", "2"}})),
            "(no error)");
  // An explicit coordinator makes the hostnames unnecessary.
  Topology t = K8sDetector().detect(Pod(root, "custom-name",
                                        {{"JOB_COMPLETION_INDEX", "1"},
                                         {"DISTRUN_NUM_NODES", "2"},
                                         {"DISTRUN_COORDINATOR_ADDRESS", "head.example:5000"}}));
  EXPECT_EQ(t.coordinator_host, "");
  EXPECT_TRUE(t.hosts.empty());
  EXPECT_EQ(t.node_rank, 1);
}

TEST(K8sDetector, NoSubdomainMeansNoReachableNames) {
  TempRoot root;
  std::string message =
      UsageMessage(Pod(root, "train-1", {{"JOB_COMPLETION_INDEX", "1"}, {"DISTRUN_NUM_NODES", "2"}}));
  EXPECT_NE(message.find("subdomain"), std::string::npos) << message;
  EXPECT_NE(message.find("'train-0'"), std::string::npos) << message;
  // One pod needs nobody to resolve anything.
  Topology single =
      K8sDetector().detect(Pod(root, "solo-0", {{"JOB_COMPLETION_INDEX", "0"}, {"DISTRUN_NUM_NODES", "1"}}));
  EXPECT_EQ(single.coordinator_host, "solo-0");
  EXPECT_EQ(single.hosts, std::vector<std::string>{"solo-0"});
}

TEST(K8sDetector, JobSetVariablesWithoutNamesWarn) {
  TempRoot root;
  Environment env =
      Pod(root, "train-0", {{"JOB_COMPLETION_INDEX", "0"}, {"DISTRUN_NUM_NODES", "2"}, {"JOB_INDEX", "0"}},
          KubeletHosts("train-0", "s"));
  Topology t = K8sDetector().detect(env);
  ASSERT_EQ(t.warnings.size(), 1u);
  EXPECT_NE(t.warnings[0].find("JOBSET_NAME"), std::string::npos);
}

}  // namespace
}  // namespace distrun
