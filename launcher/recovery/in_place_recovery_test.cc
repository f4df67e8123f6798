#include "launcher/recovery/in_place_recovery.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <sstream>

namespace distrun {
namespace {

using namespace std::chrono_literals;
using Clock = InPlaceRecovery::Clock;

// What the recovery asked for, in order: "send 0 changed 1", "restart 1", "join 1 fresh 0,1".
class FakeActions : public RecoveryActions {
 public:
  bool Send(size_t slot, const WorkerMessage& m) override {
    if (!connected.contains(slot)) return false;
    std::string line = "send " + std::to_string(slot) + " " + m.name;
    if (const std::string* g = m.Find("generation")) line += " " + *g;
    if (m.name == "world") line += " new " + *m.Find("new");
    done.push_back(line);
    return true;
  }
  void Restart(size_t slot, const std::string& why) override {
    done.push_back("restart " + std::to_string(slot));
    reasons.push_back(why);
    connected.erase(slot);
    if (recovery) recovery->Started(slot, 900 + static_cast<pid_t>(slot), static_cast<int>(slot), now);
  }
  void Join(int generation, const std::vector<int>& fresh) override {
    done.push_back("join " + std::to_string(generation) + " fresh " + FormatRanks(fresh));
  }
  std::vector<std::string> Take() { return std::exchange(done, {}); }

  std::set<size_t> connected;
  std::vector<std::string> done;
  std::vector<std::string> reasons;
  InPlaceRecovery* recovery = nullptr;
  Clock::time_point now{};
};

class InPlaceRecoveryTest : public ::testing::Test {
 protected:
  InPlaceRecoveryTest()
      : log_(
            std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::ostream_sink_mt>(out_))),
        recovery_(3, 2000ms, actions_, log_) {
    log_->set_level(spdlog::level::debug);
    actions_.recovery = &recovery_;
    for (size_t i = 0; i < 3; ++i)
      recovery_.Started(i, 100 + static_cast<pid_t>(i), static_cast<int>(i), now_);
  }

  static std::vector<WorldMessage> Worlds(int generation, int count) {
    std::vector<WorldMessage> worlds(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) {
      worlds[static_cast<size_t>(i)].generation = generation;
      worlds[static_cast<size_t>(i)].rank = i;
      worlds[static_cast<size_t>(i)].world_size = count;
    }
    return worlds;
  }
  void Hello(size_t slot) {
    actions_.connected.insert(slot);
    recovery_.OnMessage(slot, ToMessage(HelloMessage{1, 100 + static_cast<int64_t>(slot), -1}), now_);
  }
  // This node is a spare whose slots 0 and 1 said hello and whose slot 2 stays silent (still importing);
  // generation 1 seats it.
  void SeatSpareWithSlot2Silent() {
    recovery_.Handout(0, {}, now_);
    Hello(0);
    Hello(1);
    recovery_.Change(1, now_);
    recovery_.Handout(1, Worlds(1, 3), now_);
  }
  // Every worker says hello and holds generation 0's world.
  void Running() {
    recovery_.Handout(0, Worlds(0, 3), now_);
    for (size_t i = 0; i < 3; ++i) Hello(i);
    actions_.Take();
  }

  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> log_;
  FakeActions actions_;
  Clock::time_point now_{};
  InPlaceRecovery recovery_;
};

TEST_F(InPlaceRecoveryTest, AWorkerGetsTheRunningWorldWhenItSaysHello) {
  recovery_.Handout(0, Worlds(0, 3), now_);
  EXPECT_TRUE(actions_.Take().empty());  // nobody connected yet
  Hello(1);
  EXPECT_EQ(actions_.Take(), std::vector<std::string>{"send 1 world 0 new 1"});
}

TEST_F(InPlaceRecoveryTest, AChangeIsJoinedOnceEveryWorkerIsReady) {
  Running();
  now_ += 10ms;
  recovery_.Change(1, now_);
  EXPECT_EQ(actions_.Take(),
            (std::vector<std::string>{"send 0 changed 1", "send 1 changed 1", "send 2 changed 1"}));
  recovery_.OnMessage(0, GenerationMessage("ready", 1), now_);
  recovery_.OnMessage(2, GenerationMessage("ready", 1), now_);
  EXPECT_TRUE(actions_.Take().empty());
  recovery_.OnMessage(1, GenerationMessage("ready", 1), now_);
  EXPECT_EQ(actions_.Take(), std::vector<std::string>{"join 1 fresh "});
  EXPECT_TRUE(recovery_.joining());
  // The world comes: every survivor gets it, none is new.
  recovery_.Handout(1, Worlds(1, 3), now_);
  EXPECT_EQ(actions_.Take(), (std::vector<std::string>{"send 0 world 1 new 0", "send 1 world 1 new 0",
                                                       "send 2 world 1 new 0"}));
  EXPECT_EQ(recovery_.generation(), 1);
  EXPECT_FALSE(recovery_.changing());
  now_ += 5ms;
  for (size_t i = 0; i < 3; ++i) recovery_.OnMessage(i, GenerationMessage("up", 1), now_);
  EXPECT_NE(out_.str().find("generation 1: recovered in place"), std::string::npos) << out_.str();
  // The first steps: each slot's first progress report after the handout.
  EXPECT_TRUE(recovery_.WatchingFirstSteps());
  const int64_t t =
      std::chrono::duration_cast<std::chrono::nanoseconds>((now_ + 7ms).time_since_epoch()).count();
  recovery_.Progress({{1, t}, {1, t}, {0, 0}});
  EXPECT_TRUE(recovery_.WatchingFirstSteps());
  recovery_.Progress({{1, t}, {1, t}, {1, t + 3'000'000}});
  EXPECT_FALSE(recovery_.WatchingFirstSteps());
  EXPECT_EQ(recovery_.Last(), (NodeRecovery{1, 0, 0, 0, 5, 15}));  // from the notice at 10 ms
}

TEST_F(InPlaceRecoveryTest, AnOlderOrRepeatedNoticeChangesNothing) {
  Running();
  recovery_.Change(1, now_);
  actions_.Take();
  recovery_.Change(1, now_);
  recovery_.Change(0, now_);
  EXPECT_TRUE(actions_.Take().empty());
  // A newer one while the first forms: told again, and joined for the newer one only.
  recovery_.Change(2, now_);
  EXPECT_EQ(actions_.Take().size(), 3u);
  for (size_t i = 0; i < 3; ++i) recovery_.OnMessage(i, GenerationMessage("ready", 1), now_);
  EXPECT_TRUE(actions_.Take().empty());
  for (size_t i = 0; i < 3; ++i) recovery_.OnMessage(i, GenerationMessage("ready", 2), now_);
  EXPECT_EQ(actions_.Take(), std::vector<std::string>{"join 2 fresh "});
}

TEST_F(InPlaceRecoveryTest, AFailedWorkerStartedAgainJoinsAsNew) {
  Running();
  recovery_.Exited(1);
  recovery_.Started(1, 201, 1, now_);  // the supervisor started it again
  Hello(1);  // before the job's restart: it waits for the next world, not the one its end broke
  EXPECT_TRUE(actions_.Take().empty());
  actions_.connected.erase(1);
  recovery_.Disconnected(1);
  recovery_.Change(1, now_);
  EXPECT_EQ(actions_.Take(), (std::vector<std::string>{"send 0 changed 1", "send 2 changed 1"}));
  recovery_.OnMessage(0, GenerationMessage("ready", 1), now_);
  recovery_.OnMessage(2, GenerationMessage("ready", 1), now_);
  EXPECT_EQ(actions_.Take(), std::vector<std::string>{"join 1 fresh 1"});
  // It says hello while the join runs: it waits for that world, then gets it as new.
  Hello(1);
  EXPECT_TRUE(actions_.Take().empty());
  recovery_.Handout(1, Worlds(1, 3), now_);
  EXPECT_EQ(actions_.Take(), (std::vector<std::string>{"send 0 world 1 new 0", "send 1 world 1 new 1",
                                                       "send 2 world 1 new 0"}));
}

TEST_F(InPlaceRecoveryTest, AWorkerThatMissesTheDeadlineIsStartedAgain) {
  Running();
  recovery_.Change(1, now_);
  actions_.Take();
  recovery_.OnMessage(0, GenerationMessage("ready", 1), now_);
  recovery_.OnMessage(1, GenerationMessage("ready", 1), now_);
  EXPECT_EQ(recovery_.NextDeadline(), now_ + 2000ms);
  actions_.now = now_ + 1999ms;
  recovery_.Tick(actions_.now);
  EXPECT_TRUE(actions_.Take().empty());
  actions_.now = now_ + 2000ms;
  recovery_.Tick(actions_.now);
  EXPECT_EQ(actions_.Take(), (std::vector<std::string>{"restart 2", "join 1 fresh 2"}));
  EXPECT_NE(actions_.reasons.at(0).find("rank 2 (pid 102) did not reach generation 1 within 2s "
                                        "(--recovery-timeout): it did not call distrun.torch.recover()"),
            std::string::npos)
      << actions_.reasons.at(0);
  EXPECT_FALSE(recovery_.NextDeadline());
}

TEST_F(InPlaceRecoveryTest, AWorkerThatNeverSpokeIsStartedAgainAtAChange) {
  recovery_.Handout(0, Worlds(0, 3), now_);
  Hello(0);
  Hello(1);  // slot 2 never connects: a program that does not use distrun.torch
  actions_.Take();
  recovery_.Change(1, now_);
  EXPECT_EQ(actions_.Take(), (std::vector<std::string>{"send 0 changed 1", "send 1 changed 1", "restart 2"}));
  EXPECT_NE(actions_.reasons.at(0).find("never spoke to distrun's worker channel"), std::string::npos);
}

TEST_F(InPlaceRecoveryTest, AStartingWorkerIsNotTakenForAMuteOne) {
  Running();
  recovery_.Exited(2);
  recovery_.Started(2, 202, 2, now_);  // still importing when the next change comes
  recovery_.Change(1, now_);
  EXPECT_EQ(actions_.Take(), (std::vector<std::string>{"send 0 changed 1", "send 1 changed 1"}));
}

TEST_F(InPlaceRecoveryTest, ASparesWorkersWaitUntilAWorldSeatsThem) {
  recovery_.Handout(0, {}, now_);
  for (size_t i = 0; i < 3; ++i) Hello(i);
  EXPECT_TRUE(actions_.Take().empty());
  recovery_.Change(1, now_);  // new processes: ready by being new
  EXPECT_EQ(actions_.Take(), std::vector<std::string>{"join 1 fresh 0-2"});
  recovery_.Handout(1, Worlds(1, 3), now_);
  EXPECT_EQ(actions_.Take(), (std::vector<std::string>{"send 0 world 1 new 1", "send 1 world 1 new 1",
                                                       "send 2 world 1 new 1"}));
}

TEST_F(InPlaceRecoveryTest, ASparesSilentWorkerKeepsImportingThroughTheChangeThatSeatsIt) {
  recovery_.Handout(0, {}, now_);
  Hello(0);
  Hello(1);  // slot 2 is still importing torch when the spare is called on
  actions_.Take();
  recovery_.Change(1, now_);
  EXPECT_EQ(actions_.Take(), std::vector<std::string>{"join 1 fresh 0-2"});
  recovery_.Handout(1, Worlds(1, 3), now_);
  EXPECT_EQ(actions_.Take(), (std::vector<std::string>{"send 0 world 1 new 1", "send 1 world 1 new 1"}));
  EXPECT_EQ(recovery_.NextDeadline(), now_ + 2000ms);
  recovery_.Tick(now_ + 1999ms);
  Hello(2);  // its imports done: the world it was seated in
  EXPECT_EQ(actions_.Take(), std::vector<std::string>{"send 2 world 1 new 1"});
  recovery_.Tick(now_ + 2001ms);
  EXPECT_TRUE(actions_.Take().empty());
  EXPECT_FALSE(recovery_.NextDeadline());
}

TEST_F(InPlaceRecoveryTest, ASeatedSparesWorkerThatNeverSpeaksIsStartedAgainAfterTheTimeout) {
  SeatSpareWithSlot2Silent();
  actions_.Take();
  recovery_.Tick(now_ + 1999ms);
  EXPECT_TRUE(actions_.Take().empty());
  actions_.now = now_ + 2000ms;
  recovery_.Tick(now_ + 2000ms);
  EXPECT_EQ(actions_.Take(), std::vector<std::string>{"restart 2"});
  EXPECT_NE(actions_.reasons.at(0).find("never spoke to distrun's worker channel within 2s"),
            std::string::npos)
      << actions_.reasons.at(0);
  EXPECT_FALSE(recovery_.NextDeadline());
  Hello(2);  // the new process already runs with the world's variables, and takes the world itself
  EXPECT_EQ(actions_.Take(), std::vector<std::string>{"send 2 world 1 new 1"});
}

TEST_F(InPlaceRecoveryTest, ASpareStillSilentAtALaterChangeWaitsForTheNextHandout) {
  SeatSpareWithSlot2Silent();
  Hello(0);  // connected already: no second world
  actions_.Take();
  recovery_.Change(2, now_ + 500ms);  // before slot 2's hello deadline: no restart, the deadline moves
  EXPECT_EQ(actions_.Take(), (std::vector<std::string>{"send 0 changed 2", "send 1 changed 2"}));
  EXPECT_EQ(recovery_.NextDeadline(), now_ + 2500ms);  // the change's own
}

TEST_F(InPlaceRecoveryTest, AWorkerMessageOfTheWrongKindIsRefused) {
  Running();
  EXPECT_THROW(recovery_.OnMessage(0, GenerationMessage("world", 1), now_), WorkerMessageError);
  EXPECT_THROW(recovery_.OnMessage(0, WorkerMessage{"ready", {{"generation", "x"}}}, now_),
               WorkerMessageError);
}

}  // namespace
}  // namespace distrun
