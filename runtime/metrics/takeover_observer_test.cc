#include "runtime/metrics/takeover_observer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <optional>
#include <string>

#include "runtime/io/listening_socket.h"

namespace distrun {
namespace {

using std::chrono::milliseconds;

class TakeoverObserverTest : public ::testing::Test {
 protected:
  TakeoverObserverTest() : service_(Config()) {}
  static ServiceConfig Config() {
    ServiceConfig c;
    c.num_nodes = 1;
    c.run_id = "run-9";
    return c;
  }
  static ObserveConfig At(const std::string& host, int port) {
    ObserveConfig c;
    c.host = host;
    c.port = port;
    return c;
  }
  // What the hooks said, and when the address was served.
  TakeoverObserver::Hooks Recording() {
    TakeoverObserver::Hooks h;
    h.served = [this](const std::string& url) { served_.set_value(url); };
    h.waiting = [this](const std::string& why) {
      ++waits_;
      waiting_ = why;
    };
    h.given_up = [this](const std::string& why) { given_up_ = why; };
    return h;
  }
  CoordinationService service_;
  std::promise<std::string> served_;
  int waits_ = 0;
  std::string waiting_;
  std::optional<std::string> given_up_;
};

TEST_F(TakeoverObserverTest, AFreePortIsServedAtOnce) {
  const int port = ListeningSocket::Open("127.0.0.1", 0).port();  // free again once closed
  TakeoverObserver observer(service_, At("127.0.0.1", port), "127.0.0.1", Recording(), milliseconds(10));
  EXPECT_TRUE(observer.serving());
  EXPECT_EQ(served_.get_future().get(), "http://127.0.0.1:" + std::to_string(port) + "/");
  EXPECT_EQ(waits_, 0);
}

TEST_F(TakeoverObserverTest, APortStillHeldIsServedOnceTheOldHolderLetsGo) {
  auto old_coordinator = std::make_unique<ListeningSocket>(ListeningSocket::Open("127.0.0.1", 0));
  const int port = old_coordinator->port();
  std::future<std::string> served = served_.get_future();
  TakeoverObserver observer(service_, At("127.0.0.1", port), "127.0.0.1", Recording(), milliseconds(10));
  EXPECT_FALSE(observer.serving());
  EXPECT_EQ(served.wait_for(milliseconds(100)), std::future_status::timeout);  // tried several times
  old_coordinator.reset();
  EXPECT_EQ(served.get(), "http://127.0.0.1:" + std::to_string(port) + "/");
  EXPECT_TRUE(observer.serving());
  EXPECT_EQ(waits_, 1);  // said once, however many tries
  EXPECT_NE(waiting_.find("in use"), std::string::npos) << waiting_;
  EXPECT_FALSE(given_up_);
}

TEST_F(TakeoverObserverTest, NodeZerosOwnAddressIsServedOnThisHostsAtTheSamePort) {
  const int port = ListeningSocket::Open("127.0.0.1", 0).port();
  // 192.0.2.1 (TEST-NET-1) is no address of this host.
  TakeoverObserver observer(service_, At("192.0.2.1", port), "127.0.0.1", Recording(), milliseconds(10));
  EXPECT_EQ(served_.get_future().get(), "http://127.0.0.1:" + std::to_string(port) + "/");
  EXPECT_FALSE(given_up_);
}

TEST_F(TakeoverObserverTest, WhatCannotBeServedHereIsGivenUpInOneWarning) {
  TakeoverObserver observer(service_, At("192.0.2.1", 0), "192.0.2.1", Recording(), milliseconds(10));
  EXPECT_FALSE(observer.serving());
  ASSERT_TRUE(given_up_);
  EXPECT_NE(given_up_->find("192.0.2.1"), std::string::npos) << *given_up_;
  EXPECT_EQ(waits_, 0);
}

TEST_F(TakeoverObserverTest, StoppingWhileWaitingEndsTheTries) {
  ListeningSocket held = ListeningSocket::Open("127.0.0.1", 0);
  // Its next try would come in an hour: the destructor must not wait for it (a hang fails the test).
  TakeoverObserver observer(service_, At("127.0.0.1", held.port()), "127.0.0.1", Recording(),
                            std::chrono::hours(1));
  EXPECT_EQ(waits_, 1);
  EXPECT_FALSE(observer.serving());
}

}  // namespace
}  // namespace distrun
