// Nodes whose ranks the coordinator gives (NodeJoin::claims_seat: torchrun's c10d rendezvous, distrun
// --node-rank auto): seats in the order they come, the job's node count as the limit, an elastic job's
// late nodes as arrivals.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runtime/service/service.h"
#include "runtime/service/service_test_streams.h"

namespace distrun {
namespace {

using namespace std::chrono_literals;
using testing::Joined;
using testing::Stream;

class SeatsTest : public ::testing::Test {
 protected:
  void Make(int nodes, std::optional<ElasticRange> elastic = std::nullopt) {
    ServiceConfig c;
    c.num_nodes = nodes;
    c.elastic = elastic;
    c.run_id = "run1";
    c.initialization_timeout = 60s;
    c.heartbeat_timeout = 10s;
    service_ = std::make_unique<CoordinationService>(c);
    nodes_ = nodes;
  }

  NodeJoin Claim(const std::string& host) const {
    NodeJoin j;
    j.node_rank = -1;
    j.num_nodes = nodes_;
    j.host = host;
    j.local_workers = 2;
    j.run_id = "run1";
    j.claims_seat = true;
    return j;
  }

  struct Node {
    Status admitted;
    int rank = -1;
    Stream stream;
    std::shared_ptr<Joined> joined = std::make_shared<Joined>();
  };

  Stream Attach(int node) {
    Stream s;
    Status st = service_->AttachAgent(
        node, [ev = s.events](const JobEvent& e) { ev->push_back(e); }, &s.id);
    EXPECT_TRUE(st.ok()) << st.message;
    return s;
  }

  void JoinAs(Node& n, NodeJoin j) {
    j.node_rank = n.rank;
    service_->Join(j, [r = n.joined](const Status& s, const NodeAssignment& a) {
      r->status = s;
      r->assignment = a;
    });
  }

  // The node that serves: node 0, whose rank it knows.
  Node Host() {
    Node n;
    n.rank = 0;
    n.stream = Attach(0);
    NodeJoin j = Claim("host-0");
    j.claims_seat = false;
    JoinAs(n, j);
    return n;
  }

  // As the agent channel does: admitted (given its rank), attached, joined.
  Node Come(const NodeJoin& j) {
    Node n;
    n.admitted = service_->Admit(j, &n.rank);
    if (!n.admitted.ok()) return n;
    n.stream = Attach(n.rank);
    JoinAs(n, j);
    return n;
  }
  Node Come(const std::string& host) { return Come(Claim(host)); }

  std::unique_ptr<CoordinationService> service_;
  int nodes_ = 0;
};

TEST_F(SeatsTest, NodesTakeTheFreeSeatsInTheOrderTheyComeAndTheJobStartsWithAll) {
  Make(3);
  Node b = Come("host-b");  // before the host joined: seat 1 all the same
  Node host = Host();
  Node c = Come("host-c");
  ASSERT_TRUE(b.admitted.ok()) << b.admitted.message;
  ASSERT_TRUE(c.admitted.ok()) << c.admitted.message;
  EXPECT_EQ(b.rank, 1);
  EXPECT_EQ(c.rank, 2);
  for (const Node* n : {&host, &b, &c}) {
    ASSERT_TRUE(n->joined->status) << n->rank;
    EXPECT_TRUE(n->joined->status->ok()) << n->joined->status->message;
    EXPECT_EQ(n->joined->assignment.node_rank, n->rank);
    EXPECT_EQ(n->joined->assignment.rank_offset, 2 * n->rank);
    EXPECT_EQ(n->joined->assignment.num_processes, 6);
  }
  EXPECT_EQ(service_->State(), JobState::kRunning);
}

TEST_F(SeatsTest, ANodeBeyondTheJobsNodeCountIsRefusedNamingIt) {
  Make(2);
  Node b = Come("host-b");
  ASSERT_TRUE(b.admitted.ok());
  Node extra = Come("host-x");
  EXPECT_EQ(extra.admitted.code, StatusCode::kResourceExhausted);
  EXPECT_NE(extra.admitted.message.find("host-x"), std::string::npos) << extra.admitted.message;
  EXPECT_NE(extra.admitted.message.find("2 nodes (--nnodes 2) are all there"), std::string::npos)
      << extra.admitted.message;
  Node host = Host();
  ASSERT_TRUE(host.joined->status && host.joined->status->ok());
  Node late = Come("host-y");  // the job runs: no node after its start
  EXPECT_NE(late.admitted.message.find("has started"), std::string::npos) << late.admitted.message;
}

TEST_F(SeatsTest, ANodeThatExpectsAnotherNodeCountIsRefused) {
  Make(3);
  NodeJoin j = Claim("host-b");
  j.num_nodes = 4;
  Node b = Come(j);
  EXPECT_EQ(b.admitted.code, StatusCode::kInvalidArgument);
  EXPECT_NE(b.admitted.message.find("expects 4 nodes, but the job has 3"), std::string::npos)
      << b.admitted.message;
}

TEST_F(SeatsTest, AnElasticJobTakesNodesBeyondItsStartAsArrivals) {
  Make(1, ElasticRange{1, 3});
  Node host = Host();  // a job of one node starts at once
  ASSERT_TRUE(host.joined->status && host.joined->status->ok());
  Node b = Come("host-b");
  ASSERT_TRUE(b.admitted.ok()) << b.admitted.message;
  EXPECT_EQ(b.rank, 1);
  ASSERT_TRUE(b.joined->status) << "an arrival's join is answered at once while an epoch runs";
  EXPECT_TRUE(b.joined->status->ok()) << b.joined->status->message;
  EXPECT_TRUE(b.joined->assignment.spare);  // until the scale-up policy seats it
  NodeJoin other_run = Claim("host-c");
  other_run.run_id = "";
  EXPECT_EQ(Come(other_run).admitted.code, StatusCode::kInvalidArgument);  // a late node names the run
}

}  // namespace
}  // namespace distrun
