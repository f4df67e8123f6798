#include "detect/devices.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "detect/cuda_driver.h"
#include "detect/errors.h"
#include "test_support.h"

namespace distrun {
namespace {

namespace fs = std::filesystem;
using distrun::testing::LoadFixtureEnv;
using distrun::testing::MakeEnv;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Tokens = std::vector<std::string>;

const char kUuid[] = "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6";
const char kMigUuid[] = "MIG-c2b5f6e1-1d4a-5a5e-9f0a-4cbe1e8e3a21";
const char kLegacyMig[] = "MIG-GPU-8932f937-d72c-4106-c12f-20bd9faed9f6/1/2";

// The UsageError message of `fn`, or "" when it did not throw one.
template <typename Fn>
std::string ErrorOf(Fn fn) {
  try {
    fn();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

std::string VisibleError(const std::string& value) {
  return ErrorOf([&] { ParseVisibleDevices("CUDA_VISIBLE_DEVICES", value); });
}

// ---- tokens ----

TEST(DeviceTokens, AllForms) {
  EXPECT_THAT(ParseVisibleDevices("CUDA_VISIBLE_DEVICES", "0").tokens, ElementsAre("0"));
  EXPECT_THAT(ParseVisibleDevices("CUDA_VISIBLE_DEVICES", "3,1,10").tokens, ElementsAre("3", "1", "10"));
  EXPECT_THAT(ParseVisibleDevices("CUDA_VISIBLE_DEVICES", kUuid).tokens, ElementsAre(kUuid));
  EXPECT_THAT(ParseVisibleDevices("CUDA_VISIBLE_DEVICES", kMigUuid).tokens, ElementsAre(kMigUuid));
  EXPECT_THAT(ParseVisibleDevices("CUDA_VISIBLE_DEVICES", kLegacyMig).tokens, ElementsAre(kLegacyMig));
  // Abbreviated UUIDs are accepted by CUDA; upper case too; mixed lists are kept in order.
  EXPECT_THAT(ParseVisibleDevices("CUDA_VISIBLE_DEVICES", "GPU-8932f9,GPU-ABCDEF,1").tokens,
              ElementsAre("GPU-8932f9", "GPU-ABCDEF", "1"));
  // Tokens are kept as given: "007" stays "007".
  EXPECT_THAT(ParseVisibleDevices("CUDA_VISIBLE_DEVICES", "007").tokens, ElementsAre("007"));
}

TEST(DeviceTokens, BlanksAroundEntriesAreDropped) {
  // CUDA reads "0, 1" as 0,1 (strtoul skips blanks), and so do PyTorch and JAX.
  EXPECT_THAT(ParseVisibleDevices("CUDA_VISIBLE_DEVICES", "0, 1").tokens, ElementsAre("0", "1"));
  EXPECT_THAT(ParseVisibleDevices("CUDA_VISIBLE_DEVICES", " 2 ,\t3 ").tokens, ElementsAre("2", "3"));
}

TEST(DeviceTokens, EmptyValueMeansNoGpu) {
  VisibleDevices none = ParseVisibleDevices("CUDA_VISIBLE_DEVICES", "");
  EXPECT_TRUE(none.tokens.empty());
  EXPECT_TRUE(none.ignored.empty());
  EXPECT_EQ(none.variable, "CUDA_VISIBLE_DEVICES");
}

TEST(DeviceTokens, NegativeIndexEndsTheListAsInCuda) {
  VisibleDevices v = ParseVisibleDevices("CUDA_VISIBLE_DEVICES", "0,1,-1,2");
  EXPECT_THAT(v.tokens, ElementsAre("0", "1"));
  EXPECT_THAT(v.ignored, ElementsAre("2"));
  // The documented example: 0,2 visible, 1 not.
  v = ParseVisibleDevices("CUDA_VISIBLE_DEVICES", "0,2,-1,1");
  EXPECT_THAT(v.tokens, ElementsAre("0", "2"));
  EXPECT_THAT(v.ignored, ElementsAre("1"));
  // "-1" alone hides every GPU; nothing after it is checked, as CUDA does not read it.
  v = ParseVisibleDevices("CUDA_VISIBLE_DEVICES", "-1");
  EXPECT_TRUE(v.tokens.empty());
  EXPECT_TRUE(v.ignored.empty());
  v = ParseVisibleDevices("CUDA_VISIBLE_DEVICES", "-1,garbage,,x");
  EXPECT_TRUE(v.tokens.empty());
  EXPECT_THAT(v.ignored, ElementsAre("garbage", "x"));
}

TEST(DeviceTokens, MalformedListsAreErrors) {
  for (const char* bad : {"0,,1",
                          "0,1,",
                          ",0",
                          " ",
                          "1gpu2",
                          "0-3",
                          "abc",
                          "gpu-8932f9",
                          "GPU-",
                          "GPU-xyz",
                          "MIG-",
                          "MIG-GPU-8932f937/1",
                          "MIG-GPU-8932f937/a/2",
                          "\"0,1\"",
                          "0;1",
                          "0 1",
                          "1234567890",
                          "+1",
                          "0,0",
                          "1,01",
                          "GPU-ab,GPU-ab"}) {
    EXPECT_NE(VisibleError(bad), "") << bad;
  }
}

TEST(DeviceTokens, MessagesNameVariableValueProblemAndFix) {
  std::string empty = VisibleError("0,,1");
  EXPECT_THAT(empty, HasSubstr("CUDA_VISIBLE_DEVICES='0,,1'"));
  EXPECT_THAT(empty, HasSubstr("entry 2 is empty"));
  EXPECT_THAT(empty, HasSubstr("CUDA_VISIBLE_DEVICES='0,1'"));  // the fix

  std::string range = VisibleError("0-3");
  EXPECT_THAT(range, HasSubstr("'0-3'"));
  EXPECT_THAT(range, HasSubstr("ranges are not supported"));
  EXPECT_THAT(range, HasSubstr("0,1,2,3"));

  std::string junk = VisibleError("0,1gpu2");
  EXPECT_THAT(junk, HasSubstr("entry 2 '1gpu2' is not a device index"));
  EXPECT_THAT(junk, HasSubstr("nvidia-smi -L"));

  std::string twice = VisibleError("1,01");
  EXPECT_THAT(twice, HasSubstr("twice"));
  EXPECT_THAT(twice, HasSubstr("list each device once"));

  EXPECT_THAT(VisibleError("0 1"), HasSubstr("separate entries with commas"));

  std::string blank = VisibleError(" ");
  EXPECT_THAT(blank, HasSubstr("set it to '' for no GPU"));

  for (const std::string& message : {empty, range, junk, twice, blank}) {
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(DeviceTokens, ReadVisibleDevicesOrder) {
  EXPECT_FALSE(ReadVisibleDevices(MakeEnv({})).has_value());

  auto cuda = ReadVisibleDevices(
      MakeEnv({{"CUDA_VISIBLE_DEVICES", "1"}, {"HIP_VISIBLE_DEVICES", "2"}, {"ROCR_VISIBLE_DEVICES", "3"}}));
  ASSERT_TRUE(cuda.has_value());
  EXPECT_EQ(cuda->variable, "CUDA_VISIBLE_DEVICES");
  EXPECT_THAT(cuda->tokens, ElementsAre("1"));

  auto hip = ReadVisibleDevices(MakeEnv({{"HIP_VISIBLE_DEVICES", "0"}, {"ROCR_VISIBLE_DEVICES", "2,3"}}));
  ASSERT_TRUE(hip.has_value());
  EXPECT_EQ(hip->variable, "HIP_VISIBLE_DEVICES");
  EXPECT_THAT(hip->tokens, ElementsAre("0"));

  auto rocr = ReadVisibleDevices(MakeEnv({{"ROCR_VISIBLE_DEVICES", "GPU-4b2c1a6f21dc3ae2,1"}}));
  ASSERT_TRUE(rocr.has_value());
  EXPECT_EQ(rocr->variable, "ROCR_VISIBLE_DEVICES");
  EXPECT_THAT(rocr->tokens, ElementsAre("GPU-4b2c1a6f21dc3ae2", "1"));

  // An empty CUDA_VISIBLE_DEVICES hides every GPU and still wins over the others.
  auto none = ReadVisibleDevices(MakeEnv({{"CUDA_VISIBLE_DEVICES", ""}, {"ROCR_VISIBLE_DEVICES", "0"}}));
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->tokens.empty());

  std::string error = ErrorOf([] { ReadVisibleDevices(MakeEnv({{"ROCR_VISIBLE_DEVICES", "0,,1"}})); });
  EXPECT_THAT(error, HasSubstr("ROCR_VISIBLE_DEVICES='0,,1'"));
}

TEST(DeviceTokens, SlurmGpuTaskFixture) {
  Environment env = LoadFixtureEnv("slurm-single/srun-gpu-task-env.txt");
  auto visible = ReadVisibleDevices(env);
  ASSERT_TRUE(visible.has_value());
  EXPECT_EQ(visible->variable, "CUDA_VISIBLE_DEVICES");
  EXPECT_THAT(visible->tokens, ElementsAre("0"));
  LocalDevices local = FindLocalDevices(env);
  EXPECT_THAT(local.tokens, ElementsAre("0"));
  EXPECT_EQ(local.source, "CUDA_VISIBLE_DEVICES");
}

TEST(DeviceTokens, SlurmPerTaskBindingFixture) {
  // srun -n2 --gpus-per-task=1: each task gets its own CUDA_VISIBLE_DEVICES.
  std::ifstream in(distrun::testing::FixturePath("slurm-single/srun-gpus.txt"));
  ASSERT_TRUE(in);
  std::string line;
  Tokens per_task;
  while (std::getline(in, line)) {
    size_t start = line.find("CUDA_VISIBLE_DEVICES=");
    ASSERT_NE(start, std::string::npos) << line;
    start += std::string("CUDA_VISIBLE_DEVICES=").size();
    std::string value = line.substr(start, line.find(' ', start) - start);
    Environment env = MakeEnv({{"CUDA_VISIBLE_DEVICES", value}});
    Tokens tokens = LocalDeviceTokens(env);
    ASSERT_EQ(tokens.size(), 1u) << line;
    per_task.push_back(tokens[0]);
  }
  EXPECT_THAT(per_task, ElementsAre("0", "1"));
}

TEST(DeviceTokens, ListsDistrunIsGiven) {
  EXPECT_THAT(ParseDeviceTokens("--local-device-ids", "0,1"), ElementsAre("0", "1"));
  EXPECT_THAT(ParseDeviceTokens("--local-device-ids", std::string(kUuid) + "," + kMigUuid),
              ElementsAre(kUuid, kMigUuid));
  Environment env = LoadFixtureEnv("slurm-single/srun-gpu-task-env.txt");
  EXPECT_THAT(ParseDeviceTokens("SLURM_STEP_GPUS", *env.Get("SLURM_STEP_GPUS")), ElementsAre("0"));
  for (const char* bad : {"", "0,,1", "-1", "0,-1", "0,0", "gpu0"}) {
    EXPECT_NE(ErrorOf([&] { ParseDeviceTokens("--local-device-ids", bad); }), "") << bad;
  }
  EXPECT_THAT(ErrorOf([] { ParseDeviceTokens("--local-device-ids", "0,-1"); }),
              HasSubstr("--local-device-ids='0,-1': entry 2 '-1' is negative"));
  EXPECT_THAT(ErrorOf([] { ParseDeviceTokens("--local-device-ids", ""); }), HasSubstr("lists no device"));
  // Messages about lists distrun is given do not speak for CUDA.
  EXPECT_EQ(ErrorOf([] { ParseDeviceTokens("SLURM_STEP_GPUS", "0,,1"); }),
            "SLURM_STEP_GPUS='0,,1': entry 2 is empty; remove the extra comma: SLURM_STEP_GPUS='0,1'");
}

// ---- fake file-system trees ----

class TempRoot {
 public:
  TempRoot() {
    std::string pattern = (fs::temp_directory_path() / "distrun-devices-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    root_ = pattern;
  }
  ~TempRoot() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  TempRoot(const TempRoot&) = delete;
  TempRoot& operator=(const TempRoot&) = delete;

  const fs::path& path() const { return root_; }

  void Write(const std::string& relative, const std::string& text) const {
    fs::path file = root_ / relative;
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text;
  }
  // A character device: a real one (mknod, as root) or a link to /dev/null (which is one too).
  void CharDevice(const std::string& relative, unsigned major, unsigned minor) const {
    fs::path file = root_ / relative;
    fs::create_directories(file.parent_path());
    if (mknod(file.c_str(), S_IFCHR | 0600, makedev(major, minor)) != 0)
      fs::create_symlink("/dev/null", file);
  }
  Environment Env() const {
    Environment env = MakeEnv({});
    env.root = root_;
    return env;
  }

 private:
  fs::path root_;
};

std::string Information(const std::string& model, const std::string& uuid, const std::string& bus) {
  return "Model: \t\t " + model + "\nIRQ:   \t\t 143\nGPU UUID: \t " + uuid +
         "\nVideo BIOS: \t 96.00.74.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t "
         "0xfffffffffffff\nBus Location: \t " +
         bus + "\nDevice Minor: \t 0\nGPU Excluded:\t No\n";
}

TEST(GpuDiscovery, NothingGivesNone) {
  TempRoot root;
  DiscoveredGpus found = DiscoverGpus(root.Env());
  EXPECT_EQ(found.source, "none");
  EXPECT_TRUE(found.gpus.empty());
  LocalDevices local = FindLocalDevices(root.Env());
  EXPECT_TRUE(local.tokens.empty());
  EXPECT_EQ(local.source, "none");
}

TEST(GpuDiscovery, ProcfsInPciOrder) {
  TempRoot root;
  // Created out of order; the 8-digit domain and upper case come from other tools' habits.
  root.Write(
      "proc/driver/nvidia/gpus/0000:bb:00.0/information",
      Information("NVIDIA H100 80GB HBM3", "GPU-bbbbbbbb-0000-0000-0000-000000000000", "0000:bb:00.0"));
  root.Write(
      "proc/driver/nvidia/gpus/0000:1a:00.0/information",
      Information("NVIDIA H100 80GB HBM3", "GPU-1a1a1a1a-0000-0000-0000-000000000000", "00000000:1A:00.0"));
  root.Write("proc/driver/nvidia/gpus/0000:3c:00.0/information",
             Information("NVIDIA H100 80GB HBM3",
                         "GPU-" + std::string(8, '?') + "-" + std::string(4, '?') + "-0000-0000-000000000000",
                         "0000:3c:00.0"));
  // Excluded GPUs (NVreg_ExcludedGpus) are not usable by CUDA.
  std::string excluded =
      Information("NVIDIA A10", "GPU-eeeeeeee-0000-0000-0000-000000000000", "0000:0e:00.0");
  excluded.replace(excluded.find("GPU Excluded:\t No"), std::string("GPU Excluded:\t No").size(),
                   "GPU Excluded:\t Yes");
  root.Write("proc/driver/nvidia/gpus/0000:0e:00.0/information", excluded);
  // devfs is not consulted when procfs answers.
  root.CharDevice("dev/nvidia0", 195, 0);

  DiscoveredGpus found = DiscoverGpus(root.Env());
  EXPECT_EQ(found.source, "procfs");
  ASSERT_EQ(found.gpus.size(), 3u);
  EXPECT_EQ(found.gpus[0].pci_bus_id, "0000:1a:00.0");
  EXPECT_EQ(found.gpus[0].uuid, "GPU-1a1a1a1a-0000-0000-0000-000000000000");
  EXPECT_EQ(found.gpus[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(found.gpus[1].pci_bus_id, "0000:3c:00.0");
  EXPECT_EQ(found.gpus[1].uuid, "");  // unreadable UUID left empty
  EXPECT_EQ(found.gpus[2].pci_bus_id, "0000:bb:00.0");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(found.gpus[static_cast<size_t>(i)].ordinal, i);

  EXPECT_THAT(LocalDeviceTokens(root.Env()), ElementsAre("0", "1", "2"));
}

TEST(GpuDiscovery, ProcfsWithoutInformationFileUsesDirectoryName) {
  TempRoot root;
  fs::create_directories(root.path() / "proc/driver/nvidia/gpus/0000:65:00.0");
  DiscoveredGpus found = DiscoverGpus(root.Env());
  EXPECT_EQ(found.source, "procfs");
  ASSERT_EQ(found.gpus.size(), 1u);
  EXPECT_EQ(found.gpus[0].pci_bus_id, "0000:65:00.0");
}

TEST(GpuDiscovery, DevfsCountsCharacterDevicesInMinorOrder) {
  TempRoot root;
  for (unsigned minor : {10u, 2u, 0u, 1u}) root.CharDevice("dev/nvidia" + std::to_string(minor), 195, minor);
  // Not GPUs: the control, UVM and capability nodes, and a plain file with a GPU's name.
  root.CharDevice("dev/nvidiactl", 195, 255);
  root.CharDevice("dev/nvidia-uvm", 510, 0);
  root.CharDevice("dev/nvidia-caps/nvidia-cap1", 511, 1);
  root.Write("dev/nvidia7", "not a device");
  DiscoveredGpus found = DiscoverGpus(root.Env());
  EXPECT_EQ(found.source, "devfs");
  ASSERT_EQ(found.gpus.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(found.gpus[static_cast<size_t>(i)].ordinal, i);
  EXPECT_THAT(LocalDeviceTokens(root.Env()), ElementsAre("0", "1", "2", "3"));
}

TEST(GpuDiscovery, DevfsAcceptsLinksToDevNull) {
  TempRoot root;
  fs::create_directories(root.path() / "dev");
  fs::create_symlink("/dev/null", root.path() / "dev/nvidia0");
  fs::create_symlink("/dev/null", root.path() / "dev/nvidia1");
  fs::create_symlink(root.path() / "missing", root.path() / "dev/nvidia2");  // dangling: not a device
  DiscoveredGpus found = DiscoverGpus(root.Env());
  EXPECT_EQ(found.source, "devfs");
  EXPECT_EQ(found.gpus.size(), 2u);
}

TEST(GpuDiscovery, DevfsRealCharacterDevices) {
  TempRoot root;
  fs::create_directories(root.path() / "dev");
  std::string node = (root.path() / "dev/nvidia0").string();
  if (mknod(node.c_str(), S_IFCHR | 0600, makedev(195, 0)) != 0) GTEST_SKIP() << "mknod needs root";
  struct stat st {};
  ASSERT_EQ(lstat(node.c_str(), &st), 0);
  ASSERT_TRUE(S_ISCHR(st.st_mode));
  DiscoveredGpus found = DiscoverGpus(root.Env());
  EXPECT_EQ(found.source, "devfs");
  EXPECT_EQ(found.gpus.size(), 1u);
}

TEST(GpuDiscovery, KfdCountsAmdGpuNodes) {
  TempRoot root;
  root.CharDevice("dev/kfd", 235, 0);
  const std::string nodes = "sys/class/kfd/kfd/topology/nodes/";
  root.Write(nodes + "0/properties", "cpu_cores_count 64\nsimd_count 0\nlocation_id 0\ndomain 0\n");
  root.Write(
      nodes + "1/properties",
      "cpu_cores_count 0\nsimd_count 440\nlocation_id 49408\ndomain 0\nunique_id 5477193413580086050\n");
  root.Write(nodes + "1/name", "gfx90a\n");
  root.Write(nodes + "2/properties", "cpu_cores_count 0\nsimd_count 440\nlocation_id 768\ndomain 1\n");
  DiscoveredGpus found = DiscoverGpus(root.Env());
  EXPECT_EQ(found.source, "kfd");
  ASSERT_EQ(found.gpus.size(), 2u);
  EXPECT_EQ(found.gpus[0].name, "gfx90a");
  EXPECT_EQ(found.gpus[0].pci_bus_id, "0000:c1:00.0");  // 49408 = 0xc100
  EXPECT_EQ(found.gpus[0].uuid, "GPU-4c02e663e68cdb22");
  EXPECT_EQ(found.gpus[1].pci_bus_id, "0001:03:00.0");
  EXPECT_EQ(found.gpus[1].ordinal, 1);
}

TEST(GpuDiscovery, KfdNeedsDevKfd) {
  TempRoot root;
  root.Write("sys/class/kfd/kfd/topology/nodes/1/properties", "simd_count 440\n");
  EXPECT_EQ(DiscoverGpus(root.Env()).source, "none");
}

TEST(GpuDiscovery, DriverQueryComesFirst) {
  TempRoot root;
  root.CharDevice("dev/nvidia0", 195, 0);
  Environment env = root.Env();
  env.cuda_query = [] {
    return std::optional<std::vector<GpuInfo>>(
        std::vector<GpuInfo>{{0, "GPU-a", "0000:b0:00.0", "B"}, {1, "GPU-b", "0000:a0:00.0", "A"}});
  };
  DiscoveredGpus found = DiscoverGpus(env);
  EXPECT_EQ(found.source, "cuda-driver");
  ASSERT_EQ(found.gpus.size(), 2u);
  EXPECT_EQ(found.gpus[0].uuid, "GPU-a");  // the driver's order is kept, not re-sorted

  // A driver that answers "no GPU" is believed; one that cannot answer falls back.
  env.cuda_query = [] { return std::optional<std::vector<GpuInfo>>(std::vector<GpuInfo>{}); };
  found = DiscoverGpus(env);
  EXPECT_EQ(found.source, "cuda-driver");
  EXPECT_TRUE(found.gpus.empty());
  env.cuda_query = [] { return std::optional<std::vector<GpuInfo>>(); };
  found = DiscoverGpus(env);
  EXPECT_EQ(found.source, "devfs");
  EXPECT_EQ(found.gpus.size(), 1u);
}

TEST(DeviceLocal, VariableWinsAndSkipsDiscovery) {
  TempRoot root;
  root.CharDevice("dev/nvidia0", 195, 0);
  root.CharDevice("dev/nvidia1", 195, 1);
  Environment env = root.Env();
  bool queried = false;
  env.cuda_query = [&queried] {
    queried = true;
    return std::optional<std::vector<GpuInfo>>();
  };
  env.vars["CUDA_VISIBLE_DEVICES"] = std::string(kUuid) + ",-1,3";
  LocalDevices local = FindLocalDevices(env);
  EXPECT_THAT(local.tokens, ElementsAre(kUuid));
  EXPECT_EQ(local.source, "CUDA_VISIBLE_DEVICES");
  EXPECT_THAT(local.ignored, ElementsAre("3"));
  EXPECT_FALSE(queried);

  env.vars["CUDA_VISIBLE_DEVICES"] = "";
  EXPECT_TRUE(LocalDeviceTokens(env).empty());

  env.vars.erase("CUDA_VISIBLE_DEVICES");
  EXPECT_THAT(LocalDeviceTokens(env), ElementsAre("0", "1"));
  EXPECT_TRUE(queried);
}

// ---- TPU chips ----

TEST(DeviceTpuChips, AccelDevices) {
  TempRoot root;
  for (unsigned i = 0; i < 4; ++i) root.CharDevice("dev/accel" + std::to_string(i), 121, i);
  root.CharDevice("dev/accel/accel0", 261, 0);  // the kernel's accel class (Intel NPU): not a TPU
  root.CharDevice("dev/vfio/0", 243, 0);        // not consulted when accel devices exist
  EXPECT_EQ(CountTpuChips(root.Env()), 4);
}

TEST(DeviceTpuChips, VfioGroups) {
  TempRoot root;
  for (const char* group : {"0", "1", "2", "3", "4"})
    root.CharDevice(std::string("dev/vfio/") + group, 243, 0);
  root.CharDevice("dev/vfio/vfio", 10, 196);  // the container node, not a group
  // Groups 0-3 hold TPU chips (Google, 0x1ae0); group 4 a passed-through NIC; no sysfs for the others.
  for (const char* group : {"0", "1", "2", "3"}) {
    root.Write(std::string("sys/kernel/iommu_groups/") + group + "/devices/0000:0" + group + ":04.0/vendor",
               "0x1ae0\n");
  }
  root.Write("sys/kernel/iommu_groups/4/devices/0000:05:00.0/vendor", "0x15b3\n");
  EXPECT_EQ(CountTpuChips(root.Env()), 4);
}

TEST(DeviceTpuChips, VfioWithoutSysfsCounts) {
  TempRoot root;
  root.CharDevice("dev/vfio/0", 243, 0);
  root.CharDevice("dev/vfio/1", 243, 1);
  EXPECT_EQ(CountTpuChips(root.Env()), 2);
}

TEST(DeviceTpuChips, NoneOnThisKindOfTree) {
  TempRoot root;
  root.CharDevice("dev/nvidia0", 195, 0);
  EXPECT_EQ(CountTpuChips(root.Env()), 0);
}

// ---- PCI ids and UUIDs ----

TEST(GpuPciBusId, Normalizes) {
  EXPECT_EQ(NormalizePciBusId("0000:3B:00.0"), "0000:3b:00.0");
  EXPECT_EQ(NormalizePciBusId("00000000:3B:00.0"), "0000:3b:00.0");
  EXPECT_EQ(NormalizePciBusId("0000:3b:00.0"), "0000:3b:00.0");
  EXPECT_EQ(NormalizePciBusId(" 0:3:1.2 "), "0000:03:01.2");
  EXPECT_EQ(NormalizePciBusId("10000:01:00.0"), "10000:01:00.0");  // VMD domains are wider
  EXPECT_EQ(NormalizePciBusId("Not-A-Bus"), "not-a-bus");
}

TEST(GpuUuid, FormatsLikeNvidiaSmi) {
  std::array<unsigned char, 16> bytes = {0x89, 0x32, 0xf9, 0x37, 0xd7, 0x2c, 0x41, 0x06,
                                         0xc1, 0x2f, 0x20, 0xbd, 0x9f, 0xae, 0xd9, 0xf6};
  EXPECT_EQ(FormatGpuUuid(bytes), kUuid);
}

// ---- the CUDA driver ----

// Sets a variable that the fake driver reads, and restores it.
class ScopedVar {
 public:
  ScopedVar(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedVar() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedVar(const ScopedVar&) = delete;
  ScopedVar& operator=(const ScopedVar&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(CudaDriver, RealDriverOnThisMachine) {
  // Other tests load fake drivers by path; they have no soname, so this still looks for the real one.
  std::optional<std::vector<GpuInfo>> gpus = QueryCudaDriver();
  if (!fs::exists("/proc/driver/nvidia/version")) {
    EXPECT_FALSE(gpus.has_value()) << "no NVIDIA driver here, yet libcuda.so.1 answered";
  } else if (gpus) {
    for (size_t i = 0; i < gpus->size(); ++i) {
      EXPECT_EQ((*gpus)[i].ordinal, static_cast<int>(i));
      EXPECT_THAT((*gpus)[i].uuid, ::testing::StartsWith("GPU-"));
    }
  }
}

TEST(CudaDriver, MissingLibraryGivesNullopt) {
  EXPECT_FALSE(QueryCudaDriverLibrary("/nonexistent/libcuda.so.1").has_value());
  EXPECT_FALSE(QueryCudaDriverLibrary("libdistrun-no-such-driver.so.1").has_value());
  // A library that loads but is not a driver.
  EXPECT_FALSE(QueryCudaDriverLibrary("libm.so.6").has_value());
}

TEST(CudaDriver, FakeDriverListsGpus) {
  ScopedVar devices("FAKE_CUDA_DEVICES", "2");
  auto gpus = QueryCudaDriverLibrary(DISTRUN_FAKE_CUDA_LIBRARY);
  ASSERT_TRUE(gpus.has_value());
  ASSERT_EQ(gpus->size(), 2u);
  EXPECT_EQ((*gpus)[0].ordinal, 0);
  EXPECT_EQ((*gpus)[0].name, "Fake GPU 0");
  EXPECT_EQ((*gpus)[0].pci_bus_id, "0000:a0:00.0");
  EXPECT_EQ((*gpus)[0].uuid, "GPU-10010203-0405-0607-0809-0a0b0c0d0e0f");
  EXPECT_EQ((*gpus)[1].ordinal, 1);
  EXPECT_EQ((*gpus)[1].pci_bus_id, "0000:a1:00.0");
  EXPECT_EQ((*gpus)[1].uuid, "GPU-20010203-0405-0607-0809-0a0b0c0d0e0f");
}

TEST(CudaDriver, FallsBackToCuDeviceGetUuid) {
  ScopedVar devices("FAKE_CUDA_DEVICES", "1");
  auto gpus = QueryCudaDriverLibrary(DISTRUN_FAKE_CUDA_NO_UUID_V2_LIBRARY);
  ASSERT_TRUE(gpus.has_value());
  ASSERT_EQ(gpus->size(), 1u);
  EXPECT_EQ((*gpus)[0].uuid, "GPU-aa010203-0405-0607-0809-0a0b0c0d0e0f");
}

TEST(CudaDriver, NoDeviceIsAnEmptyList) {
  ScopedVar devices("FAKE_CUDA_DEVICES", "0");  // cuInit: CUDA_ERROR_NO_DEVICE
  auto gpus = QueryCudaDriverLibrary(DISTRUN_FAKE_CUDA_LIBRARY);
  ASSERT_TRUE(gpus.has_value());
  EXPECT_TRUE(gpus->empty());
}

TEST(CudaDriver, OtherInitErrorsGiveNullopt) {
  ScopedVar devices("FAKE_CUDA_DEVICES", "2");
  for (const char* error : {"35" /* insufficient driver */, "999" /* unknown */, "804" /* compat */}) {
    ScopedVar init("FAKE_CUDA_INIT_ERROR", error);
    EXPECT_FALSE(QueryCudaDriverLibrary(DISTRUN_FAKE_CUDA_LIBRARY).has_value()) << error;
  }
  ScopedVar count("FAKE_CUDA_COUNT_ERROR", "3");
  EXPECT_FALSE(QueryCudaDriverLibrary(DISTRUN_FAKE_CUDA_LIBRARY).has_value());
}

TEST(CudaDriver, FakeDriverThroughDiscovery) {
  ScopedVar devices("FAKE_CUDA_DEVICES", "3");
  TempRoot root;
  Environment env = root.Env();
  env.cuda_query = [] { return QueryCudaDriverLibrary(DISTRUN_FAKE_CUDA_LIBRARY); };
  DiscoveredGpus found = DiscoverGpus(env);
  EXPECT_EQ(found.source, "cuda-driver");
  EXPECT_EQ(found.gpus.size(), 3u);
  EXPECT_THAT(LocalDeviceTokens(env), ElementsAre("0", "1", "2"));
}

TEST(CudaDriverAbsence, NoSignOfAnNvidiaDriverIsAReasonNotToAsk) {
  TempRoot root;
  root.Write("sys/bus/pci/devices/0000:00:01.0/vendor", "0x8086\n");  // Intel
  root.Write("sys/bus/pci/devices/0000:00:02.0/vendor", "0x1ae0\n");  // Google
  Environment env = root.Env();
  EXPECT_THAT(CudaDriverAbsence(env), HasSubstr("no NVIDIA kernel module, device node or PCI device"));
  env.vars["LD_LIBRARY_PATH"] = "";  // set but empty leads the loader nowhere
  EXPECT_NE(CudaDriverAbsence(env), "");
}

TEST(CudaDriverAbsence, AnySignOfAnNvidiaDriverAsksIt) {
  for (const char* sign :
       {"proc/driver/nvidia/version", "dev/nvidiactl", "dev/dxg", "dev/nvmap", "dev/nvhost-ctrl-gpu"}) {
    TempRoot root;
    root.Write(sign, "");
    EXPECT_EQ(CudaDriverAbsence(root.Env()), "") << sign;
  }
  TempRoot pci;  // a GPU whose kernel module is not loaded yet: libcuda loads it
  pci.Write("sys/bus/pci/devices/0000:00:01.0/vendor", "0x8086\n");
  pci.Write("sys/bus/pci/devices/0000:3b:00.0/vendor", "0x10de\n");
  EXPECT_EQ(CudaDriverAbsence(pci.Env()), "");
  TempRoot nothing;
  Environment env = nothing.Env();
  env.vars["LD_LIBRARY_PATH"] = "/opt/driver/lib";
  EXPECT_EQ(CudaDriverAbsence(env), "");
}

TEST(CudaDriverAbsence, TheReasonIsAmongWhatDiscoverySearched) {
  TempRoot root;
  Environment env = root.Env();
  env.cuda_not_asked = CudaDriverAbsence(env);
  DiscoveredGpus found = DiscoverGpus(env);
  EXPECT_EQ(found.source, "none");
  EXPECT_THAT(found.searched, StartsWith("CUDA driver (libcuda.so.1): not asked: no NVIDIA kernel module"));
  EXPECT_THAT(found.searched, HasSubstr("/proc/driver/nvidia/gpus: no GPU"));
  DeviceResolution resolved = ResolveDevices(env, {"0"}, "CUDA_VISIBLE_DEVICES");
  ASSERT_EQ(resolved.devices.size(), 1u);
  EXPECT_THAT(resolved.devices[0].problem, HasSubstr("CUDA driver (libcuda.so.1): not asked"));
}

// ---- resolving tokens to GPUs ----

GpuInfo Info(int ordinal, const std::string& uuid, const std::string& pci) {
  return {ordinal, uuid, pci, "H100"};
}

const std::vector<GpuInfo> kNode = {Info(0, "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6", "0000:1b:00.0"),
                                    Info(1, "GPU-8932aaaa-0000-0000-0000-000000000000", "0000:3b:00.0"),
                                    Info(2, "GPU-c0ffee00-0000-0000-0000-000000000000", "0000:9c:00.0")};

std::vector<std::string> Pcis(const std::vector<ResolvedDevice>& devices) {
  std::vector<std::string> out;
  for (const ResolvedDevice& d : devices) out.push_back(d.gpu ? d.gpu->pci_bus_id : "-");
  return out;
}

TEST(DeviceResolve, IndicesAndUuidPrefixesAsCudaReadsThem) {
  // Upper case is the same UUID; "01" is index 1.
  auto r = MatchDeviceTokens({"2", "GPU-8932f9", "GPU-C0FFEE", "01"}, kNode, "procfs", true);
  EXPECT_THAT(Pcis(r), ElementsAre("0000:9c:00.0", "0000:1b:00.0", "0000:9c:00.0", "0000:3b:00.0"));
  for (const ResolvedDevice& d : r) EXPECT_EQ(d.problem, "") << d.token;
  // The full UUID, as nvidia-smi -L prints it.
  EXPECT_THAT(Pcis(MatchDeviceTokens({kUuid}, kNode, "procfs", true)), ElementsAre("0000:1b:00.0"));
}

TEST(DeviceResolve, AnAmbiguousOrUnknownEntryEndsACudaList) {
  // "GPU-8932" fits two GPUs: CUDA needs a unique prefix, treats the entry as invalid and shows only the
  // devices before it.
  auto r = MatchDeviceTokens({"2", "GPU-8932", "0"}, kNode, "procfs", true);
  EXPECT_THAT(Pcis(r), ElementsAre("0000:9c:00.0", "-", "-"));
  EXPECT_EQ(r[1].problem, "is a prefix of 2 GPU UUIDs; CUDA needs a unique one, give more of the UUID");
  EXPECT_EQ(r[2].problem, "CUDA ignores it: it follows 'GPU-8932', which names no GPU");

  r = MatchDeviceTokens({"0", "3", "1"}, kNode, "procfs", true);
  EXPECT_THAT(Pcis(r), ElementsAre("0000:1b:00.0", "-", "-"));
  EXPECT_EQ(r[1].problem, "is beyond the 3 GPU(s) procfs lists (indices start at 0)");

  r = MatchDeviceTokens({"GPU-deadbeef", "0"}, kNode, "procfs", true);
  EXPECT_EQ(r[0].problem, "matches none of the 3 GPU UUIDs procfs lists (nvidia-smi -L prints them)");
  EXPECT_FALSE(r[1].gpu.has_value());

  // A list distrun hands out entry by entry (--local-device-ids): one bad entry spoils only itself.
  r = MatchDeviceTokens({"0", "3", "1"}, kNode, "procfs", false);
  EXPECT_THAT(Pcis(r), ElementsAre("0000:1b:00.0", "-", "0000:3b:00.0"));
}

TEST(DeviceResolve, MigDevices) {
  // The legacy form names its GPU; the current form is known only to the driver, and is no error.
  auto r = MatchDeviceTokens({"MIG-GPU-c0ffee00-0000-0000-0000-000000000000/1/0", "MIG-c2b5f6e1-1d4a", "1"},
                             kNode, "procfs", true);
  EXPECT_THAT(Pcis(r), ElementsAre("0000:9c:00.0", "-", "0000:3b:00.0"));
  EXPECT_EQ(r[1].problem, "a MIG device; only the CUDA driver knows which GPU it is on");
  // The driver lists a MIG device under its own UUID (formatted "GPU-...", with its GPU's PCI bus id).
  std::vector<GpuInfo> driver = {Info(0, "GPU-c2b5f6e1-1d4a-5a5e-9f0a-4cbe1e8e3a21", "0000:9c:00.0")};
  EXPECT_THAT(Pcis(MatchDeviceTokens({kMigUuid}, driver, "the CUDA driver", true)),
              ElementsAre("0000:9c:00.0"));
}

TEST(DeviceResolve, SourcesWithoutUuidsOrGpus) {
  std::vector<GpuInfo> devfs(2);
  auto r = MatchDeviceTokens({"1", "GPU-8932f9"}, devfs, "devfs", true);
  EXPECT_TRUE(r[0].gpu.has_value());
  EXPECT_EQ(r[0].gpu->pci_bus_id, "");
  EXPECT_EQ(r[1].problem, "devfs gives no GPU UUIDs to match it against");
  r = MatchDeviceTokens({"0", "1"}, {}, "searched nothing", true);
  EXPECT_EQ(r[0].problem, "no GPU found (searched nothing)");
  EXPECT_EQ(r[1].problem, "no GPU found (searched nothing)");
}

// A fake node with kNode's three GPUs in procfs.
void WriteProcfs(const TempRoot& root) {
  for (const GpuInfo& g : kNode) {
    root.Write("proc/driver/nvidia/gpus/" + g.pci_bus_id + "/information",
               Information("H100", g.uuid, g.pci_bus_id));
  }
}

CudaQuery Driver(std::vector<GpuInfo> gpus) {
  return [gpus] { return std::optional<std::vector<GpuInfo>>(gpus); };
}

TEST(DeviceResolve, TheDriverThatAppliedTheListAnswersByPosition) {
  TempRoot root;
  WriteProcfs(root);
  Environment env = root.Env();
  // Under a cgroup that leaves one GPU, CUDA_VISIBLE_DEVICES=0 is that GPU, whatever procfs says.
  env.vars["CUDA_VISIBLE_DEVICES"] = "0,1";
  env.cuda_query = Driver({Info(0, "GPU-c0ffee00-0000-0000-0000-000000000000", "0000:9c:00.0")});
  DeviceResolution r = ResolveDevices(env, {"0", "1"}, "CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(r.source, "cuda-driver");
  EXPECT_THAT(Pcis(r.devices), ElementsAre("0000:9c:00.0", "-"));
  EXPECT_EQ(
      r.devices[1].problem,
      "the CUDA driver shows only 1 of the 2 devices in CUDA_VISIBLE_DEVICES (it stops at the first entry it "
      "cannot use)");
}

TEST(DeviceResolve, AnUnnarrowedDriverIsMatchedLikeTheFiles) {
  TempRoot root;
  Environment env = root.Env();
  env.cuda_query = Driver(kNode);
  DeviceResolution r = ResolveDevices(env, {"GPU-c0f", "0"}, "SLURM_STEP_GPUS");
  EXPECT_EQ(r.source, "cuda-driver");
  EXPECT_THAT(Pcis(r.devices), ElementsAre("0000:9c:00.0", "0000:1b:00.0"));
}

TEST(DeviceResolve, TokensFromAnotherListThanTheDriverAppliedUseTheFiles) {
  TempRoot root;
  WriteProcfs(root);
  Environment env = root.Env();
  env.vars["CUDA_VISIBLE_DEVICES"] = "1";
  env.cuda_query = Driver({kNode[1]});
  // --local-device-ids replaces CUDA_VISIBLE_DEVICES in the workers: its ids are the node's.
  DeviceResolution r = ResolveDevices(env, {"2", "0"}, "--local-device-ids");
  EXPECT_EQ(r.source, "procfs");
  EXPECT_THAT(Pcis(r.devices), ElementsAre("0000:9c:00.0", "0000:1b:00.0"));
}

TEST(DeviceResolve, WithoutADriverTheFilesAnswer) {
  TempRoot root;
  WriteProcfs(root);
  Environment env = root.Env();
  env.vars["CUDA_VISIBLE_DEVICES"] = "GPU-8932f,2";
  env.cuda_query = [] { return std::optional<std::vector<GpuInfo>>(); };
  DeviceResolution r = ResolveDevices(env, {"GPU-8932f", "2"}, "CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(r.source, "procfs");
  EXPECT_THAT(Pcis(r.devices), ElementsAre("0000:1b:00.0", "0000:9c:00.0"));

  TempRoot empty;
  r = ResolveDevices(empty.Env(), {"0"}, "CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(r.source, "none");
  EXPECT_EQ(
      r.devices[0].problem,
      "no GPU found (searched /proc/driver/nvidia/gpus: no GPU; /dev/nvidia[0-9]*: none; /dev/kfd: absent)");
  Environment no_driver = empty.Env();
  no_driver.cuda_query = [] { return std::optional<std::vector<GpuInfo>>(); };
  r = ResolveDevices(no_driver, {"0"}, "CUDA_VISIBLE_DEVICES");
  EXPECT_THAT(
      r.devices[0].problem,
      ::testing::StartsWith("no GPU found (searched CUDA driver (libcuda.so.1): not loadable or not working; "
                            "/proc/driver/nvidia/gpus: no GPU;"));
}

TEST(GpuDiscovery, SaysWhatItLookedAt) {
  TempRoot root;
  Environment env = root.Env();
  env.cuda_query = [] { return std::optional<std::vector<GpuInfo>>(); };
  EXPECT_EQ(DiscoverGpus(env).searched,
            "CUDA driver (libcuda.so.1): not loadable or not working; /proc/driver/nvidia/gpus: no GPU; "
            "/dev/nvidia[0-9]*: none; /dev/kfd: absent");
  root.CharDevice("dev/nvidia0", 195, 0);
  EXPECT_EQ(DiscoverGpus(env).searched,
            "CUDA driver (libcuda.so.1): not loadable or not working; /proc/driver/nvidia/gpus: no GPU; "
            "devfs: 1 GPU(s)");
  env.cuda_query = Driver({});
  EXPECT_EQ(DiscoverGpus(env).searched, "CUDA driver (libcuda.so.1): no device");
}

TEST(CudaDriver, FakeDriverPciBusIdsFromTheVariable) {
  ScopedVar devices("FAKE_CUDA_DEVICES", "3");
  ScopedVar pci("FAKE_CUDA_PCI_BUS_IDS", "0000:3B:00.0,,00000000:9C:00.0");
  auto gpus = QueryCudaDriverLibrary(DISTRUN_FAKE_CUDA_LIBRARY);
  ASSERT_TRUE(gpus.has_value());
  ASSERT_EQ(gpus->size(), 3u);
  EXPECT_EQ((*gpus)[0].pci_bus_id, "0000:3b:00.0");  // normalized as /sys names it
  EXPECT_EQ((*gpus)[1].pci_bus_id, "0000:a1:00.0");  // no entry: the default
  EXPECT_EQ((*gpus)[2].pci_bus_id, "0000:9c:00.0");
}

}  // namespace
}  // namespace distrun
