#include "runtime/recovery/worker_message.h"

#include <gtest/gtest.h>

namespace distrun {
namespace {

std::string PayloadOf(const std::string& frame) {
  FrameReader reader;
  reader.Append(frame);
  std::optional<std::string> payload = reader.Next();
  EXPECT_TRUE(payload.has_value());
  return payload.value_or("");
}

TEST(WorkerMessage, AFrameIsABigEndianLengthAndText) {
  std::string frame = EncodeFrame(GenerationMessage("ready", 3));
  EXPECT_EQ(frame, std::string("\0\0\0\x12ready\ngeneration=3", 22));
  WorkerMessage m = DecodePayload(PayloadOf(frame));
  EXPECT_EQ(m.name, "ready");
  EXPECT_EQ(GenerationOf(m), 3);
}

TEST(WorkerMessage, WorldRoundTrips) {
  WorldMessage w;
  w.generation = 7;
  w.rank = 5;
  w.world_size = 8;
  w.local_rank = 1;
  w.local_world_size = 2;
  w.group_rank = 2;
  w.group_world_size = 4;
  w.is_new = true;
  w.source = 0;
  w.lost = {4, 5};
  w.joined = {4, 5};
  w.store_prefix = GenerationStorePrefix(7);
  w.env = {{"RANK", "5"}, {"MASTER_ADDR", "node-a"}, {"EMPTY", ""}, {"WITH_EQUALS", "a=b"}};
  WorkerMessage m = DecodePayload(PayloadOf(EncodeFrame(ToMessage(w))));
  EXPECT_EQ(m.name, "world");
  EXPECT_EQ(*m.Find("lost"), "4-5");
  EXPECT_EQ(*m.Find("store_prefix"), "distrun/g7");
  EXPECT_EQ(WorldFrom(m), w);
}

TEST(WorkerMessage, HelloRoundTripsAndUnknownKeysAreKept) {
  WorkerMessage m = ToMessage(HelloMessage{1, 4242, -1});
  m.Add("from_a_later_version", "x");
  WorkerMessage back = DecodePayload(PayloadOf(EncodeFrame(m)));
  HelloMessage h = HelloFrom(back);
  EXPECT_EQ(h.pid, 4242);
  EXPECT_EQ(h.generation, -1);
  EXPECT_EQ(*back.Find("from_a_later_version"), "x");
}

TEST(WorkerMessage, FramesArriveInPieces) {
  std::string bytes = EncodeFrame(GenerationMessage("changed", 1)) + EncodeFrame(GenerationMessage("up", 2));
  FrameReader reader;
  std::vector<std::string> names;
  for (char c : bytes) {
    reader.Append(std::string_view(&c, 1));
    while (std::optional<std::string> payload = reader.Next()) names.push_back(DecodePayload(*payload).name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"changed", "up"}));
  EXPECT_EQ(reader.buffered(), 0u);
}

TEST(WorkerMessage, BadInputIsRefusedWithAReason) {
  FrameReader reader;
  reader.Append(std::string("\xff\xff\xff\xff", 4));
  EXPECT_THROW(reader.Next(), WorkerMessageError);
  EXPECT_THROW(DecodePayload(""), WorkerMessageError);
  EXPECT_THROW(DecodePayload("hello\nno equals sign"), WorkerMessageError);
  EXPECT_THROW(DecodePayload("hel lo"), WorkerMessageError);
  try {
    HelloFrom(DecodePayload("hello\nversion=1\npid=-3\ngeneration=0"));
    FAIL();
  } catch (const WorkerMessageError& e) {
    EXPECT_STREQ(e.what(),
                 "the worker channel's 'hello' message has pid='-3', not an integer from 1 to 2147483647");
  }
  EXPECT_THROW(WorldFrom(DecodePayload("world\ngeneration=1\nworld_size=2\nrank=2")), WorkerMessageError);
  WorkerMessage newline{"world", {{"env.X", "a\nb"}}};
  EXPECT_THROW(EncodeFrame(newline), WorkerMessageError);
  WorkerMessage huge{"world", {{"env.X", std::string(kMaxWorkerFrameBytes, 'x')}}};
  EXPECT_THROW(EncodeFrame(huge), WorkerMessageError);
}

TEST(WorkerMessage, RanksAreRanges) {
  EXPECT_EQ(FormatRanks({7, 0, 1, 2, 3, 3}), "0-3,7");
  EXPECT_EQ(FormatRanks({}), "");
  EXPECT_EQ(ParseRanks("0-3,7"), (std::vector<int>{0, 1, 2, 3, 7}));
  EXPECT_EQ(ParseRanks("5,1-2,2"), (std::vector<int>{1, 2, 5}));
  EXPECT_EQ(ParseRanks(""), std::vector<int>{});
  for (const char* bad : {"-1", "3-1", "a", "1,", ",1", "1--2", "2147483648", "1-2-3"}) {
    EXPECT_THROW(ParseRanks(bad), WorkerMessageError) << bad;
  }
  EXPECT_THROW(ParseRanks("0-2147483647"), WorkerMessageError);  // more ranks than any world
  EXPECT_THROW(ParseRanks("0-9", 10 - 1), WorkerMessageError);
  EXPECT_EQ(ParseRanks("0-9", 10).size(), 10u);
}

}  // namespace
}  // namespace distrun
