#include "runtime/auth/agent_identity.h"

#include <gtest/gtest.h>

namespace distrun {
namespace {

TEST(AgentIdentity, ThePayloadNamesPortNodeAndRunAndParsesBack) {
  const std::string payload = AgentIdentityPayload({29400, 3, "job-17"});
  EXPECT_EQ(payload, "distrun-agent/1 port=29400 node=3 run=job-17");
  auto parsed = ParseAgentIdentity(payload);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->port, 29400);
  EXPECT_EQ(parsed->node_rank, 3);
  EXPECT_EQ(parsed->run_id, "job-17");
  auto arriving = ParseAgentIdentity(AgentIdentityPayload({1, -1, ""}));  // an arrival that knows no run id
  ASSERT_TRUE(arriving);
  EXPECT_EQ(arriving->node_rank, -1);
  EXPECT_EQ(arriving->run_id, "");
}

TEST(AgentIdentity, OtherPayloadsAreNotAnAgents) {
  for (const char* payload :
       {"", "distrun-probe", "distrun-agent/2 port=1 node=0 run=", "distrun-agent/1 port=x node=0 run=",
        "distrun-agent/1 port=1 node=0", "distrun-agent/1 port=1 node=0 run=a b"}) {
    EXPECT_FALSE(ParseAgentIdentity(payload)) << payload;
  }
}

TEST(AgentIdentity, OnlyTheJobsUserWithACredentialForThisJobIsAdmitted) {
  AdmissionPolicy policy{1000, 29400, "job-17"};
  MungeDecoded d{AgentIdentityPayload({29400, 2, "job-17"}), 1000, 50};
  EXPECT_EQ(CheckAgentCredential(d, policy).refusal, "");
  EXPECT_EQ(CheckAgentCredential(d, policy).node_rank, 2);
  d.gid = 51;  // the group is not the user
  EXPECT_EQ(CheckAgentCredential(d, policy).refusal, "");
  d.uid = 1001;
  EXPECT_EQ(CheckAgentCredential(d, policy).refusal,
            "its munge credential is uid 1001's, not the job's user (uid 1000)");
  d.uid = 1000;
  d.payload = AgentIdentityPayload({29400, 2, ""});  // an agent that did not know the run id
  EXPECT_EQ(CheckAgentCredential(d, policy).refusal, "");
  d.payload = "something else";
  EXPECT_EQ(CheckAgentCredential(d, policy).refusal, "its munge credential was not made for a distrun agent");
}

}  // namespace
}  // namespace distrun
