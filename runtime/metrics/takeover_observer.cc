#include "runtime/metrics/takeover_observer.h"

#include <cerrno>
#include <utility>

#include "detect/parse.h"
#include "runtime/io/listening_socket.h"

namespace distrun {

TakeoverObserver::TakeoverObserver(CoordinationService& service, ObserveConfig config, std::string own_host,
                                   Hooks hooks, std::chrono::milliseconds retry)
    : service_(service),
      config_(std::move(config)),
      own_host_(std::move(own_host)),
      hooks_(std::move(hooks)),
      retry_(retry) {
  if (!Try()) retry_thread_ = std::thread([this] { RetryLoop(); });
}

TakeoverObserver::~TakeoverObserver() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (retry_thread_.joinable()) retry_thread_.join();
  server_.reset();
}

bool TakeoverObserver::serving() const {
  std::lock_guard lock(mu_);
  return server_ != nullptr;
}

bool TakeoverObserver::Try() {
  std::unique_ptr<ObserveServer> server;
  try {
    server = std::make_unique<ObserveServer>(service_, config_);
  } catch (const ListenError& e) {
    if (e.code() == EADDRINUSE) {
      if (!std::exchange(told_waiting_, true) && hooks_.waiting) hooks_.waiting(e.what());
      return false;
    }
    if (own_host_.empty() || config_.host == own_host_) {
      if (hooks_.given_up) hooks_.given_up(e.what());
      return true;
    }
    // Node 0's own address: this host's instead, and the same port (tried again at once, as itself).
    config_.host = own_host_;
    return Try();
  } catch (const std::exception& e) {
    if (hooks_.given_up) hooks_.given_up(e.what());
    return true;
  }
  const std::string url = server->url();
  {
    std::lock_guard lock(mu_);
    server_ = std::move(server);
  }
  if (hooks_.served) hooks_.served(url);
  return true;
}

void TakeoverObserver::RetryLoop() {
  while (true) {
    {
      std::unique_lock lock(mu_);
      if (wake_.wait_for(lock, retry_, [this] { return stopping_; })) return;
    }
    if (Try()) return;
  }
}

}  // namespace distrun
