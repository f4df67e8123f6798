#include "launcher/job/lazy_link.h"

#include <poll.h>
#include <spdlog/logger.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <stdexcept>
#include <utility>

#include "detect/parse.h"
#include "launcher/job/job_protection.h"

namespace distrun {
namespace {

bool Watch(int epoll_fd, int fd) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  return ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) == 0;
}

void Unwatch(int epoll_fd, int fd) { ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr); }

}  // namespace

bool LazyLink::MayFit(const Options& options) {
  // --metrics-address: the job's page and metrics are served from the start.
  return !options.join && !options.elastic && !options.node_check && !options.metrics_address;
}

bool LazyLink::Fits(const Plan& plan, const Options& options) {
  return MayFit(options) && plan.layout.units == 1 && plan.layout.unit_index == 0 && SingleHost(plan);
}

std::unique_ptr<LazyLink> LazyLink::Hold(const Plan& plan, const Options& options, const Environment& env,
                                         std::shared_ptr<spdlog::logger> log, Starter start) {
  // The token the runtime would make (a single-host job's protection is its loopback port and this token).
  std::string token = ResolveJobToken(plan, options, env).value;
  int port = 0;
  try {
    port = ParseHostPort("coordinator address", plan.assignment.coordinator_address).port.value_or(0);
  } catch (const std::exception&) {
  }
  if (port <= 0) return nullptr;
  ListeningSocket held;
  try {
    held = ListeningSocket::Open(LoopbackHost(plan), port);
  } catch (const std::exception& e) {
    log->debug("cannot hold the runtime's port {} ({}); starting the runtime now", port, e.what());
    return nullptr;
  }
  std::unique_ptr<LazyLink> link(new LazyLink(std::move(held), FormatHostPort(LoopbackHost(plan), port),
                                              std::move(token), std::move(log), std::move(start)));
  if (!link->events_ || !link->decided_ || !Watch(link->events_.get(), link->decided_.get()) ||
      !Watch(link->events_.get(), link->port_.fd())) {
    return nullptr;  // out of descriptors: the runtime's own start says so, if it cannot either
  }
  link->log_->debug("holding the runtime's port {}; the runtime starts when a worker or this node needs it",
                    link->address_);
  return link;
}

LazyLink::LazyLink(ListeningSocket port, std::string address, std::string token,
                   std::shared_ptr<spdlog::logger> log, Starter start)
    : port_(std::move(port)),
      address_(std::move(address)),
      token_(std::move(token)),
      log_(std::move(log)),
      start_(std::move(start)),
      events_(::epoll_create1(EPOLL_CLOEXEC)),
      decided_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

JobLink& LazyLink::Runtime(const char* why) {
  if (runtime_) return *runtime_;
  log_->debug("starting the runtime on {}: {}", address_, why);
  Unwatch(events_.get(), port_.fd());
  std::unique_ptr<JobLink> runtime = start_(HeldPort{port_.fd(), token_});
  port_ = ListeningSocket();  // the runtime listens on a descriptor of its own
  if (!Watch(events_.get(), runtime->event_fd())) {
    throw std::runtime_error("cannot watch the runtime's events (epoll_ctl failed)");
  }
  runtime_ = std::move(runtime);
  if (answered_round0_) {
    // The workers run with this node's answer; the runtime's must be the same.
    if (runtime_->Rendezvous(0, answered_) != answered_) {
      throw std::logic_error("the runtime's rendezvous differs from the one this node's workers were given");
    }
  }
  return *runtime_;
}

bool LazyLink::ConnectionWaiting() const {
  if (!port_.valid()) return false;
  pollfd p{port_.fd(), POLLIN, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & POLLIN) != 0;
}

JobAssignment LazyLink::Rendezvous(int round, const JobAssignment& provisional,
                                   const std::vector<int>& fresh_local) {
  if (round != 0 || runtime_ || answered_round0_) {
    return Runtime("a rendezvous after a restart").Rendezvous(round, provisional, fresh_local);
  }
  // One node: every rank is this node's, on the port held here; round 0 is epoch 0.
  answered_ = provisional;
  answered_.coordinator_address = address_;
  answered_.restart_count = 0;
  answered_round0_ = true;
  return answered_;
}

void LazyLink::CancelRendezvous() {
  if (runtime_) runtime_->CancelRendezvous();
}

bool LazyLink::ReportFailure(const FailedWorker& failure) {
  return Runtime("a worker failed").ReportFailure(failure);
}

void LazyLink::ReportSuccess() {
  if (runtime_) return runtime_->ReportSuccess();
  // What the service decides for a one-node job whose workers all exited 0.
  complete_ = true;
  if (port_.valid()) Unwatch(events_.get(), port_.fd());
  JobDecision d;
  d.kind = JobDecision::Kind::kComplete;
  decided_here_.push_back(d);
  const uint64_t one = 1;
  if (::write(decided_.get(), &one, sizeof one) != sizeof one) {
    throw std::runtime_error("cannot announce the job's completion (eventfd write failed)");
  }
}

void LazyLink::Leave(int round, const std::string& reason) {
  Runtime("this node leaves the job").Leave(round, reason);
}

void LazyLink::ReportProgress(const NodeProgress& progress) {
  Runtime("the hang watch's first progress report").ReportProgress(progress);
}

void LazyLink::SendStacks(const StacksReply& reply) { Runtime("workers' stacks").SendStacks(reply); }

std::vector<JobDecision> LazyLink::TakeDecisions() {
  if (!runtime_ && !complete_ && ConnectionWaiting()) Runtime("a connection to its port");
  std::vector<JobDecision> out = std::exchange(decided_here_, {});
  uint64_t count = 0;
  (void)!::read(decided_.get(), &count, sizeof count);  // empties it (non-blocking)
  if (runtime_) {
    for (JobDecision& d : runtime_->TakeDecisions()) out.push_back(std::move(d));
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> LazyLink::WorkerSecrets() const {
  if (runtime_) return runtime_->WorkerSecrets();
  return {{"DISTRUN_TOKEN", token_}};
}

void LazyLink::Finish() {
  if (runtime_) runtime_->Finish();
}

}  // namespace distrun
