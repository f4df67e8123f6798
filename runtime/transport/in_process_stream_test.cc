#include "runtime/transport/in_process_stream.h"

#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/service/service.h"
#include "runtime/transport/test_node0.h"

namespace distrun {
namespace {

// What the agent would hear: events and the stream's end, from whatever thread the service calls on.
struct Heard {
  std::mutex mu;
  std::vector<JobEvent> events;
  std::vector<Status> closed;

  std::function<void(const JobEvent&)> OnEvent() {
    return [this](const JobEvent& e) {
      std::lock_guard lock(mu);
      events.push_back(e);
    };
  }
  std::function<void(const Status&)> OnClosed() {
    return [this](const Status& s) {
      std::lock_guard lock(mu);
      closed.push_back(s);
    };
  }
  int Count(JobEvent::Kind kind) {
    std::lock_guard lock(mu);
    int n = 0;
    for (const JobEvent& e : events) n += e.kind == kind ? 1 : 0;
    return n;
  }
  std::optional<JobEvent> Last(JobEvent::Kind kind) {
    std::lock_guard lock(mu);
    for (auto it = events.rbegin(); it != events.rend(); ++it) {
      if (it->kind == kind) return *it;
    }
    return std::nullopt;
  }
};

NodeJoin Node(int rank, int nodes, int workers) {
  NodeJoin j;
  j.node_rank = rank;
  j.num_nodes = nodes;
  j.host = "host-" + std::to_string(rank);
  j.local_workers = workers;
  j.proposed_master_port = 29500;
  return j;
}

TEST(InProcessStream, AnAttachIsAnsweredAtOnceAndTheFirstJoinOfAOneNodeJobAssignsItsRanks) {
  CoordinationService service(testing::TestServiceConfig(1));
  Heard heard;
  InProcessStream stream(service, 0, heard.OnEvent(), heard.OnClosed(), Node(0, 1, 4));
  EXPECT_GE(heard.Count(JobEvent::Kind::kHeartbeat), 1);
  std::optional<JobEvent> joined = heard.Last(JobEvent::Kind::kJoined);
  ASSERT_TRUE(joined.has_value());
  EXPECT_TRUE(joined->join_status.ok()) << joined->join_status.message;
  EXPECT_EQ(joined->assignment.num_processes, 4);
  EXPECT_EQ(joined->assignment.rank_offset, 0);
  EXPECT_EQ(service.AttachedAgents(), 1u);

  const int beats = heard.Count(JobEvent::Kind::kHeartbeat);
  EXPECT_TRUE(stream.SendHeartbeat({}));
  EXPECT_EQ(heard.Count(JobEvent::Kind::kHeartbeat), beats + 1);

  // Success, unanswered as on the wire: the job's completion comes back as an event.
  EXPECT_TRUE(stream.SendSuccess(0));
  EXPECT_EQ(heard.Count(JobEvent::Kind::kComplete), 1);
  EXPECT_EQ(service.State(), JobState::kSucceeded);
}

TEST(InProcessStream, AFailureReportedInProcessIsTheRootCauseAndStopsTheJob) {
  CoordinationService service(testing::TestServiceConfig(1));
  Heard heard;
  InProcessStream stream(service, 0, heard.OnEvent(), heard.OnClosed(), Node(0, 1, 2));
  FailedWorker failure;
  failure.node_rank = 0;
  failure.process_id = 1;
  failure.exit_code = 7;
  failure.description = "exited with code 7";
  bool root_cause = false;
  Status s = stream.ReportFailure(0, failure, &root_cause);
  EXPECT_TRUE(s.ok()) << s.message;
  EXPECT_TRUE(root_cause);
  std::optional<JobEvent> stop = heard.Last(JobEvent::Kind::kStop);
  ASSERT_TRUE(stop.has_value());
  EXPECT_EQ(stop->exit_code, 7);
}

TEST(InProcessStream, ClosingEndsTheStreamOnceAndAJoinAnsweredLaterReachesNobody) {
  CoordinationService service(testing::TestServiceConfig(2));
  Heard heard;
  {
    InProcessStream stream(service, 0, heard.OnEvent(), heard.OnClosed(), Node(0, 2, 1));
    EXPECT_FALSE(heard.Last(JobEvent::Kind::kJoined).has_value());  // node 1 has not joined yet
    stream.Close();
    stream.Close();
    EXPECT_FALSE(stream.SendHeartbeat({}));
    EXPECT_FALSE(stream.SendJoin(Node(0, 2, 1)));
  }
  {
    std::lock_guard lock(heard.mu);
    ASSERT_EQ(heard.closed.size(), 1u);
    EXPECT_EQ(heard.closed[0].code, StatusCode::kCancelled);
  }
  EXPECT_EQ(service.AttachedAgents(), 0u);
  // Rendezvous completes after the stream is gone: its answer to node 0 goes nowhere.
  const size_t before = heard.events.size();
  bool answered = false;
  service.Join(Node(1, 2, 1), [&](const Status&, const NodeAssignment&) { answered = true; });
  EXPECT_TRUE(answered);
  EXPECT_EQ(heard.events.size(), before);
}

TEST(InProcessStream, ASecondStreamOfTheSameNodeIsRefusedAsOnTheWire) {
  CoordinationService service(testing::TestServiceConfig(1));
  Heard first;
  Heard second;
  InProcessStream stream(service, 0, first.OnEvent(), first.OnClosed(), std::nullopt);
  InProcessStream again(service, 0, second.OnEvent(), second.OnClosed(), std::nullopt);
  std::lock_guard lock(second.mu);
  ASSERT_EQ(second.closed.size(), 1u);
  EXPECT_EQ(second.closed[0].code, StatusCode::kAlreadyExists);
  EXPECT_TRUE(second.events.empty());
  EXPECT_FALSE(again.SendHeartbeat({}));
}

TEST(InProcessStream, AJoinForAnotherNodeClosesTheStream) {
  CoordinationService service(testing::TestServiceConfig(2));
  Heard heard;
  InProcessStream stream(service, 0, heard.OnEvent(), heard.OnClosed(), std::nullopt);
  EXPECT_FALSE(stream.SendJoin(Node(1, 2, 1)));
  std::lock_guard lock(heard.mu);
  ASSERT_EQ(heard.closed.size(), 1u);
  EXPECT_EQ(heard.closed[0].code, StatusCode::kInvalidArgument);
  EXPECT_EQ(service.AttachedAgents(), 0u);
}

}  // namespace
}  // namespace distrun
