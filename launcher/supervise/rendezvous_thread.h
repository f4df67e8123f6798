#pragma once
// A rendezvous that does not stop the supervisor's loop: under --recovery in-process the workers keep
// running while their node joins the next generation, so their output, exits and signals, and the
// sentinel's pulses, must go on. The join runs on a thread of its own; fd() turns readable when it ended.

#include <exception>
#include <optional>
#include <thread>
#include <vector>

#include "launcher/job/job_link.h"
#include "launcher/process/unique_fd.h"

namespace distrun {

class RendezvousThread {
 public:
  // Calls link.Rendezvous(round, provisional, fresh_local) on a new thread. `link` outlives this object.
  RendezvousThread(JobLink& link, int round, JobAssignment provisional, std::vector<int> fresh_local);
  // Joins the thread (the rendezvous ends by itself: answered, failed, or the initialization timeout).
  ~RendezvousThread();
  RendezvousThread(const RendezvousThread&) = delete;
  RendezvousThread& operator=(const RendezvousThread&) = delete;

  int round() const { return round_; }
  int fd() const { return done_.get(); }
  // After fd() turned readable: the assignment, or what the link threw, thrown again.
  JobAssignment Take();

 private:
  int round_;
  UniqueFd done_;
  std::optional<JobAssignment> result_;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace distrun
