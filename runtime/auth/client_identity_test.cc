// A user's command with a munge credential instead of the job token (client_identity.h), against a real
// gRPC server and a private munged.
#include "runtime/auth/client_identity.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <sstream>
#include <string>

#include "runtime/auth/munge_test_daemon.h"
#include "runtime/client/client.h"
#include "runtime/service/service.h"
#include "runtime/transport/grpc_client.h"
#include "runtime/transport/grpc_server.h"
#include "runtime/transport/test_node0.h"

namespace distrun {
namespace {

using namespace std::chrono_literals;

constexpr char kToken[] = "client-identity-test-token";

TEST(ClientIdentity, TheCredentialMustBeTheJobUsersAndForThisPort) {
  AdmissionPolicy policy;
  policy.uid = 1000;
  policy.port = 4000;
  EXPECT_EQ(CheckClientCredential({ClientIdentityPayload(4000), 1000, 1000}, policy), "");
  EXPECT_EQ(CheckClientCredential({ClientIdentityPayload(4000), 4242, 1000}, policy),
            "the munge credential is uid 4242's, not the job's user (uid 1000)");
  EXPECT_NE(CheckClientCredential({ClientIdentityPayload(4001), 1000, 1000}, policy).find("port 4000"),
            std::string::npos);
  // An agent's credential is not a command's.
  EXPECT_NE(CheckClientCredential({"distrun-agent/1 port=4000 node=0 run=r", 1000, 1000}, policy), "");
}

class ClientCredentialTest : public ::testing::Test {
 protected:
  void Start(bool with_munge) {
    std::string why;
    munge = daemon.Credentials(&why);
    if (!munge) GTEST_SKIP() << why;
    service = std::make_unique<CoordinationService>(testing::TestServiceConfig(1));
    GrpcServerConfig gc = testing::TestGrpcServerConfig(kToken);
    if (with_munge) gc.munge = munge;
    gc.admission.uid = ::geteuid();
    gc.log = testing::StreamLogger("client-identity", log);
    server = std::make_unique<GrpcServer>(*service, gc);
  }
  void TearDown() override {
    server.reset();
    service.reset();
  }

  std::string Credential(int port) {
    std::string why;
    auto c = munge->Encode(ClientIdentityPayload(port), &why);
    EXPECT_TRUE(c) << why;
    return c.value_or("");
  }
  // A client with no token whose calls carry `credential()`.
  std::unique_ptr<GrpcClient> Client(std::function<std::string()> credential) {
    GrpcClientConfig c;
    c.address = server->address();
    c.credential = std::move(credential);
    c.call_timeout = 5s;
    return std::make_unique<GrpcClient>(c);
  }

  testing::MungeTestDaemon daemon;
  std::shared_ptr<MungeCredentials> munge;
  std::ostringstream log;
  std::unique_ptr<CoordinationService> service;
  std::unique_ptr<GrpcServer> server;
};

TEST_F(ClientCredentialTest, AFreshCredentialPerCallStandsForTheToken) {
  Start(/*with_munge=*/true);
  auto client = Client([this] { return Credential(server->port()); });
  ASSERT_TRUE(client->KvSet("k", "v").ok());
  std::optional<std::string> value;
  ASSERT_TRUE(client->KvTryGet("k", &value).ok());
  EXPECT_EQ(value, "v");
  JobStatusView view;
  EXPECT_TRUE(client->Describe(&view).ok());
}

TEST_F(ClientCredentialTest, ReplayedOrForeignCredentialsAreRefusedAndLogged) {
  Start(/*with_munge=*/true);
  const std::string once = Credential(server->port());
  auto replaying = Client([once] { return once; });
  ASSERT_TRUE(replaying->KvSet("k", "v").ok());
  Status s = replaying->KvSet("k", "w");
  EXPECT_EQ(s.code, StatusCode::kUnauthenticated);
  EXPECT_NE(s.message.find("munge credential refused"), std::string::npos) << s.message;
  EXPECT_NE(s.message.find("replayed"), std::string::npos) << s.message;

  auto other_port = Client([this] { return Credential(server->port() + 1); });
  s = other_port->KvSet("k", "x");
  EXPECT_EQ(s.code, StatusCode::kUnauthenticated);
  EXPECT_NE(s.message.find("not made for a command to this runtime"), std::string::npos) << s.message;
  EXPECT_NE(log.str().find("refused a KvSet call from 127.0.0.1:"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("munge credential refused"), std::string::npos) << log.str();
}

// The workers' client (the C API's, the Python module's) opened with an address and no token.
TEST_F(ClientCredentialTest, TheWorkersClientWithoutATokenProvesItsUserWithMunge) {
  Start(/*with_munge=*/true);
  ClientOptions o;
  o.coordinator_address = server->address();
  o.munge_socket = {daemon.socket(), "DISTRUN_MUNGE_SOCKET", {}};
  distrun::Client client(o);
  EXPECT_TRUE(client.auth().munge) << client.auth().munge_problem;
  ASSERT_TRUE(client.Set("k", "v").ok());
  std::optional<std::string> value;
  ASSERT_TRUE(client.TryGet("k", &value).ok());
  EXPECT_EQ(value, "v");
  // No munged where it looks: the refusal says what was tried, as `distrun kv` does.
  o.munge_socket = {"/nonexistent/munge.socket", "DISTRUN_MUNGE_SOCKET", {}};
  distrun::Client without(o);
  Status s = without.Set("k", "w");
  EXPECT_EQ(s.code, StatusCode::kUnauthenticated);
  EXPECT_EQ(
      s.message.find("the runtime at " + server->address() +
                     " refused the job token; DISTRUN_TOKEN must be the job's (no munge credential either: "),
      0u)
      << s.message;
}

TEST_F(ClientCredentialTest, WithoutMungeProtectionOnlyTheTokenAdmits) {
  Start(/*with_munge=*/false);
  auto client = Client([this] { return Credential(server->port()); });
  Status s = client->KvSet("k", "v");
  EXPECT_EQ(s.code, StatusCode::kUnauthenticated);
  EXPECT_EQ(s.message, "no job token");
}

}  // namespace
}  // namespace distrun
