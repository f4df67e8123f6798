#include "launcher/supervise/rendezvous_thread.h"

#include <sys/eventfd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace distrun {

RendezvousThread::RendezvousThread(JobLink& link, int round, JobAssignment provisional,
                                   std::vector<int> fresh_local)
    : round_(round), done_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (!done_) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
  thread_ = std::thread([this, &link, provisional = std::move(provisional), fresh = std::move(fresh_local)] {
    try {
      result_ = link.Rendezvous(round_, provisional, fresh);
    } catch (...) {
      error_ = std::current_exception();
    }
    const uint64_t one = 1;
    ssize_t ignored = ::write(done_.get(), &one, sizeof(one));
    (void)ignored;
  });
}

RendezvousThread::~RendezvousThread() {
  if (thread_.joinable()) thread_.join();
}

JobAssignment RendezvousThread::Take() {
  if (thread_.joinable()) thread_.join();
  if (error_) std::rethrow_exception(error_);
  return *result_;
}

}  // namespace distrun
