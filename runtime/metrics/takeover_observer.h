#pragma once
// The job's page and metrics from the standby that took the job over, at the address node 0 served them
// (--metrics-address). Two things stand in the way there, and neither is the user's mistake:
// - the old coordinator may hold the port a moment longer: a dying process's connections close (which is
//   how the others learn of its end and turn to the standby) before its last sockets do, and a paused one
//   holds it until it wakes and fences itself. A port in use is tried again every `retry` until it is free;
// - a HOST that is node 0's own address is not this host's: then this host's own address in the job
//   (`own_host`, where the workers reach the service) is served instead, at the same port.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/metrics/observe_server.h"

namespace distrun {

class TakeoverObserver {
 public:
  struct Hooks {
    std::function<void(const std::string& url)> served;    // bound: the address, once
    std::function<void(const std::string& why)> waiting;   // the port is in use: trying again (once)
    std::function<void(const std::string& why)> given_up;  // any other failure: nothing is served
  };
  // Tries at once on this thread; when the port is in use, again on a thread of its own. The hooks run on
  // either thread.
  TakeoverObserver(CoordinationService& service, ObserveConfig config, std::string own_host, Hooks hooks,
                   std::chrono::milliseconds retry = std::chrono::milliseconds(500));
  // Stops trying, then serving.
  ~TakeoverObserver();
  TakeoverObserver(const TakeoverObserver&) = delete;
  TakeoverObserver& operator=(const TakeoverObserver&) = delete;

  // Serving now.
  bool serving() const;

 private:
  // One try: true when it served or gave up (no need to try again).
  bool Try();
  void RetryLoop();

  CoordinationService& service_;
  ObserveConfig config_;
  const std::string own_host_;
  const Hooks hooks_;
  const std::chrono::milliseconds retry_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool told_waiting_ = false;
  std::unique_ptr<ObserveServer> server_;
  std::thread retry_thread_;  // last: it uses all of the above
};

}  // namespace distrun
