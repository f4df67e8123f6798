#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

#include "detect/coordinator_port.h"
#include "detect/detector.h"
#include "detect/errors.h"
#include "detect/http_get.h"
#include "detect/test_http_server.h"
#include "detect/test_temp_root.h"
#include "test_support.h"

namespace distrun {
namespace {

using testing::MakeEnv;
using testing::TempRoot;
using testing::TestHttpReply;
using testing::TestHttpRequest;
using testing::TestHttpServer;

using Attributes = std::map<std::string, std::string>;

// The GCE metadata server as a TPU VM sees it: refuses requests without Metadata-Flavor: Google.
class FakeMetadataServer {
 public:
  explicit FakeMetadataServer(Attributes attributes, bool chunked = false, std::string address = "127.0.0.1")
      : attributes_(std::move(attributes)),
        chunked_(chunked),
        server_([this](const TestHttpRequest& r) { return Answer(r); }, std::move(address)) {}

  bool ok() const { return server_.ok(); }
  std::string HostPort() const { return server_.HostPort(); }
  int port() const { return server_.port(); }
  int requests() const { return server_.requests(); }
  std::vector<std::string> keys() const {
    std::lock_guard<std::mutex> lock(mu_);
    return keys_;
  }

 private:
  TestHttpReply Answer(const TestHttpRequest& r) {
    const std::string* flavor = r.Header("Metadata-Flavor");
    if (flavor == nullptr || *flavor != "Google")
      return testing::Reply(403, "Missing Metadata-Flavor:Google\n");
    const std::string prefix = "/computeMetadata/v1/instance/attributes/";
    if (!r.path.starts_with(prefix)) return testing::Reply(404, "not found\n");
    std::string key = r.path.substr(prefix.size());
    {
      std::lock_guard<std::mutex> lock(mu_);
      keys_.push_back(key);
    }
    auto it = attributes_.find(key);
    if (it == attributes_.end()) return testing::Reply(404, "not found\n");
    return chunked_ ? testing::ChunkedReply(200, it->second) : testing::Reply(200, it->second);
  }

  std::map<std::string, std::string> attributes_;
  bool chunked_;
  mutable std::mutex mu_;
  std::vector<std::string> keys_;
  TestHttpServer server_;  // last: its thread calls Answer
};

// A TPU VM as the metadata path sees it: a TPU chip under the root and the server above.
Environment MetadataEnv(const FakeMetadataServer& server, const TempRoot& root,
                        std::initializer_list<std::pair<std::string, std::string>> vars = {}) {
  Environment env = MakeEnv(vars);
  env.vars["GCE_METADATA_IP"] = server.HostPort();
  env.root = root.path();
  env.http_get = HttpGetBlocking;
  return env;
}

std::string UsageMessage(const Detector& d, const Environment& env) {
  try {
    d.detect(env);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

const std::string kGkeHosts =
    "llama-slice-0-0.llama,llama-slice-0-1.llama,llama-slice-0-2.llama,llama-slice-0-3.llama";

TEST(TpuDetector, AbsentWithoutVariables) {
  TempRoot root;
  Environment env = MakeEnv({});
  env.root = root.path();
  auto missing = TpuDetector().missing(env);
  ASSERT_EQ(missing.size(), 2u);
  EXPECT_EQ(missing[0], "TPU_WORKER_HOSTNAMES, TPU_PROCESS_ADDRESSES or TPU_PROCESS_ADDRESSES_PATH");
  EXPECT_EQ(missing[1], "TPU_WORKER_ID or CLOUD_TPU_TASK_ID");
  env.vars["TPU_WORKER_HOSTNAMES"] = kGkeHosts;
  EXPECT_EQ(TpuDetector().missing(env), std::vector<std::string>{"TPU_WORKER_ID or CLOUD_TPU_TASK_ID"});
}

TEST(TpuDetector, GkeSingleSlice) {
  Environment env = MakeEnv({{"TPU_WORKER_HOSTNAMES", kGkeHosts},
                             {"TPU_WORKER_ID", "2"},
                             {"TPU_SKIP_MDS_QUERY", "true"},
                             {"TPU_ACCELERATOR_TYPE", "v5litepod-16"}});
  ASSERT_TRUE(TpuDetector().missing(env).empty());
  Topology t = TpuDetector().detect(env);
  EXPECT_EQ(t.method, "tpu");
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerNode);
  EXPECT_EQ(t.num_nodes, 4);
  EXPECT_EQ(t.node_rank, 2);
  EXPECT_EQ(t.num_tasks, 4);
  EXPECT_EQ(t.task_id, 2);
  EXPECT_EQ(t.local_task, 0);
  EXPECT_EQ(t.local_tasks, 1);
  EXPECT_EQ(t.hosts, (std::vector<std::string>{"llama-slice-0-0.llama", "llama-slice-0-1.llama",
                                               "llama-slice-0-2.llama", "llama-slice-0-3.llama"}));
  EXPECT_EQ(t.coordinator_host, "llama-slice-0-0.llama");
  ASSERT_TRUE(t.coordinator_port.has_value());
  EXPECT_GE(*t.coordinator_port, kCoordinatorPortBase);
  EXPECT_LT(*t.coordinator_port, kCoordinatorPortBase + kCoordinatorPortRange);
  EXPECT_EQ(t.slice_index, 0);
  EXPECT_TRUE(t.visible_devices.empty());
}

TEST(TpuDetector, MultisliceNumbersHostsAcrossSlices) {
  auto slice_env = [](const std::string& slice, const std::string& worker) {
    std::string hosts;
    for (int i = 0; i < 4; ++i)
      hosts += (i ? "," : "") + ("ms-slice-" + slice + "-" + std::to_string(i) + ".ms");
    return MakeEnv({{"TPU_WORKER_HOSTNAMES", hosts},
                    {"TPU_WORKER_ID", worker},
                    {"MEGASCALE_COORDINATOR_ADDRESS", "ms-slice-0-0.ms:8080"},
                    {"MEGASCALE_NUM_SLICES", "2"},
                    {"MEGASCALE_SLICE_ID", slice}});
  };
  Topology last = TpuDetector().detect(slice_env("1", "3"));
  EXPECT_EQ(last.num_nodes, 8);
  EXPECT_EQ(last.node_rank, 7);
  EXPECT_EQ(last.num_tasks, 8);
  EXPECT_EQ(last.task_id, 7);
  EXPECT_EQ(last.slice_index, 1);
  EXPECT_EQ(last.coordinator_host, "ms-slice-0-0.ms");
  EXPECT_TRUE(last.hosts.empty());  // other slices' hosts are not visible
  Topology first = TpuDetector().detect(slice_env("0", "0"));
  EXPECT_EQ(first.node_rank, 0);
  EXPECT_EQ(first.slice_index, 0);
  // Every host of every slice derives the same port.
  EXPECT_EQ(first.coordinator_port, last.coordinator_port);
  Topology middle = TpuDetector().detect(slice_env("1", "0"));
  EXPECT_EQ(middle.node_rank, 4);
}

TEST(TpuDetector, MegascaleAddressForms) {
  for (auto [address, host] : std::vector<std::pair<std::string, std::string>>{
           {"10.0.0.5", "10.0.0.5"}, {"[fd00::5]:8080", "fd00::5"}, {"fd00::5", "fd00::5"}}) {
    Environment env = MakeEnv({{"TPU_WORKER_HOSTNAMES", "a,b"},
                               {"TPU_WORKER_ID", "1"},
                               {"MEGASCALE_COORDINATOR_ADDRESS", address},
                               {"MEGASCALE_NUM_SLICES", "1"},
                               {"MEGASCALE_SLICE_ID", "0"}});
    EXPECT_EQ(TpuDetector().detect(env).coordinator_host, host) << address;
  }
}

TEST(TpuDetector, ProcessAddressesWithSeveralProcessesPerHostArePerTask) {
  Environment env =
      MakeEnv({{"TPU_PROCESS_ADDRESSES", "10.0.0.1:8476,10.0.0.1:8477,10.0.0.2:8476,10.0.0.2:8477"},
               {"CLOUD_TPU_TASK_ID", "3"},
               {"TPU_PROCESS_PORT", "8477"}});
  Topology t = TpuDetector().detect(env);
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerTask);
  EXPECT_EQ(t.num_tasks, 4);
  EXPECT_EQ(t.task_id, 3);
  EXPECT_EQ(t.num_nodes, 2);
  EXPECT_EQ(t.node_rank, 1);
  EXPECT_EQ(t.local_task, 1);
  EXPECT_EQ(t.local_tasks, 2);
  EXPECT_EQ(t.hosts, (std::vector<std::string>{"10.0.0.1", "10.0.0.2"}));
  EXPECT_EQ(t.coordinator_host, "10.0.0.1");
}

TEST(TpuDetector, ProcessAddressesOnePerHostArePerNode) {
  Environment env = MakeEnv({{"TPU_PROCESS_ADDRESSES", "h0:8476,h1:8476"}, {"TPU_WORKER_ID", "1"}});
  Topology t = TpuDetector().detect(env);
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerNode);
  EXPECT_EQ(t.num_nodes, 2);
  EXPECT_EQ(t.node_rank, 1);
  EXPECT_EQ(t.hosts, (std::vector<std::string>{"h0", "h1"}));
}

// Current JAX reads the process list from the file TPU_PROCESS_ADDRESSES_PATH names before either variable.
TEST(TpuDetector, ProcessAddressFileWinsOverBothLists) {
  TempRoot root;
  root.Write("run/tpu/addresses", "  10.0.0.1:8476,10.0.0.1:8477,10.0.0.2:8476,10.0.0.2:8477\n");
  Environment env = MakeEnv({{"TPU_PROCESS_ADDRESSES_PATH", "/run/tpu/addresses"},
                             {"TPU_PROCESS_ADDRESSES", "x:1,y:1"},
                             {"TPU_WORKER_HOSTNAMES", "a,b,c"},
                             {"TPU_WORKER_ID", "2"}});
  env.root = root.path();
  EXPECT_TRUE(TpuDetector().missing(env).empty());
  Topology t = TpuDetector().detect(env);
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerTask);
  EXPECT_EQ(t.num_tasks, 4);
  EXPECT_EQ(t.task_id, 2);
  EXPECT_EQ(t.node_rank, 1);
  EXPECT_EQ(t.hosts, (std::vector<std::string>{"10.0.0.1", "10.0.0.2"}));
  EXPECT_EQ(t.coordinator_host, "10.0.0.1");

  // Set but empty, the variable is not there: the lists decide.
  env.vars["TPU_PROCESS_ADDRESSES_PATH"] = "";
  env.vars.erase("TPU_PROCESS_ADDRESSES");
  EXPECT_EQ(TpuDetector().detect(env).hosts, (std::vector<std::string>{"a", "b", "c"}));
}

TEST(TpuDetector, MissingOrEmptyAddressFileIsAnErrorWithoutFallback) {
  TempRoot root;
  root.Write("empty", " \n\t\n");
  root.Write("holes", "h0:1,,h1:1");
  auto message = [&root](const std::string& path) {
    Environment env = MakeEnv(
        {{"TPU_PROCESS_ADDRESSES_PATH", path}, {"TPU_WORKER_HOSTNAMES", "a,b"}, {"TPU_WORKER_ID", "0"}});
    env.root = root.path();
    EXPECT_TRUE(TpuDetector().missing(env).empty()) << path;  // chosen, so never silently skipped
    return UsageMessage(TpuDetector(), env);
  };
  std::string missing = message("/absent");
  EXPECT_NE(
      missing.find("TPU_PROCESS_ADDRESSES_PATH='/absent' names a file that cannot be read (No such file"),
      std::string::npos)
      << missing;
  std::string empty = message("/empty");
  EXPECT_NE(empty.find("TPU_PROCESS_ADDRESSES_PATH='/empty' names an empty file"), std::string::npos)
      << empty;
  std::string holes = message("/holes");
  EXPECT_NE(holes.find("TPU_PROCESS_ADDRESSES_PATH file /holes='h0:1,,h1:1' has an empty entry"),
            std::string::npos)
      << holes;
}

TEST(TpuDetector, MalformedValuesNameVariableAndValue) {
  auto message = [](std::initializer_list<std::pair<std::string, std::string>> vars) {
    return UsageMessage(TpuDetector(), MakeEnv(vars));
  };
  EXPECT_NE(message({{"TPU_WORKER_HOSTNAMES", "a,b"}, {"TPU_WORKER_ID", "one"}}).find("TPU_WORKER_ID='one'"),
            std::string::npos);
  std::string too_big = message({{"TPU_WORKER_HOSTNAMES", "a,b"}, {"TPU_WORKER_ID", "2"}});
  EXPECT_NE(too_big.find("TPU_WORKER_ID=2"), std::string::npos) << too_big;
  EXPECT_NE(too_big.find("TPU_WORKER_HOSTNAMES"), std::string::npos) << too_big;
  EXPECT_NE(message({{"TPU_WORKER_HOSTNAMES", "a,,b"}, {"TPU_WORKER_ID", "0"}}).find("empty entry"),
            std::string::npos);
  std::string slice = message({{"TPU_WORKER_HOSTNAMES", "a,b"},
                               {"TPU_WORKER_ID", "0"},
                               {"MEGASCALE_COORDINATOR_ADDRESS", "a"},
                               {"MEGASCALE_NUM_SLICES", "2"},
                               {"MEGASCALE_SLICE_ID", "2"}});
  EXPECT_NE(slice.find("MEGASCALE_SLICE_ID=2"), std::string::npos) << slice;
  EXPECT_NE(slice.find("MEGASCALE_NUM_SLICES=2"), std::string::npos) << slice;
  std::string no_address =
      message({{"TPU_WORKER_HOSTNAMES", "a,b"}, {"TPU_WORKER_ID", "0"}, {"MEGASCALE_NUM_SLICES", "2"}});
  EXPECT_NE(no_address.find("MEGASCALE_COORDINATOR_ADDRESS"), std::string::npos) << no_address;
  std::string no_count = message(
      {{"TPU_WORKER_HOSTNAMES", "a,b"}, {"TPU_WORKER_ID", "0"}, {"MEGASCALE_COORDINATOR_ADDRESS", "a:8080"}});
  EXPECT_NE(no_count.find("MEGASCALE_NUM_SLICES"), std::string::npos) << no_count;
  EXPECT_NE(message({{"TPU_WORKER_HOSTNAMES", "a,b"},
                     {"TPU_WORKER_ID", "0"},
                     {"MEGASCALE_COORDINATOR_ADDRESS", "a"},
                     {"MEGASCALE_NUM_SLICES", "x"},
                     {"MEGASCALE_SLICE_ID", "0"}})
                .find("MEGASCALE_NUM_SLICES='x'"),
            std::string::npos);
}

TEST(TpuDetector, NeverTouchesTheNetworkOffTpu) {
  TempRoot root;
  root.Write("sys/bus/pci/devices/0000:00:04.0/vendor", "0x1ae0\n");  // Google's gVNIC, not a TPU
  root.Write("sys/bus/pci/devices/0000:00:04.0/device", "0x0042\n");
  root.Write("dev/vfio/0", "");
  std::atomic<int> calls{0};
  Environment env = MakeEnv({});
  env.root = root.path();
  env.http_get = [&](const HttpRequest&) -> std::optional<HttpResponse> {
    ++calls;
    return std::nullopt;
  };
  EXPECT_FALSE(TpuDetector().missing(env).empty());
  EXPECT_EQ(calls.load(), 0);
}

TEST(TpuDetector, SkipMdsQueryIsHonoured) {
  TempRoot root;
  root.Write("dev/accel0", "");
  std::atomic<int> calls{0};
  Environment env = MakeEnv({{"TPU_SKIP_MDS_QUERY", "true"}});
  env.root = root.path();
  env.http_get = [&](const HttpRequest&) -> std::optional<HttpResponse> {
    ++calls;
    return std::nullopt;
  };
  EXPECT_FALSE(TpuDetector().missing(env).empty());
  EXPECT_EQ(calls.load(), 0);
  env.vars["TPU_SKIP_MDS_QUERY"] = "false";  // read as "do not skip"
  EXPECT_FALSE(TpuDetector().missing(env).empty());
  EXPECT_EQ(calls.load(), 1);
}

TEST(TpuDetector, EnvironmentAloneNeedsNoNetworkEvenOnATpuVm) {
  TempRoot root;
  root.Write("dev/accel0", "");
  Environment env = MakeEnv({{"TPU_WORKER_HOSTNAMES", "a,b"}, {"TPU_WORKER_ID", "1"}});
  env.root = root.path();
  env.http_get = [](const HttpRequest&) -> std::optional<HttpResponse> {
    ADD_FAILURE() << "unexpected metadata request";
    return std::nullopt;
  };
  ASSERT_TRUE(TpuDetector().missing(env).empty());
  EXPECT_EQ(TpuDetector().detect(env).node_rank, 1);
}

TEST(TpuDetector, FakeServerRefusesRequestsWithoutTheFlavorHeader) {
  FakeMetadataServer server(Attributes{{"agent-worker-number", "0"}});
  ASSERT_TRUE(server.ok());
  HttpRequest request;
  request.host = "127.0.0.1";
  request.port = server.port();
  request.path = "/computeMetadata/v1/instance/attributes/agent-worker-number";
  auto response = HttpGetBlocking(request);
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 403);
}

TEST(TpuDetector, GceMetadataWithOldEndpointTriples) {
  FakeMetadataServer server(
      Attributes{{"agent-worker-number", "1"},
                 {"worker-network-endpoints", "unknown:unknown:10.130.0.2,unknown:unknown:10.130.0.3"},
                 {"accelerator-type", "v4-16"}});
  ASSERT_TRUE(server.ok());
  TempRoot root;
  root.Write("dev/accel0", "");
  Environment env = MetadataEnv(server, root);
  ASSERT_TRUE(TpuDetector().missing(env).empty());
  Topology t = TpuDetector().detect(env);
  EXPECT_EQ(t.launch_mode, LaunchMode::kPerNode);
  EXPECT_EQ(t.num_nodes, 2);
  EXPECT_EQ(t.node_rank, 1);
  EXPECT_EQ(t.hosts, (std::vector<std::string>{"10.130.0.2", "10.130.0.3"}));
  EXPECT_EQ(t.coordinator_host, "10.130.0.2");
  EXPECT_EQ(t.slice_index, 0);
  // tpu-env was asked for (404 here: a single-slice VM without it).
  auto keys = server.keys();
  EXPECT_NE(std::find(keys.begin(), keys.end(), "tpu-env"), keys.end());
}

TEST(TpuDetector, GceMetadataChunkedWithMultisliceTpuEnv) {
  FakeMetadataServer server(
      Attributes{{"agent-worker-number", "2\n"},
                 {"worker-network-endpoints", "t1v-n-ab-w-0,t1v-n-ab-w-1,t1v-n-ab-w-2,t1v-n-ab-w-3"},
                 {"tpu-env",
                  "ACCELERATOR_TYPE: 'v5litepod-16'\nMEGASCALE_COORDINATOR_ADDRESS: 't1v-n-00-w-0:8080'\n"
                  "MEGASCALE_NUM_SLICES: '3'\nMEGASCALE_SLICE_ID: '2'\nWORKER_ID: '2'\n"}},
      /*chunked=*/true);
  ASSERT_TRUE(server.ok());
  TempRoot root;
  Environment env = MetadataEnv(server, root, {{"TPU_ACCELERATOR_TYPE", "v5litepod-16"}});
  ASSERT_TRUE(TpuDetector().missing(env).empty());
  Topology t = TpuDetector().detect(env);
  EXPECT_EQ(t.num_nodes, 12);
  EXPECT_EQ(t.node_rank, 2 + 2 * 4);
  EXPECT_EQ(t.slice_index, 2);
  EXPECT_EQ(t.coordinator_host, "t1v-n-00-w-0");
  EXPECT_TRUE(t.hosts.empty());
}

TEST(TpuDetector, PciTpuChipIsATpuVm) {
  FakeMetadataServer server(Attributes{{"agent-worker-number", "0"}, {"worker-network-endpoints", "w0"}});
  ASSERT_TRUE(server.ok());
  TempRoot root;
  root.Write("sys/bus/pci/devices/0000:00:05.0/vendor", "0x1ae0\n");
  root.Write("sys/bus/pci/devices/0000:00:05.0/device", "0x0063\n");
  Environment env = MetadataEnv(server, root);
  ASSERT_TRUE(TpuDetector().missing(env).empty());
  Topology t = TpuDetector().detect(env);
  EXPECT_EQ(t.num_nodes, 1);
  EXPECT_EQ(t.coordinator_host, "w0");
}

TEST(TpuDetector, EnvironmentListWithMetadataWorkerNumber) {
  FakeMetadataServer server(Attributes{{"agent-worker-number", "1"}});
  ASSERT_TRUE(server.ok());
  TempRoot root;
  root.Write("dev/accel3", "");
  Environment env = MetadataEnv(server, root, {{"TPU_WORKER_HOSTNAMES", "h0,h1"}});
  ASSERT_TRUE(TpuDetector().missing(env).empty());
  EXPECT_EQ(TpuDetector().detect(env).node_rank, 1);
}

TEST(TpuDetector, MissingKeyIsAClearError) {
  FakeMetadataServer server(Attributes{{"agent-worker-number", "0"}});
  ASSERT_TRUE(server.ok());
  TempRoot root;
  root.Write("dev/accel0", "");
  Environment env = MetadataEnv(server, root);
  ASSERT_TRUE(TpuDetector().missing(env).empty());
  std::string message = UsageMessage(TpuDetector(), env);
  EXPECT_NE(message.find("worker-network-endpoints"), std::string::npos) << message;
  EXPECT_NE(message.find("404"), std::string::npos) << message;
  EXPECT_NE(message.find("TPU_WORKER_HOSTNAMES"), std::string::npos) << message;
}

TEST(TpuDetector, MalformedMetadataWorkerNumber) {
  FakeMetadataServer server(Attributes{{"agent-worker-number", "zero"}, {"worker-network-endpoints", "a,b"}});
  ASSERT_TRUE(server.ok());
  TempRoot root;
  root.Write("dev/accel0", "");
  std::string message = UsageMessage(TpuDetector(), MetadataEnv(server, root));
  EXPECT_NE(message.find("agent-worker-number='zero'"), std::string::npos) << message;
}

TEST(TpuDetector, SilentMetadataServerTimesOut) {
  TestHttpServer silent([](const TestHttpRequest&) { return testing::SilentReply(); });
  ASSERT_TRUE(silent.ok());
  TempRoot root;
  root.Write("dev/accel0", "");
  Environment env = MakeEnv({{"GCE_METADATA_IP", silent.HostPort()}});
  env.root = root.path();
  // The real client with a short timeout, so the test stays fast.
  env.http_get = [](const HttpRequest& r) {
    HttpRequest shorter = r;
    shorter.timeout = std::chrono::milliseconds(200);
    return HttpGetBlocking(shorter);
  };
  auto start = std::chrono::steady_clock::now();
  auto missing = TpuDetector().missing(env);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  ASSERT_EQ(missing.size(), 3u);
  EXPECT_NE(missing[2].find("agent-worker-number"), std::string::npos) << missing[2];
  EXPECT_NE(missing[2].find(silent.HostPort()), std::string::npos) << missing[2];
  EXPECT_EQ(silent.requests(), 1);
}

TEST(TpuDetector, MetadataServerOnIpv6Loopback) {
  FakeMetadataServer server(
      Attributes{{"agent-worker-number", "0"}, {"worker-network-endpoints", "v6-w-0,v6-w-1"}}, false, "::1");
  if (!server.ok()) GTEST_SKIP() << "no IPv6 loopback on this machine";
  TempRoot root;
  root.Write("dev/accel0", "");
  Environment env = MetadataEnv(server, root);
  EXPECT_EQ(env.vars["GCE_METADATA_IP"], "[::1]:" + std::to_string(server.port()));
  ASSERT_TRUE(TpuDetector().missing(env).empty());
  EXPECT_EQ(TpuDetector().detect(env).hosts, (std::vector<std::string>{"v6-w-0", "v6-w-1"}));
}

}  // namespace
}  // namespace distrun
