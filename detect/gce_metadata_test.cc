#include "detect/gce_metadata.h"

#include <gtest/gtest.h>

#include "detect/errors.h"
#include "test_support.h"

namespace distrun {
namespace {

using testing::MakeEnv;

TEST(TpuGceMetadata, ServerDefaultsToMetadataGoogleInternal) {
  MetadataServer s = FindMetadataServer(MakeEnv({}));
  EXPECT_EQ(s.host, "metadata.google.internal");
  EXPECT_EQ(s.port, 80);
}

TEST(TpuGceMetadata, ServerFromVariables) {
  MetadataServer ip = FindMetadataServer(MakeEnv({{"GCE_METADATA_IP", "169.254.169.254"}}));
  EXPECT_EQ(ip.host, "169.254.169.254");
  EXPECT_EQ(ip.port, 80);
  MetadataServer with_port =
      FindMetadataServer(MakeEnv({{"GCE_METADATA_IP", "127.0.0.1:8080"}, {"GCE_METADATA_HOST", "other:1"}}));
  EXPECT_EQ(with_port.host, "127.0.0.1");
  EXPECT_EQ(with_port.port, 8080);
  EXPECT_EQ(with_port.display, "GCE_METADATA_IP=127.0.0.1:8080");
  MetadataServer host = FindMetadataServer(MakeEnv({{"GCE_METADATA_HOST", "metadata.internal:9000"}}));
  EXPECT_EQ(host.host, "metadata.internal");
  EXPECT_EQ(host.port, 9000);
  MetadataServer v6 = FindMetadataServer(MakeEnv({{"GCE_METADATA_IP", "[fd00:ec2::254]:81"}}));
  EXPECT_EQ(v6.host, "fd00:ec2::254");
  EXPECT_EQ(v6.port, 81);
  MetadataServer bare_v6 = FindMetadataServer(MakeEnv({{"GCE_METADATA_IP", "fd00:ec2::254"}}));
  EXPECT_EQ(bare_v6.host, "fd00:ec2::254");
  EXPECT_THROW(FindMetadataServer(MakeEnv({{"GCE_METADATA_IP", "127.0.0.1:http"}})), UsageError);
}

TEST(TpuGceMetadata, NoHttpGetterMeansUnreachable) {
  Environment env = MakeEnv({});
  MetadataAttribute a = GetInstanceAttribute(env, FindMetadataServer(env), "agent-worker-number");
  EXPECT_EQ(a.outcome, MetadataAttribute::Outcome::kUnreachable);
}

TEST(TpuGceMetadata, RequestShapeAndOutcomes) {
  Environment env = MakeEnv({{"GCE_METADATA_IP", "127.0.0.1:8123"}});
  HttpRequest seen;
  int status = 200;
  env.http_get = [&](const HttpRequest& r) -> std::optional<HttpResponse> {
    seen = r;
    return HttpResponse{status, " 3\n"};
  };
  MetadataServer server = FindMetadataServer(env);
  MetadataAttribute a = GetInstanceAttribute(env, server, "agent-worker-number");
  EXPECT_EQ(a.outcome, MetadataAttribute::Outcome::kFound);
  EXPECT_EQ(a.value, "3");
  EXPECT_EQ(seen.host, "127.0.0.1");
  EXPECT_EQ(seen.port, 8123);
  EXPECT_EQ(seen.path, "/computeMetadata/v1/instance/attributes/agent-worker-number");
  ASSERT_EQ(seen.headers.size(), 1u);
  EXPECT_EQ(seen.headers[0].first, "Metadata-Flavor");
  EXPECT_EQ(seen.headers[0].second, "Google");
  EXPECT_LE(seen.timeout, kMetadataTimeout);
  status = 404;
  EXPECT_EQ(GetInstanceAttribute(env, server, "x").outcome, MetadataAttribute::Outcome::kNotFound);
  status = 403;
  EXPECT_EQ(GetInstanceAttribute(env, server, "x").outcome, MetadataAttribute::Outcome::kRefused);
}

TEST(TpuGceMetadata, ParsesTpuEnv) {
  auto values = ParseTpuEnv(
      "ACCELERATOR_TYPE: 'v5litepod-16'\n"
      "CHIPS_PER_HOST_BOUNDS: '2,2,1'\n"
      "MEGASCALE_COORDINATOR_ADDRESS: 'ms-slice-0-0.ms:8080'\n"
      "MEGASCALE_NUM_SLICES: '2'\r\n"
      "WORKER_ID: \"3\"\n"
      "garbage line\n"
      "EMPTY: ''\n");
  EXPECT_EQ(values["ACCELERATOR_TYPE"], "v5litepod-16");
  EXPECT_EQ(values["MEGASCALE_COORDINATOR_ADDRESS"], "ms-slice-0-0.ms:8080");
  EXPECT_EQ(values["MEGASCALE_NUM_SLICES"], "2");
  EXPECT_EQ(values["WORKER_ID"], "3");
  EXPECT_EQ(values["EMPTY"], "");
  EXPECT_EQ(values.count("garbage line"), 0u);
}

TEST(TpuGceMetadata, ParsesWorkerEndpoints) {
  EXPECT_EQ(ParseWorkerEndpoints("w", "t1v-n-1-w-0,t1v-n-1-w-1"),
            (std::vector<std::string>{"t1v-n-1-w-0", "t1v-n-1-w-1"}));
  EXPECT_EQ(ParseWorkerEndpoints("w", "unknown:unknown:10.130.0.2, unknown:unknown:10.130.0.3\n"),
            (std::vector<std::string>{"10.130.0.2", "10.130.0.3"}));
  EXPECT_EQ(ParseWorkerEndpoints("w", "w0:uid:fd00::2"), (std::vector<std::string>{"fd00::2"}));
  EXPECT_EQ(ParseWorkerEndpoints("w", "fd00::3"), (std::vector<std::string>{"fd00::3"}));
  EXPECT_EQ(ParseWorkerEndpoints("w", "10.0.0.1:8470"), (std::vector<std::string>{"10.0.0.1"}));
  EXPECT_THROW(ParseWorkerEndpoints("w", "a,,b"), UsageError);
  EXPECT_THROW(ParseWorkerEndpoints("w", "name:uid:"), UsageError);
  // No address holds a blank, whichever form names it (found by tests/fuzz/gce_metadata_fuzz.cc).
  EXPECT_THROW(ParseWorkerEndpoints("w", "name:uid: 10.0.0.2"), UsageError);
  EXPECT_THROW(ParseWorkerEndpoints("w", "w-0\nw-1"), UsageError);
  EXPECT_THROW(ParseWorkerEndpoints("w", std::string("fe80::\0\r\nx y", 12)), UsageError);
}

}  // namespace
}  // namespace distrun
