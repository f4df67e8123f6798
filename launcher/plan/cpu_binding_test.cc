#include "launcher/plan/cpu_binding.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "detect/test_temp_root.h"
#include "launcher/process/spawn.h"
#include "test_support.h"

namespace distrun {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Cpus = std::vector<int>;

// ---- a fake /proc and /sys ----

// A two-socket node: CPUs 0-15 on NUMA node 0, 16-31 on node 1; GPU 0000:1b:00.0 on node 0,
// GPU 0000:9c:00.0 on node 1 with a narrower local_cpulist than its node.
class FakeNode {
 public:
  FakeNode() {
    Status("0-31");
    root.Write("sys/devices/system/cpu/online", "0-31\n");
    root.Write("sys/devices/system/node/node0/cpulist", "0-15\n");
    root.Write("sys/devices/system/node/node1/cpulist", "16-31\n");
    Gpu("0000:1b:00.0", "0-15", "0");
    Gpu("0000:9c:00.0", "16-23", "1");
  }
  void Status(const std::string& allowed) const {
    root.Write("proc/self/status", "Name:\tdistrun\nCpus_allowed:\tffffffff\nCpus_allowed_list:\t" + allowed +
                                       "\nMems_allowed_list:\t0-1\n");
  }
  void Gpu(const std::string& pci, const std::string& local, const std::string& numa) const {
    root.Write("sys/bus/pci/devices/" + pci + "/local_cpulist", local + "\n");
    root.Write("sys/bus/pci/devices/" + pci + "/numa_node", numa + "\n");
  }
  Environment Env() const {
    Environment env = testing::MakeEnv({});
    env.root = root.path();
    return env;
  }

  testing::TempRoot root;
};

ResolvedDevice Gpu(const std::string& token, const std::string& pci) {
  GpuInfo g;
  g.pci_bus_id = pci;
  return {token, g, {}};
}

TEST(AllowedCpus, AffinityMaskWithinOnlineCpus) {
  FakeNode node;
  EXPECT_EQ(AllowedCpus(node.Env()), *ParseCpuList("0-31"));
  // A mask holding offline CPUs (VMs with spare possible CPUs): sched_getaffinity leaves them out.
  node.Status("0-63");
  EXPECT_EQ(AllowedCpus(node.Env()), *ParseCpuList("0-31"));
  node.Status("4-7,20");
  EXPECT_EQ(AllowedCpus(node.Env()), Cpus({4, 5, 6, 7, 20}));
  // Without /sys the mask stands alone; without the status file nothing is known.
  testing::TempRoot bare;
  bare.Write("proc/self/status", "Cpus_allowed_list:\t0-3\n");
  Environment env = testing::MakeEnv({});
  env.root = bare.path();
  EXPECT_EQ(AllowedCpus(env), Cpus({0, 1, 2, 3}));
  env.root = bare.path() / "missing";
  EXPECT_FALSE(AllowedCpus(env).has_value());
}

TEST(AllowedCpus, ThisProcessMatchesSchedGetaffinity) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  ASSERT_EQ(sched_getaffinity(0, sizeof mask, &mask), 0);
  Cpus expected;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &mask)) expected.push_back(cpu);
  }
  EXPECT_EQ(AllowedCpus(testing::MakeEnv({})), expected);
}

TEST(CpusNearGpu, LocalCpulistOrNumaNode) {
  FakeNode node;
  EXPECT_EQ(CpusNearGpu(node.Env(), CpuBind::kGpu, "0000:9c:00.0").cpus, *ParseCpuList("16-23"));
  EXPECT_EQ(CpusNearGpu(node.Env(), CpuBind::kNuma, "0000:9c:00.0").cpus, *ParseCpuList("16-31"));
  EXPECT_EQ(CpusNearGpu(node.Env(), CpuBind::kNuma, "0000:1b:00.0").cpus, *ParseCpuList("0-15"));
  // No NUMA node known (-1): the device's local CPUs are the nearest there are.
  node.Gpu("0000:3b:00.0", "0-31", "-1");
  EXPECT_EQ(CpusNearGpu(node.Env(), CpuBind::kNuma, "0000:3b:00.0").cpus, *ParseCpuList("0-31"));
}

TEST(CpusNearGpu, MissingOrBadFilesSayWhich) {
  FakeNode node;
  GpuCpus missing = CpusNearGpu(node.Env(), CpuBind::kGpu, "0000:ff:00.0");
  EXPECT_TRUE(missing.cpus.empty());
  EXPECT_EQ(missing.problem, "cannot read /sys/bus/pci/devices/0000:ff:00.0/local_cpulist");
  node.Gpu("0000:5e:00.0", "garbage", "x");
  EXPECT_THAT(CpusNearGpu(node.Env(), CpuBind::kGpu, "0000:5e:00.0").problem,
              HasSubstr("'garbage', not a CPU list"));
  EXPECT_THAT(CpusNearGpu(node.Env(), CpuBind::kNuma, "0000:5e:00.0").problem,
              HasSubstr("'x', not a NUMA node"));
  node.Gpu("0000:5f:00.0", "", "3");  // node3 does not exist
  EXPECT_EQ(CpusNearGpu(node.Env(), CpuBind::kGpu, "0000:5f:00.0").problem,
            "/sys/bus/pci/devices/0000:5f:00.0/local_cpulist lists no CPU");
  EXPECT_EQ(CpusNearGpu(node.Env(), CpuBind::kNuma, "0000:5f:00.0").problem,
            "cannot read /sys/devices/system/node/node3/cpulist");
}

TEST(ComputeCpuBinding, EachWorkerGetsItsGpusCpus) {
  FakeNode node;
  CpuBinding b = ComputeCpuBinding(node.Env(), CpuBind::kGpu,
                                   {{Gpu("0", "0000:1b:00.0")}, {Gpu("1", "0000:9c:00.0")}}, {0, 1});
  EXPECT_TRUE(b.warnings.empty());
  EXPECT_THAT(b.worker_cpus, ElementsAre(*ParseCpuList("0-15"), *ParseCpuList("16-23")));
  // Two GPUs per worker: the union.
  b = ComputeCpuBinding(node.Env(), CpuBind::kGpu, {{Gpu("0", "0000:1b:00.0"), Gpu("1", "0000:9c:00.0")}},
                        {0});
  EXPECT_THAT(b.worker_cpus, ElementsAre(*ParseCpuList("0-23")));
  b = ComputeCpuBinding(node.Env(), CpuBind::kNuma, {{Gpu("1", "0000:9c:00.0")}}, {0});
  EXPECT_THAT(b.worker_cpus, ElementsAre(*ParseCpuList("16-31")));
}

TEST(ComputeCpuBinding, NoneBindsNothing) {
  FakeNode node;
  CpuBinding b = ComputeCpuBinding(node.Env(), CpuBind::kNone, {{Gpu("0", "0000:1b:00.0")}}, {0});
  EXPECT_THAT(b.worker_cpus, ElementsAre(Cpus()));
  EXPECT_TRUE(b.warnings.empty());
}

TEST(ComputeCpuBinding, IntersectedWithTheAllowedCpus) {
  FakeNode node;
  node.Status("8-19");  // a Slurm cgroup across both sockets
  CpuBinding b = ComputeCpuBinding(node.Env(), CpuBind::kGpu,
                                   {{Gpu("0", "0000:1b:00.0")}, {Gpu("1", "0000:9c:00.0")}}, {0, 1});
  EXPECT_TRUE(b.warnings.empty());
  EXPECT_THAT(b.worker_cpus, ElementsAre(*ParseCpuList("8-15"), *ParseCpuList("16-19")));
}

TEST(ComputeCpuBinding, EmptyIntersectionFallsBackToTheAllowedSetWithAWarning) {
  FakeNode node;
  node.Status("24-27");
  CpuBinding b = ComputeCpuBinding(node.Env(), CpuBind::kGpu, {{Gpu("0", "0000:1b:00.0")}}, {3});
  EXPECT_THAT(b.worker_cpus, ElementsAre(*ParseCpuList("24-27")));
  ASSERT_EQ(b.warnings.size(), 1u);
  EXPECT_EQ(
      b.warnings[0],
      "--cpu-bind=gpu: the CPUs near GPU 0000:1b:00.0 (0-15) are all outside the CPUs distrun may use "
      "(24-27, narrowed by taskset or a Slurm cgroup): local rank 3 is pinned to those instead; ask the "
      "scheduler for CPUs near the GPUs");
}

TEST(ComputeCpuBinding, WorkersWithoutGpuInformationAreNotPinned) {
  FakeNode node;
  ResolvedDevice unknown{"MIG-c2b5f6e1", std::nullopt,
                         "a MIG device; only the CUDA driver knows which GPU it is on"};
  ResolvedDevice no_pci{"2", GpuInfo{}, {}};
  CpuBinding b = ComputeCpuBinding(
      node.Env(), CpuBind::kGpu,
      {{Gpu("0", "0000:1b:00.0")}, {unknown}, {no_pci}, {Gpu("3", "0000:ee:00.0")}, {}}, {0, 1, 2, 3, 4});
  EXPECT_THAT(b.worker_cpus, ElementsAre(*ParseCpuList("0-15"), Cpus(), Cpus(), Cpus(), Cpus()));
  EXPECT_THAT(
      b.warnings,
      ElementsAre(
          "--cpu-bind=gpu: local rank 1 is not pinned: device 'MIG-c2b5f6e1' a MIG device; only "
          "the CUDA driver knows which GPU it is on",
          "--cpu-bind=gpu: local rank 2 is not pinned: the PCI bus id of device '2' is not known here",
          "--cpu-bind=gpu: local rank 3 is not pinned: GPU 0000:ee:00.0: cannot read "
          "/sys/bus/pci/devices/0000:ee:00.0/local_cpulist",
          "--cpu-bind=gpu: local rank 4 is not pinned: it has no GPU"));
}

TEST(ComputeCpuBinding, WithoutAnAffinityMaskTheGpusCpusAreUsedAsTheyAre) {
  FakeNode node;
  std::filesystem::remove(node.root.path() / "proc/self/status");
  CpuBinding b = ComputeCpuBinding(node.Env(), CpuBind::kGpu, {{Gpu("1", "0000:9c:00.0")}}, {0});
  EXPECT_THAT(b.worker_cpus, ElementsAre(*ParseCpuList("16-23")));
}

// ---- the child's side ----

// Everything a child writes on stdout until it exits.
std::string Output(Child& child) {
  ::fcntl(child.stdout_pipe().get(), F_SETFL, ::fcntl(child.stdout_pipe().get(), F_GETFL) & ~O_NONBLOCK);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(child.stdout_pipe().get(), buf, sizeof buf)) > 0)
    out.append(buf, static_cast<size_t>(n));
  child.Wait();
  return out;
}

TEST(CpuMask, ASpawnedWorkerRunsOnItsCpus) {
  std::optional<Cpus> allowed = AllowedCpus(testing::MakeEnv({}));
  ASSERT_TRUE(allowed.has_value());
  ASSERT_FALSE(allowed->empty());
  // The last CPU alone: narrower than distrun's own set wherever there is more than one CPU.
  SpawnSpec spec;
  spec.argv = {"/bin/grep", "Cpus_allowed_list", "/proc/self/status"};
  spec.env = {"PATH=/usr/bin:/bin"};
  spec.cpus = {allowed->back()};
  Child child = Child::Start(spec);
  EXPECT_EQ(Output(child), "Cpus_allowed_list:\t" + std::to_string(allowed->back()) + "\n");
  EXPECT_EQ(child.wait_status(), 0);

  // Without a list the worker keeps distrun's CPUs.
  spec.cpus.clear();
  Child inherits = Child::Start(spec);
  EXPECT_EQ(Output(inherits), "Cpus_allowed_list:\t" + FormatCpuList(*allowed) + "\n");
}

TEST(CpuMask, ACpuThatCannotBeUsedIsASpawnError) {
  std::optional<Cpus> allowed = AllowedCpus(testing::MakeEnv({}));
  ASSERT_TRUE(allowed.has_value());
  SpawnSpec spec;
  spec.argv = {"/bin/true"};
  spec.env = {"PATH=/usr/bin:/bin"};
  spec.cpus = {allowed->back() + 4096};  // beyond every CPU this process may use
  try {
    Child::Start(spec);
    FAIL() << "a worker pinned to no usable CPU started";
  } catch (const SpawnError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot pin a worker to CPUs " + std::to_string(allowed->back() + 4096)));
    EXPECT_THAT(e.what(), HasSubstr("--cpu-bind none"));
    EXPECT_EQ(e.kind(), SpawnError::Kind::kSystem);
  }
}

}  // namespace
}  // namespace distrun
