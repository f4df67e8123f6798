#include "runtime/torch_store/torch_store.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/torch_store/torch_store_test_requests.h"

namespace distrun {
namespace {

using Op = TorchStoreOp;

std::string I64(int64_t value) {
  std::string out;
  AppendTorchStoreInt64(value, &out);
  return out;
}
std::string Bytes(const std::string& s) {
  std::string out;
  AppendTorchStoreBytes(s, &out);
  return out;
}
std::string U8(uint8_t value) { return std::string(1, static_cast<char>(value)); }

using testing::Req;

class TorchStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (uint64_t c : {kA, kB, kC}) store.Connected(c);
  }

  // Every reply of the request, as (connection, bytes); fails on a refusal.
  std::vector<std::pair<uint64_t, std::string>> Do(uint64_t connection, const TorchStoreRequest& request) {
    TorchStoreOutcome outcome = store.HandleRequest(connection, request);
    EXPECT_EQ(outcome.error, "") << TorchStoreOpName(request.op);
    std::vector<std::pair<uint64_t, std::string>> out;
    for (TorchStoreReply& r : outcome.replies) out.emplace_back(r.connection, r.bytes);
    return out;
  }
  // The requester's one reply, with nothing sent elsewhere.
  std::string One(uint64_t connection, const TorchStoreRequest& request) {
    auto replies = Do(connection, request);
    EXPECT_EQ(replies.size(), 1u) << TorchStoreOpName(request.op);
    if (replies.size() != 1) return "<" + std::to_string(replies.size()) + " replies>";
    EXPECT_EQ(replies[0].first, connection);
    return replies[0].second;
  }
  void Set(uint64_t connection, const std::string& key, const std::string& value) {
    EXPECT_TRUE(Do(connection, Req(Op::kSet, {key}, {value})).empty());
  }

  static constexpr uint64_t kA = 1, kB = 2, kC = 3;
  TorchStore store;
};

using Replies = std::vector<std::pair<uint64_t, std::string>>;

TEST_F(TorchStoreTest, SetThenGetAndAMissingKeyReadsEmpty) {
  EXPECT_EQ(One(kA, Req(Op::kGetNumKeys)), I64(0));
  Set(kA, "/a", "b");
  EXPECT_EQ(One(kB, Req(Op::kGet, {"/a"})), Bytes("b"));
  // libuv's semantics (§4): third-party clients GET without waiting.
  EXPECT_EQ(One(kB, Req(Op::kGet, {"/missing"})), Bytes(""));
  Set(kA, "/a", std::string("\0x", 2));  // values are bytes
  EXPECT_EQ(One(kB, Req(Op::kGet, {"/a"})), Bytes(std::string("\0x", 2)));
  EXPECT_EQ(One(kA, Req(Op::kGetNumKeys)), I64(1));
}

TEST_F(TorchStoreTest, CompareSetFollowsTheDocumentsTable) {
  // Missing key, expected empty: stores desired and answers it.
  EXPECT_EQ(One(kA, Req(Op::kCompareSet, {"/c"}, {"", "v1"})), Bytes("v1"));
  // Missing key, expected not empty: stores nothing, answers expected ("lying to the caller").
  EXPECT_EQ(One(kA, Req(Op::kCompareSet, {"/d"}, {"x", "y"})), Bytes("x"));
  EXPECT_EQ(One(kA, Req(Op::kCheck, {"/d"})), U8(kTorchStoreNotReady));
  // Present and equal: swaps.
  EXPECT_EQ(One(kA, Req(Op::kCompareSet, {"/c"}, {"v1", "v1b"})), Bytes("v1b"));
  // Present and different: answers the current value, keeps it.
  EXPECT_EQ(One(kA, Req(Op::kCompareSet, {"/c"}, {"v1", "zz"})), Bytes("v1b"));
  EXPECT_EQ(One(kA, Req(Op::kGet, {"/c"})), Bytes("v1b"));
  // Present with an empty value: "" matches it.
  Set(kA, "/e", "");
  EXPECT_EQ(One(kA, Req(Op::kCompareSet, {"/e"}, {"", "full"})), Bytes("full"));
  EXPECT_EQ(One(kA, Req(Op::kGetNumKeys)), I64(2));
}

TEST_F(TorchStoreTest, CompareSetThatCreatesAKeyWakesItsWaiters) {
  EXPECT_TRUE(Do(kB, Req(Op::kWait, {"/c"})).empty());
  // A failed swap on a missing key creates nothing and wakes nobody.
  EXPECT_EQ(Do(kA, Req(Op::kCompareSet, {"/c"}, {"x", "y"})), (Replies{{kA, Bytes("x")}}));
  EXPECT_EQ(Do(kA, Req(Op::kCompareSet, {"/c"}, {"", "v"})),
            (Replies{{kA, Bytes("v")}, {kB, U8(kTorchStoreStopWaiting)}}));
}

TEST_F(TorchStoreTest, AddKeepsDecimalTextAndParsesAPrefixAsStollDoes) {
  EXPECT_EQ(One(kA, Req(Op::kAdd, {"/n"}, {}, 3)), I64(3));
  EXPECT_EQ(One(kA, Req(Op::kGet, {"/n"})), Bytes("3"));
  EXPECT_EQ(One(kB, Req(Op::kAdd, {"/n"}, {}, -5)), I64(-2));
  EXPECT_EQ(One(kB, Req(Op::kGet, {"/n"})), Bytes("-2"));
  EXPECT_EQ(One(kB, Req(Op::kAdd, {"/n"}, {}, 0)), I64(-2));
  // Measured on torch 1.13: set("s", "12abc"); add("s", 1) -> 13.
  Set(kA, "/s", "12abc");
  EXPECT_EQ(One(kA, Req(Op::kAdd, {"/s"}, {}, 1)), I64(13));
  Set(kA, "/s", " \t+7");
  EXPECT_EQ(One(kA, Req(Op::kAdd, {"/s"}, {}, 1)), I64(8));
  // Wraps where torch's signed sum overflows, rather than being undefined.
  Set(kA, "/max", "9223372036854775807");
  EXPECT_EQ(One(kA, Req(Op::kAdd, {"/max"}, {}, 1)), I64(INT64_MIN));
}

TEST_F(TorchStoreTest, AddToAValueThatIsNotANumberIsRefused) {
  for (const std::string& value :
       {std::string("abc"), std::string(""), std::string("99999999999999999999"), std::string("-"),
        std::string("\0"
                    "5",
                    2)}) {
    Set(kA, "/bad", value);
    TorchStoreOutcome outcome = store.HandleRequest(kA, Req(Op::kAdd, {"/bad"}, {}, 1));
    EXPECT_TRUE(outcome.replies.empty()) << value;
    EXPECT_NE(outcome.error.find("ADD to key \"/bad\""), std::string::npos) << outcome.error;
    EXPECT_EQ(One(kB, Req(Op::kGet, {"/bad"})), Bytes(value));  // untouched
  }
}

TEST_F(TorchStoreTest, WaitIsAnsweredAtOnceWhenEveryKeyExists) {
  Set(kA, "/a", "1");
  EXPECT_EQ(One(kA, Req(Op::kWait, {"/a"})), U8(kTorchStoreStopWaiting));
  EXPECT_EQ(One(kA, Req(Op::kWait, {})), U8(kTorchStoreStopWaiting));
}

TEST_F(TorchStoreTest, WaitIsAnsweredWhenTheLastMissingKeyAppears) {
  Set(kC, "/a", "1");
  EXPECT_TRUE(Do(kA, Req(Op::kWait, {"/a", "/b", "/c"})).empty());
  EXPECT_TRUE(Do(kB, Req(Op::kWait, {"/b"})).empty());
  // The waiting connection goes on being served.
  EXPECT_EQ(One(kA, Req(Op::kGet, {"/a"})), Bytes("1"));
  EXPECT_EQ(Do(kC, Req(Op::kAdd, {"/b"}, {}, 1)), (Replies{{kC, I64(1)}, {kB, U8(kTorchStoreStopWaiting)}}));
  // Deleting and writing again a key already counted does not count twice.
  EXPECT_EQ(One(kC, Req(Op::kDeleteKey, {"/b"})), I64(1));
  EXPECT_TRUE(Do(kC, Req(Op::kSet, {"/b"}, {"again"})).empty());
  EXPECT_EQ(Do(kC, Req(Op::kAppend, {"/c"}, {"x"})), (Replies{{kA, U8(kTorchStoreStopWaiting)}}));
  EXPECT_TRUE(Do(kC, Req(Op::kSet, {"/c"}, {"y"})).empty());
}

TEST_F(TorchStoreTest, EveryWriteThatCreatesAKeyWakes) {
  EXPECT_TRUE(Do(kA, Req(Op::kWait, {"/m1", "/m2"})).empty());
  EXPECT_EQ(Do(kB, Req(Op::kMultiSet, {"/m1", "/m2"}, {"1", "2"})),
            (Replies{{kA, U8(kTorchStoreStopWaiting)}}));
  // A key waited on twice counts twice, and one write creates it.
  EXPECT_TRUE(Do(kA, Req(Op::kWait, {"/d", "/d"})).empty());
  EXPECT_EQ(Do(kB, Req(Op::kSet, {"/d"}, {"v"})), (Replies{{kA, U8(kTorchStoreStopWaiting)}}));
}

TEST_F(TorchStoreTest, DeleteKeyAnswersOneOrZeroAndWakesNobody) {
  EXPECT_EQ(One(kA, Req(Op::kDeleteKey, {"/a"})), I64(0));
  Set(kA, "/a", "v");
  EXPECT_TRUE(Do(kB, Req(Op::kWait, {"/z"})).empty());
  EXPECT_EQ(One(kA, Req(Op::kDeleteKey, {"/a"})), I64(1));
  EXPECT_EQ(One(kA, Req(Op::kDeleteKey, {"/a"})), I64(0));
  EXPECT_EQ(One(kA, Req(Op::kGetNumKeys)), I64(0));
}

TEST_F(TorchStoreTest, CancelWaitAlwaysAnswersCanceledAndSilencesTheWait) {
  EXPECT_EQ(One(kA, Req(Op::kCancelWait)), U8(kTorchStoreWaitCanceled));
  EXPECT_TRUE(Do(kA, Req(Op::kWait, {"/late"})).empty());
  EXPECT_TRUE(Do(kB, Req(Op::kWait, {"/late"})).empty());
  EXPECT_EQ(One(kA, Req(Op::kCancelWait)), U8(kTorchStoreWaitCanceled));
  // Only B, which did not cancel, hears of the key.
  EXPECT_EQ(Do(kC, Req(Op::kSet, {"/late"}, {"v"})), (Replies{{kB, U8(kTorchStoreStopWaiting)}}));
}

TEST_F(TorchStoreTest, AWaiterWhoseClientDisconnectsIsDropped) {
  EXPECT_TRUE(Do(kA, Req(Op::kWait, {"/k", "/j"})).empty());
  EXPECT_TRUE(Do(kB, Req(Op::kWait, {"/k"})).empty());
  store.Disconnected(kA);
  EXPECT_EQ(Do(kC, Req(Op::kSet, {"/k"}, {"v"})), (Replies{{kB, U8(kTorchStoreStopWaiting)}}));
  EXPECT_TRUE(Do(kC, Req(Op::kSet, {"/j"}, {"v"})).empty());
  // The connection is gone: its requests are refused.
  EXPECT_NE(store.HandleRequest(kA, Req(Op::kGetNumKeys)).error, "");
  store.Disconnected(kA);  // twice is harmless
}

TEST_F(TorchStoreTest, AConnectionCanHoldSeveralWaits) {
  // A 1.13 client whose wait timed out sends its next request on the same connection (§4): both waits stand.
  EXPECT_TRUE(Do(kA, Req(Op::kWait, {"/x"})).empty());
  EXPECT_TRUE(Do(kA, Req(Op::kWait, {"/y"})).empty());
  EXPECT_EQ(Do(kB, Req(Op::kSet, {"/y"}, {"1"})), (Replies{{kA, U8(kTorchStoreStopWaiting)}}));
  EXPECT_EQ(Do(kB, Req(Op::kSet, {"/x"}, {"1"})), (Replies{{kA, U8(kTorchStoreStopWaiting)}}));
}

TEST_F(TorchStoreTest, CheckNeverWaits) {
  Set(kA, "/a", "1");
  EXPECT_EQ(One(kA, Req(Op::kCheck, {"/a"})), U8(kTorchStoreReady));
  EXPECT_EQ(One(kA, Req(Op::kCheck, {"/a", "/b"})), U8(kTorchStoreNotReady));
  EXPECT_EQ(One(kA, Req(Op::kCheck, {})), U8(kTorchStoreReady));
  EXPECT_TRUE(Do(kB, Req(Op::kSet, {"/b"}, {"1"})).empty());  // nobody was registered
}

TEST_F(TorchStoreTest, AppendConcatenatesOrCreates) {
  EXPECT_TRUE(Do(kA, Req(Op::kAppend, {"/l"}, {"ab"})).empty());
  EXPECT_TRUE(Do(kA, Req(Op::kAppend, {"/l"}, {"cd"})).empty());
  EXPECT_EQ(One(kA, Req(Op::kGet, {"/l"})), Bytes("abcd"));
}

TEST_F(TorchStoreTest, MultiGetAnswersEveryKeyInOrder) {
  EXPECT_TRUE(Do(kA, Req(Op::kMultiSet, {"/a", "/b"}, {"1", "22"})).empty());
  EXPECT_EQ(One(kA, Req(Op::kMultiGet, {"/b", "/missing", "/a"})), Bytes("22") + Bytes("") + Bytes("1"));
  EXPECT_EQ(One(kA, Req(Op::kMultiGet, {})), "");
}

TEST_F(TorchStoreTest, QueuesPushPopAndCountApartFromTheKeys) {
  EXPECT_EQ(One(kA, Req(Op::kQueuePop, {"/q"})), I64(0));  // empty: the length alone
  EXPECT_EQ(One(kA, Req(Op::kQueueLen, {"/q"})), I64(0));
  EXPECT_EQ(One(kA, Req(Op::kCheck, {"/q"})), U8(kTorchStoreNotReady));
  EXPECT_TRUE(Do(kA, Req(Op::kQueuePush, {"/q"}, {"first"})).empty());
  EXPECT_TRUE(Do(kA, Req(Op::kQueuePush, {"/q"}, {"second"})).empty());
  EXPECT_EQ(One(kA, Req(Op::kQueueLen, {"/q"})), I64(2));
  EXPECT_EQ(One(kA, Req(Op::kCheck, {"/q"})), U8(kTorchStoreReady));  // a non-empty queue counts
  EXPECT_EQ(One(kA, Req(Op::kWait, {"/q"})), U8(kTorchStoreStopWaiting));
  EXPECT_EQ(One(kA, Req(Op::kGetNumKeys)), I64(0));  // queues are not keys
  EXPECT_EQ(One(kA, Req(Op::kGet, {"/q"})), Bytes(""));
  EXPECT_EQ(One(kB, Req(Op::kQueuePop, {"/q"})), I64(2) + Bytes("first"));
  EXPECT_EQ(One(kB, Req(Op::kQueuePop, {"/q"})), I64(1) + Bytes("second"));
  EXPECT_EQ(One(kB, Req(Op::kQueuePop, {"/q"})), I64(0));
  EXPECT_EQ(One(kA, Req(Op::kCheck, {"/q"})), U8(kTorchStoreNotReady));
}

TEST_F(TorchStoreTest, QueuePushWakesOneWaiterOldestFirst) {
  // A blocking queue_pop waits on its key first.
  EXPECT_TRUE(Do(kA, Req(Op::kWait, {"/q"})).empty());
  EXPECT_TRUE(Do(kB, Req(Op::kWait, {"/q"})).empty());
  EXPECT_EQ(Do(kC, Req(Op::kQueuePush, {"/q"}, {"1"})), (Replies{{kA, U8(kTorchStoreStopWaiting)}}));
  EXPECT_EQ(One(kA, Req(Op::kQueuePop, {"/q"})), I64(1) + Bytes("1"));
  EXPECT_EQ(Do(kC, Req(Op::kQueuePush, {"/q"}, {"2"})), (Replies{{kB, U8(kTorchStoreStopWaiting)}}));
  EXPECT_TRUE(Do(kC, Req(Op::kQueuePush, {"/q"}, {"3"})).empty());
}

TEST_F(TorchStoreTest, ListNamesEveryKeySorted) {
  EXPECT_EQ(One(kA, Req(Op::kList)), I64(0));
  Set(kA, "/b", "1");
  Set(kA, "init/", "2");
  Set(kA, "/a", "3");
  EXPECT_TRUE(Do(kA, Req(Op::kQueuePush, {"/q"}, {"x"})).empty());
  EXPECT_EQ(One(kA, Req(Op::kList)), I64(3) + Bytes("/a") + Bytes("/b") + Bytes("init/"));
}

TEST_F(TorchStoreTest, HandshakeOpsAndWatchKey) {
  EXPECT_TRUE(Do(kA, Req(Op::kValidate, {}, {}, 0, kTorchStoreValidateMagic)).empty());
  EXPECT_EQ(One(kA, Req(Op::kPing, {}, {}, 0, 12345)), std::string("\x39\x30\x00\x00", 4));
  // 1.13's callback connection: acknowledged; the Python binding never asks for events.
  EXPECT_EQ(One(kA, Req(Op::kWatchKey, {"/w"})), U8(kTorchStoreWatchRegistered));
}

TEST_F(TorchStoreTest, BothDialectsShareOneKeyspace) {
  // A 1.13 client's bytes and a 2.2+ client's, through their decoders into one store.
  TorchStoreDecoder legacy(TorchStoreDialect::kLegacy, {});
  TorchStoreDecoder modern(TorchStoreDialect::kModern, {});
  std::string wire;
  EncodeTorchStoreRequest(TorchStoreDialect::kLegacy, Req(Op::kAdd, {"init/"}, {}, 1), &wire);
  EncodeTorchStoreRequest(TorchStoreDialect::kLegacy, Req(Op::kSet, {"/k"}, {"from 1.13"}), &wire);
  legacy.Append(wire);
  wire.clear();
  EncodeTorchStoreRequest(TorchStoreDialect::kModern, Req(Op::kValidate, {}, {}, 0, kTorchStoreValidateMagic),
                          &wire);
  EncodeTorchStoreRequest(TorchStoreDialect::kModern, Req(Op::kAdd, {"init/"}, {}, 1), &wire);
  EncodeTorchStoreRequest(TorchStoreDialect::kModern, Req(Op::kGet, {"/k"}), &wire);
  modern.Append(wire);
  std::string to_a, to_b;
  TorchStoreRequest r;
  while (legacy.Next(&r) == TorchStoreDecoder::Result::kRequest) {
    for (auto& reply : store.HandleRequest(kA, r).replies) to_a += reply.bytes;
  }
  while (modern.Next(&r) == TorchStoreDecoder::Result::kRequest) {
    for (auto& reply : store.HandleRequest(kB, r).replies) to_b += reply.bytes;
  }
  EXPECT_EQ(to_a, I64(1));
  EXPECT_EQ(to_b, I64(2) + Bytes("from 1.13"));
}

TEST_F(TorchStoreTest, ANewEpochStartsWithAnEmptyKeyspaceAndRetiresOldConnections) {
  Set(kA, "/k", "old");
  EXPECT_TRUE(Do(kB, Req(Op::kWait, {"/never"})).empty());
  EXPECT_TRUE(Do(kA, Req(Op::kQueuePush, {"/q"}, {"x"})).empty());
  EXPECT_EQ(store.epoch(), 0);
  EXPECT_EQ(store.StartEpoch(1), (std::vector<uint64_t>{kA, kB, kC}));
  EXPECT_EQ(store.epoch(), 1);
  EXPECT_EQ(store.size(), 0u);
  // An old connection is refused, even one that still had a wait.
  TorchStoreOutcome old = store.HandleRequest(kA, Req(Op::kGet, {"/k"}));
  EXPECT_EQ(old.error, "GET from connection 1, which is not connected in epoch 1");
  // The new epoch's workers see nothing of the old one, and the old wait is never answered.
  store.Connected(7);
  EXPECT_EQ(One(7, Req(Op::kGet, {"/k"})), Bytes(""));
  EXPECT_EQ(One(7, Req(Op::kQueueLen, {"/q"})), I64(0));
  EXPECT_TRUE(Do(7, Req(Op::kSet, {"/never"}, {"1"})).empty());
  // Epochs only move forward.
  EXPECT_TRUE(store.StartEpoch(1).empty());
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.StartEpoch(2), (std::vector<uint64_t>{7}));
}

TEST_F(TorchStoreTest, AKeyOfAnotherGenerationsNamespaceIsRefused) {
  // distrun.torch's PrefixStore("distrun/g<N>"): a worker of an older generation never reaches the new
  // world's keys (nor one of a generation to come).
  store.StartEpoch(3);
  store.Connected(7);
  EXPECT_TRUE(Do(7, Req(Op::kSet, {"distrun/g3/rank_0"}, {"x"})).empty());
  EXPECT_EQ(One(7, Req(Op::kGet, {"distrun/g3/rank_0"})), Bytes("x"));
  EXPECT_EQ(store.HandleRequest(7, Req(Op::kGet, {"distrun/g2/rank_0"})).error,
            "GET of key 'distrun/g2/rank_0', which belongs to generation 2, while the job's store is in "
            "generation 3");
  EXPECT_NE(store.HandleRequest(7, Req(Op::kWait, {"distrun/g3/a", "distrun/g4/b"})).error, "");
  // Other keys, and look-alikes that are no generation's, are anyone's.
  EXPECT_TRUE(Do(7, Req(Op::kSet, {"distrun/gx/k"}, {"1"})).empty());
  EXPECT_TRUE(Do(7, Req(Op::kSet, {"/worker/attempt_0/k"}, {"1"})).empty());
}

TEST(TorchStoreLimitTest, AWritePastTheSizeLimitIsRefusedAndFreedBytesCountAgain) {
  TorchStore small(100);
  small.Connected(1);
  EXPECT_EQ(small.HandleRequest(1, Req(Op::kSet, {"key"}, {std::string(60, 'x')})).error, "");
  EXPECT_EQ(small.bytes(), 63u);
  // Overwriting counts the difference; a second 60-byte value under another key does not fit.
  EXPECT_EQ(small.HandleRequest(1, Req(Op::kSet, {"key"}, {std::string(50, 'y')})).error, "");
  EXPECT_EQ(small.bytes(), 53u);
  TorchStoreOutcome refused = small.HandleRequest(1, Req(Op::kSet, {"other"}, {std::string(60, 'z')}));
  EXPECT_NE(refused.error.find("SET of 65 bytes: the store holds 53 of its 100 bytes"), std::string::npos)
      << refused.error;
  EXPECT_TRUE(refused.replies.empty());
  EXPECT_EQ(small.HandleRequest(1, Req(Op::kQueuePush, {"q"}, {std::string(60, 'z')})).error.empty(), false);
  EXPECT_EQ(small.HandleRequest(1, Req(Op::kDeleteKey, {"key"})).error, "");
  EXPECT_EQ(small.bytes(), 0u);
  EXPECT_EQ(small.HandleRequest(1, Req(Op::kQueuePush, {"q"}, {std::string(60, 'z')})).error, "");
  EXPECT_EQ(small.bytes(), 61u);
  EXPECT_EQ(small.HandleRequest(1, Req(Op::kQueuePop, {"q"})).error, "");
  EXPECT_EQ(small.HandleRequest(1, Req(Op::kAppend, {"a"}, {"12"})).error, "");
  EXPECT_EQ(small.HandleRequest(1, Req(Op::kAppend, {"a"}, {"34"})).error, "");
  EXPECT_EQ(small.bytes(), 5u);
  small.StartEpoch(1);
  EXPECT_EQ(small.bytes(), 0u);
}

}  // namespace
}  // namespace distrun
