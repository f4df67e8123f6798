#include "launcher/job/lazy_link.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "detect/detection.h"
#include "detect/parse.h"
#include "launcher/module/runtime_link.h"
#include "launcher/process/output.h"
#include "launcher/process/unique_fd.h"
#include "test_support.h"

namespace distrun {
namespace {

// A local job of two workers, planned as distrun plans it; the runtime, when it starts, is the real one.
struct LocalJob {
  Environment env = testing::MakeEnv({{"PATH", "/usr/bin:/bin"}, {"CUDA_VISIBLE_DEVICES", ""}});
  Options options;
  Plan plan;
  std::shared_ptr<spdlog::logger> log = MakeLogger("warn");
  int starts = 0;

  explicit LocalJob(RawValues flags = {}) {
    flags["nproc-per-node"] = RawValue{"2", "--nproc-per-node"};
    flags["cluster-detection-method"] = RawValue{"local", "--cluster-detection-method"};
    options = ResolveOptions(flags, env.vars, {});
    options.command = {"true"};
    Topology t = DetectTopology(env, options.topology);
    LocalLayout layout = ComputeLocalLayout(t, options, env);
    plan = MakePlan(t, layout, ProvisionalAssignment(t, layout, options), options, env);
  }
  std::unique_ptr<LazyLink> Hold() {
    return LazyLink::Hold(plan, options, env, log, [this](const HeldPort& held) -> std::unique_ptr<JobLink> {
      ++starts;
      return std::make_unique<RuntimeLink>(plan, options, env, log, "", &held);
    });
  }
  int port() const { return ParseHostPort("address", plan.assignment.coordinator_address).port.value_or(0); }
};

bool Readable(int fd, int timeout_ms = 10000) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

UniqueFd Connect(int port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

std::vector<JobDecision> AwaitDecisions(JobLink& link) {
  std::vector<JobDecision> all;
  while (all.empty() && Readable(link.event_fd())) {
    for (JobDecision& d : link.TakeDecisions()) all.push_back(std::move(d));
  }
  return all;
}

TEST(LazyLink, FitsOneDistrunOnThisHostOnly) {
  LocalJob job;
  EXPECT_TRUE(LazyLink::Fits(job.plan, job.options));
  Plan two = job.plan;
  two.layout.units = 2;
  EXPECT_FALSE(LazyLink::Fits(two, job.options));
  Options elastic = job.options;
  elastic.elastic = ElasticRange{1, 2};
  EXPECT_FALSE(LazyLink::Fits(job.plan, elastic));
  Options joining = job.options;
  joining.join = "127.0.0.1:1";
  EXPECT_FALSE(LazyLink::Fits(job.plan, joining));
  Options checked = job.options;
  checked.node_check = "true";
  EXPECT_FALSE(LazyLink::Fits(job.plan, checked));
}

TEST(LazyLink, AJobWhoseWorkersSucceedCompletesWithoutTheRuntime) {
  LocalJob job;
  std::unique_ptr<LazyLink> link = job.Hold();
  ASSERT_NE(link, nullptr);
  JobAssignment a = link->Rendezvous(0, job.plan.assignment);
  EXPECT_EQ(a, job.plan.assignment);  // the plan stands: its port is the one held
  EXPECT_EQ(a.coordinator_address, "127.0.0.1:" + std::to_string(job.port()));
  auto secrets = link->WorkerSecrets();
  ASSERT_EQ(secrets.size(), 1u);
  EXPECT_EQ(secrets[0].first, "DISTRUN_TOKEN");
  EXPECT_EQ(secrets[0].second.size(), 32u);
  EXPECT_FALSE(Readable(link->event_fd(), 0));
  link->ReportSuccess();
  std::vector<JobDecision> d = AwaitDecisions(*link);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].kind, JobDecision::Kind::kComplete);
  EXPECT_FALSE(Readable(link->event_fd(), 0));
  link->Finish();
  EXPECT_FALSE(link->started());
  EXPECT_EQ(job.starts, 0);
}

TEST(LazyLink, AConnectionStartsTheRuntimeOnTheHeldPortWithTheWorkersToken) {
  LocalJob job;
  std::unique_ptr<LazyLink> link = job.Hold();
  ASSERT_NE(link, nullptr);
  JobAssignment a = link->Rendezvous(0, job.plan.assignment);
  const std::string token = link->WorkerSecrets()[0].second;
  UniqueFd worker = Connect(job.port());  // queued by the kernel until the runtime takes the port
  ASSERT_TRUE(Readable(link->event_fd()));
  EXPECT_TRUE(link->TakeDecisions().empty());
  EXPECT_TRUE(link->started());
  EXPECT_EQ(job.starts, 1);
  // The runtime kept the workers' token and agreed with round 0's answer (Runtime() checks it).
  EXPECT_EQ(link->WorkerSecrets()[0].second, token);
  EXPECT_EQ(a.coordinator_address, "127.0.0.1:" + std::to_string(job.port()));
  // Now the runtime decides: the success is its.
  link->ReportSuccess();
  std::vector<JobDecision> d = AwaitDecisions(*link);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].kind, JobDecision::Kind::kComplete);
  link->Finish();
  EXPECT_EQ(job.starts, 1);
}

TEST(LazyLink, AFailureStartsTheRuntimeWhichStopsTheJobWithTheWorkersCode) {
  LocalJob job;
  std::unique_ptr<LazyLink> link = job.Hold();
  ASSERT_NE(link, nullptr);
  link->Rendezvous(0, job.plan.assignment);
  FailedWorker f;
  f.host = "here";
  f.process_id = 1;
  f.exit_code = 7;
  f.description = "exit code 7";
  EXPECT_TRUE(link->ReportFailure(f));
  EXPECT_TRUE(link->started());
  std::vector<JobDecision> d = AwaitDecisions(*link);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].kind, JobDecision::Kind::kStop);
  EXPECT_EQ(d[0].exit_code, 7);
}

TEST(LazyLink, TheFirstProgressReportStartsTheRuntime) {
  LocalJob job;
  std::unique_ptr<LazyLink> link = job.Hold();
  ASSERT_NE(link, nullptr);
  link->Rendezvous(0, job.plan.assignment);
  link->ReportProgress(NodeProgress{});
  EXPECT_TRUE(link->started());
  link->ReportProgress(NodeProgress{});
  EXPECT_EQ(job.starts, 1);
}

TEST(LazyLink, APortTakenSinceThePlanIsNotHeld) {
  LocalJob job;
  ListeningSocket other = ListeningSocket::Open("127.0.0.1", job.port());
  EXPECT_EQ(job.Hold(), nullptr);  // the caller starts the runtime at once, on a port of its own
}

}  // namespace
}  // namespace distrun
