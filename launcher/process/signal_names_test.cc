#include "launcher/process/signal_names.h"

#include <gtest/gtest.h>

#include <csignal>

#include "detect/errors.h"

namespace distrun {
namespace {

TEST(SupervisorSignalNames, NamesOfNumbers) {
  EXPECT_EQ(SignalName(SIGSEGV), "SIGSEGV");
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM");
  EXPECT_EQ(SignalName(SIGUSR1), "SIGUSR1");
  EXPECT_EQ(SignalName(SIGKILL), "SIGKILL");
  EXPECT_EQ(SignalName(SIGRTMIN), "SIGRTMIN");
  EXPECT_EQ(SignalName(SIGRTMIN + 3), "SIGRTMIN+3");
  EXPECT_EQ(SignalName(0), "SIG0");
}

TEST(SupervisorSignalNames, ParseAcceptsNamesWithOrWithoutSigAndNumbers) {
  EXPECT_EQ(ParseSignal("USR1"), SIGUSR1);
  EXPECT_EQ(ParseSignal("SIGUSR2"), SIGUSR2);
  EXPECT_EQ(ParseSignal("term"), SIGTERM);
  EXPECT_EQ(ParseSignal("sigint"), SIGINT);
  EXPECT_EQ(ParseSignal("10"), 10);
  EXPECT_EQ(ParseSignal("RTMIN+2"), SIGRTMIN + 2);
  EXPECT_FALSE(ParseSignal(""));
  EXPECT_FALSE(ParseSignal("USR3"));
  EXPECT_FALSE(ParseSignal("0"));
  EXPECT_FALSE(ParseSignal("999"));
  EXPECT_FALSE(ParseSignal("1x"));
}

TEST(SupervisorSignalNames, RoundTrip) {
  for (int sig = 1; sig < SIGRTMIN; ++sig) {
    if (sig == 32 || sig == 33) continue;
    EXPECT_EQ(ParseSignal(SignalName(sig)), sig) << SignalName(sig);
  }
}

TEST(SupervisorSignalNames, ForwardList) {
  EXPECT_EQ(ParseForwardSignals("--forward-signals", "USR1,USR2"), (std::vector<int>{SIGUSR1, SIGUSR2}));
  EXPECT_EQ(ParseForwardSignals("--forward-signals", "usr2, SIGWINCH,USR2"),
            (std::vector<int>{SIGUSR2, SIGWINCH}));
  EXPECT_TRUE(ParseForwardSignals("--forward-signals", "none").empty());
  EXPECT_THROW(ParseForwardSignals("--forward-signals", "USR1,BOGUS"), UsageError);
  EXPECT_THROW(ParseForwardSignals("--forward-signals", "KILL"), UsageError);
  EXPECT_THROW(ParseForwardSignals("--forward-signals", "CHLD"), UsageError);
  EXPECT_THROW(ParseForwardSignals("--forward-signals", "SEGV"), UsageError);
  try {
    ParseForwardSignals("DISTRUN_FORWARD_SIGNALS", "USR1,,");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("DISTRUN_FORWARD_SIGNALS='USR1,,'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace distrun
