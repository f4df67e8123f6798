#include "runtime/torch_store/torch_store_codec.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/torch_store/torch_store_test_requests.h"

namespace distrun {
namespace {

using Dialect = TorchStoreDialect;
using Op = TorchStoreOp;
using Result = TorchStoreDecoder::Result;

// Wire bytes written out by hand, little-endian as on every platform torch supports (§2), so that the
// tests do not lean on the codec's own encoders.
std::string Bytes(std::initializer_list<int> bytes) {
  std::string out;
  for (int b : bytes) out.push_back(static_cast<char>(b));
  return out;
}
std::string Le(uint64_t value, int size) {
  std::string out;
  for (int i = 0; i < size; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  return out;
}
std::string U64(uint64_t value) { return Le(value, 8); }
std::string U32(uint32_t value) { return Le(value, 4); }
std::string Str(const std::string& s) { return U64(s.size()) + s; }
std::string Op1(int code) { return Bytes({code}); }

using testing::Req;

void ExpectSame(const TorchStoreRequest& want, const TorchStoreRequest& got, const std::string& where) {
  EXPECT_EQ(want.op, got.op) << where;
  EXPECT_EQ(want.keys, got.keys) << where;
  EXPECT_EQ(want.values, got.values) << where;
  EXPECT_EQ(want.delta, got.delta) << where;
  EXPECT_EQ(want.number, got.number) << where;
}

// Feeds `wire` cut into pieces at `cuts` and returns every request decoded, failing on an error.
std::vector<TorchStoreRequest> DecodeAll(Dialect dialect, const std::string& wire,
                                         std::vector<size_t> cuts = {}, TorchStoreLimits limits = {}) {
  TorchStoreDecoder decoder(dialect, limits);
  std::vector<TorchStoreRequest> out;
  cuts.push_back(wire.size());
  size_t from = 0;
  for (size_t cut : cuts) {
    decoder.Append(std::string_view(wire).substr(from, cut - from));
    from = cut;
    TorchStoreRequest r;
    Result result;
    while ((result = decoder.Next(&r)) == Result::kRequest) out.push_back(r);
    EXPECT_EQ(result, Result::kNeedMore) << decoder.error();
  }
  EXPECT_EQ(decoder.buffered(), 0u);
  return out;
}

struct WireCase {
  const char* name;
  std::string wire;  // opcode and fields
  TorchStoreRequest request;
};

// Every op of torch 1.13's enum (§3.1), as its client writes it.
std::vector<WireCase> LegacyCases() {
  return {
      {"SET", Op1(0) + Str("/a") + Str("b"), Req(Op::kSet, {"/a"}, {"b"})},
      {"COMPARE_SET", Op1(1) + Str("/c") + Str("") + Str("v1"), Req(Op::kCompareSet, {"/c"}, {"", "v1"})},
      {"GET", Op1(2) + Str("/a"), Req(Op::kGet, {"/a"})},
      {"ADD", Op1(3) + Str("init/") + U64(1), Req(Op::kAdd, {"init/"}, {}, 1)},
      {"ADD negative", Op1(3) + Str("/n") + U64(static_cast<uint64_t>(-7)), Req(Op::kAdd, {"/n"}, {}, -7)},
      {"CHECK", Op1(4) + U64(2) + Str("/a") + Str("/b"), Req(Op::kCheck, {"/a", "/b"})},
      {"WAIT", Op1(5) + U64(1) + Str("/a"), Req(Op::kWait, {"/a"})},
      {"WAIT no keys", Op1(5) + U64(0), Req(Op::kWait)},
      {"GETNUMKEYS", Op1(6), Req(Op::kGetNumKeys)},
      {"WATCH_KEY", Op1(7) + Str("/w"), Req(Op::kWatchKey, {"/w"})},
      {"DELETE_KEY", Op1(8) + Str("/a"), Req(Op::kDeleteKey, {"/a"})},
      {"binary key and value", Op1(0) + Str(std::string("\0\xff/k", 4)) + Str(std::string("\0", 1)),
       Req(Op::kSet, {std::string("\0\xff/k", 4)}, {std::string("\0", 1)})},
  };
}

// Every op of the 2.2+ enum through LIST (§3.2), after the opening VALIDATE.
std::vector<WireCase> ModernCases() {
  return {
      {"VALIDATE", Op1(0) + U32(0x3C85F7CE), Req(Op::kValidate, {}, {}, 0, 0x3C85F7CE)},
      {"SET", Op1(1) + Str("/a") + Str("b"), Req(Op::kSet, {"/a"}, {"b"})},
      {"COMPARE_SET", Op1(2) + Str("/c") + Str("x") + Str("y"), Req(Op::kCompareSet, {"/c"}, {"x", "y"})},
      {"GET", Op1(3) + Str("/a"), Req(Op::kGet, {"/a"})},
      {"ADD", Op1(4) + Str("init/") + U64(1), Req(Op::kAdd, {"init/"}, {}, 1)},
      {"CHECK", Op1(5) + U64(1) + Str("/a"), Req(Op::kCheck, {"/a"})},
      {"WAIT", Op1(6) + U64(2) + Str("/a") + Str("/b"), Req(Op::kWait, {"/a", "/b"})},
      {"GETNUMKEYS", Op1(7), Req(Op::kGetNumKeys)},
      {"DELETE_KEY", Op1(8) + Str("/a"), Req(Op::kDeleteKey, {"/a"})},
      {"APPEND", Op1(9) + Str("/l") + Str("xy"), Req(Op::kAppend, {"/l"}, {"xy"})},
      {"MULTI_GET", Op1(10) + U64(2) + Str("/a") + Str("/b"), Req(Op::kMultiGet, {"/a", "/b"})},
      {"MULTI_SET", Op1(11) + U64(2) + Str("/a") + Str("1") + Str("/b") + Str(""),
       Req(Op::kMultiSet, {"/a", "/b"}, {"1", ""})},
      {"CANCEL_WAIT", Op1(12), Req(Op::kCancelWait)},
      {"PING", Op1(13) + U32(4242), Req(Op::kPing, {}, {}, 0, 4242)},
      {"QUEUE_PUSH", Op1(14) + Str("/q") + Str("item"), Req(Op::kQueuePush, {"/q"}, {"item"})},
      {"QUEUE_POP", Op1(15) + Str("/q"), Req(Op::kQueuePop, {"/q"})},
      {"QUEUE_LEN", Op1(16) + Str("/q"), Req(Op::kQueueLen, {"/q"})},
      {"LIST", Op1(17), Req(Op::kList)},
  };
}

std::string Concat(const std::vector<WireCase>& cases) {
  std::string wire;
  for (const WireCase& c : cases) wire += c.wire;
  return wire;
}

TEST(TorchStoreCodecTest, SniffTellsTheDialectsApartFromTheirFirstBytes) {
  EXPECT_EQ(SniffTorchStore(""), TorchStoreSniff::kNeedMore);
  // The 2.2+ handshake, a byte at a time: undecided until the magic is whole.
  const std::string modern = Bytes({0x00, 0xCE, 0xF7, 0x85, 0x3C, 0x0D, 0x39, 0x30, 0x00, 0x00});
  for (size_t n = 1; n < 5; ++n)
    EXPECT_EQ(SniffTorchStore(modern.substr(0, n)), TorchStoreSniff::kNeedMore) << n;
  for (size_t n = 5; n <= modern.size(); ++n)
    EXPECT_EQ(SniffTorchStore(modern.substr(0, n)), TorchStoreSniff::kModern);
  // A 1.13 SET opens with 00 too; its key length parts from the magic at once.
  EXPECT_EQ(SniffTorchStore(Bytes({0x00, 0x05})), TorchStoreSniff::kLegacy);
  EXPECT_EQ(SniffTorchStore(Bytes({0x00, 0xCE, 0xF7, 0x85, 0x3D})), TorchStoreSniff::kLegacy);
  EXPECT_EQ(SniffTorchStore(Op1(0) + Str("/a") + Str("b")), TorchStoreSniff::kLegacy);
  // §3.1's ADD "init/" +1, every 1.13 worker's first request.
  EXPECT_EQ(SniffTorchStore(Bytes({0x03, 0x05})), TorchStoreSniff::kLegacy);
  for (int b = 1; b <= 8; ++b) EXPECT_EQ(SniffTorchStore(Op1(b)), TorchStoreSniff::kLegacy) << b;
  EXPECT_EQ(SniffTorchStore(Op1(9)), TorchStoreSniff::kNotTorchStore);
  EXPECT_EQ(SniffTorchStore("DRUN/1\r\n"), TorchStoreSniff::kNotTorchStore);
  EXPECT_EQ(SniffTorchStore("PRI * HTTP/2.0\r\n"), TorchStoreSniff::kNotTorchStore);
  EXPECT_EQ(SniffTorchStore(Op1(0xff)), TorchStoreSniff::kNotTorchStore);
}

TEST(TorchStoreCodecTest, DecodesTheLegacyAddExampleOfTheDocument) {
  // §3.1: 03 | 05 00 00 00 00 00 00 00 | 69 6e 69 74 2f | 01 00 00 00 00 00 00 00
  const std::string wire =
      Bytes({0x03, 0x05, 0, 0, 0, 0, 0, 0, 0, 0x69, 0x6e, 0x69, 0x74, 0x2f, 0x01, 0, 0, 0, 0, 0, 0, 0});
  const auto requests = DecodeAll(Dialect::kLegacy, wire);
  ASSERT_EQ(requests.size(), 1u);
  ExpectSame(Req(Op::kAdd, {"init/"}, {}, 1), requests[0], "ADD");
  std::string reply;
  AppendTorchStoreInt64(1, &reply);
  EXPECT_EQ(reply, Bytes({0x01, 0, 0, 0, 0, 0, 0, 0}));
}

TEST(TorchStoreCodecTest, DecodesTheModernHandshakeAsTorchsProtocolTestPinsIt) {
  // TestClientProtocol.test_client_connect: 00 CE F7 85 3C 0D <pid u32 LE>, then the client reads 4 bytes.
  const std::string wire = Bytes({0x00, 0xCE, 0xF7, 0x85, 0x3C, 0x0D, 0x39, 0x30, 0x00, 0x00});
  const auto requests = DecodeAll(Dialect::kModern, wire);
  ASSERT_EQ(requests.size(), 2u);
  ExpectSame(Req(Op::kValidate, {}, {}, 0, kTorchStoreValidateMagic), requests[0], "VALIDATE");
  ExpectSame(Req(Op::kPing, {}, {}, 0, 12345), requests[1], "PING");
  std::string reply;
  AppendTorchStoreUint32(requests[1].number, &reply);
  EXPECT_EQ(reply, Bytes({0x39, 0x30, 0x00, 0x00}));
}

TEST(TorchStoreCodecTest, DecodesAndEncodesEveryLegacyOp) {
  for (const WireCase& c : LegacyCases()) {
    const auto requests = DecodeAll(Dialect::kLegacy, c.wire);
    ASSERT_EQ(requests.size(), 1u) << c.name;
    ExpectSame(c.request, requests[0], c.name);
    std::string encoded;
    ASSERT_TRUE(EncodeTorchStoreRequest(Dialect::kLegacy, c.request, &encoded)) << c.name;
    EXPECT_EQ(encoded, c.wire) << c.name;
  }
}

TEST(TorchStoreCodecTest, DecodesAndEncodesEveryModernOp) {
  const std::string validate = Op1(0) + U32(kTorchStoreValidateMagic);
  for (const WireCase& c : ModernCases()) {
    const auto requests =
        DecodeAll(Dialect::kModern, c.request.op == Op::kValidate ? c.wire : validate + c.wire);
    ASSERT_FALSE(requests.empty()) << c.name;
    ExpectSame(c.request, requests.back(), c.name);
    std::string encoded;
    ASSERT_TRUE(EncodeTorchStoreRequest(Dialect::kModern, c.request, &encoded)) << c.name;
    EXPECT_EQ(encoded, c.wire) << c.name;
  }
}

TEST(TorchStoreCodecTest, EachDialectHasOnlyItsOwnOps) {
  uint8_t code = 0;
  EXPECT_FALSE(TorchStoreOpcode(Dialect::kLegacy, Op::kValidate, &code));
  EXPECT_FALSE(TorchStoreOpcode(Dialect::kLegacy, Op::kAppend, &code));
  EXPECT_FALSE(TorchStoreOpcode(Dialect::kLegacy, Op::kPing, &code));
  EXPECT_FALSE(TorchStoreOpcode(Dialect::kModern, Op::kWatchKey, &code));
  ASSERT_TRUE(TorchStoreOpcode(Dialect::kLegacy, Op::kDeleteKey, &code));
  EXPECT_EQ(code, 8);
  ASSERT_TRUE(TorchStoreOpcode(Dialect::kModern, Op::kDeleteKey, &code));
  EXPECT_EQ(code, 8);
  ASSERT_TRUE(TorchStoreOpcode(Dialect::kModern, Op::kList, &code));
  EXPECT_EQ(code, 17);
  std::string out;
  EXPECT_FALSE(EncodeTorchStoreRequest(Dialect::kLegacy, Req(Op::kCancelWait), &out));
}

TEST(TorchStoreCodecTest, AcceptsInputSplitAtEveryByte) {
  const std::string legacy = Concat(LegacyCases());
  const std::string modern = Concat(ModernCases());
  for (const auto& [dialect, wire, cases] : {std::tuple{Dialect::kLegacy, legacy, LegacyCases()},
                                             std::tuple{Dialect::kModern, modern, ModernCases()}}) {
    // Two pieces, cut at every byte.
    for (size_t cut = 0; cut <= wire.size(); ++cut) {
      const auto requests = DecodeAll(dialect, wire, {cut});
      ASSERT_EQ(requests.size(), cases.size()) << TorchStoreDialectName(dialect) << " cut at " << cut;
      for (size_t i = 0; i < cases.size(); ++i) ExpectSame(cases[i].request, requests[i], cases[i].name);
    }
    // One byte at a time.
    std::vector<size_t> every;
    for (size_t i = 1; i < wire.size(); ++i) every.push_back(i);
    const auto requests = DecodeAll(dialect, wire, every);
    ASSERT_EQ(requests.size(), cases.size()) << TorchStoreDialectName(dialect);
    for (size_t i = 0; i < cases.size(); ++i) ExpectSame(cases[i].request, requests[i], cases[i].name);
  }
}

TEST(TorchStoreCodecTest, ATruncatedRequestIsNeverDecoded) {
  for (const WireCase& c : LegacyCases()) {
    for (size_t n = 0; n < c.wire.size(); ++n) {
      TorchStoreDecoder decoder(Dialect::kLegacy, {});
      decoder.Append(c.wire.substr(0, n));
      TorchStoreRequest r;
      EXPECT_EQ(decoder.Next(&r), Result::kNeedMore) << c.name << " with " << n << " bytes";
      EXPECT_EQ(decoder.Next(&r), Result::kNeedMore) << c.name << " asked again";
    }
  }
}

TEST(TorchStoreCodecTest, AnUnknownOpcodeIsAnErrorNamingIt) {
  TorchStoreDecoder legacy(Dialect::kLegacy, {});
  legacy.Append(Op1(9) + Str("/a") +
                Str("b"));  // APPEND of the unreleased E1+ enum: 1.13's server closes too
  TorchStoreRequest r;
  EXPECT_EQ(legacy.Next(&r), Result::kError);
  EXPECT_EQ(legacy.error(), "tcpstore 1.13 unknown opcode 9");
  EXPECT_EQ(legacy.Next(&r), Result::kError);  // and stays so

  TorchStoreDecoder modern(Dialect::kModern, {});
  modern.Append(Op1(0) + U32(kTorchStoreValidateMagic) + Op1(18));
  ASSERT_EQ(modern.Next(&r), Result::kRequest);
  EXPECT_EQ(modern.Next(&r), Result::kError);
  EXPECT_EQ(modern.error(), "tcpstore 2.2+ unknown opcode 18");
}

TEST(TorchStoreCodecTest, AModernConnectionMustOpenWithTheRightValidate) {
  TorchStoreRequest r;
  TorchStoreDecoder no_validate(Dialect::kModern, {});
  no_validate.Append(Op1(1) + Str("/a") + Str("b"));
  EXPECT_EQ(no_validate.Next(&r), Result::kError);
  EXPECT_EQ(no_validate.error(), "tcpstore 2.2+ first request is SET (opcode 1), not VALIDATE");

  TorchStoreDecoder wrong_magic(Dialect::kModern, {});
  wrong_magic.Append(Op1(0) + U32(0x3C85F7CF));
  EXPECT_EQ(wrong_magic.Next(&r), Result::kError);
  EXPECT_EQ(wrong_magic.error(), "tcpstore 2.2+ VALIDATE (opcode 0): magic 0x3C85F7CF, expected 0x3C85F7CE");

  // A second VALIDATE is harmless with the right magic, an error with another.
  TorchStoreDecoder again(Dialect::kModern, {});
  again.Append(Op1(0) + U32(kTorchStoreValidateMagic) + Op1(0) + U32(kTorchStoreValidateMagic) + Op1(0) +
               U32(1));
  EXPECT_EQ(again.Next(&r), Result::kRequest);
  EXPECT_EQ(again.Next(&r), Result::kRequest);
  EXPECT_EQ(again.Next(&r), Result::kError);
}

TEST(TorchStoreCodecTest, OversizedKeysValuesAndCountsAreErrorsBeforeTheirBytesArrive) {
  TorchStoreLimits limits;
  limits.max_key_bytes = 4;
  limits.max_value_bytes = 6;
  limits.max_keys_per_request = 2;
  limits.max_request_bytes = 10;
  TorchStoreRequest r;
  const auto error_of = [&](Dialect dialect, const std::string& wire) {
    TorchStoreDecoder decoder(dialect, limits);
    decoder.Append(wire);
    Result result;
    while ((result = decoder.Next(&r)) == Result::kRequest) {
    }
    return result == Result::kError ? decoder.error() : std::string("no error");
  };
  const std::string validate = Op1(0) + U32(kTorchStoreValidateMagic);
  // Only the length is sent: the limit is known before the bytes.
  EXPECT_EQ(error_of(Dialect::kLegacy, Op1(0) + U64(5)),
            "tcpstore 1.13 SET (opcode 0): key of 5 bytes, over the limit of 4");
  EXPECT_EQ(error_of(Dialect::kLegacy, Op1(0) + Str("/k") + U64(7)),
            "tcpstore 1.13 SET (opcode 0): value of 7 bytes, over the limit of 6");
  EXPECT_EQ(error_of(Dialect::kLegacy, Op1(1) + Str("/k") + Str("") + U64(7)),
            "tcpstore 1.13 COMPARE_SET (opcode 1): value of 7 bytes, over the limit of 6");
  EXPECT_EQ(error_of(Dialect::kLegacy, Op1(5) + U64(3)),
            "tcpstore 1.13 WAIT (opcode 5): 3 keys, over the limit of 2");
  EXPECT_EQ(error_of(Dialect::kModern, validate + Op1(11) + U64(static_cast<uint64_t>(-1))),
            "tcpstore 2.2+ MULTI_SET (opcode 11): 18446744073709551615 keys, over the limit of 2");
  EXPECT_EQ(
      error_of(Dialect::kModern, validate + Op1(11) + U64(2) + Str("/a") + Str("12345") + Str("/b") + U64(6)),
      "tcpstore 2.2+ MULTI_SET (opcode 11): over 10 bytes of keys and values");
  EXPECT_EQ(error_of(Dialect::kModern, validate + Op1(14) + Str("/q") + U64(uint64_t{1} << 63)),
            "tcpstore 2.2+ QUEUE_PUSH (opcode 14): value of 9223372036854775808 bytes, over the limit of 6");
  // At the limits exactly: accepted.
  EXPECT_EQ(error_of(Dialect::kLegacy, Op1(0) + Str("/key") + Str("123456")), "no error");
  EXPECT_EQ(error_of(Dialect::kLegacy, Op1(4) + U64(2) + Str("/a") + Str("/b")), "no error");
}

TEST(TorchStoreCodecTest, RepliesAreWrittenAsTorchReadsThem) {
  std::string out;
  AppendTorchStoreByte(kTorchStoreStopWaiting, &out);
  AppendTorchStoreByte(kTorchStoreWaitCanceled, &out);
  AppendTorchStoreByte(kTorchStoreNotReady, &out);
  AppendTorchStoreByte(kTorchStoreWatchRegistered, &out);
  EXPECT_EQ(out, Bytes({0x00, 0x01, 0x01, 0x03}));
  out.clear();
  AppendTorchStoreInt64(-1, &out);
  AppendTorchStoreInt64(0x0102030405060708, &out);
  EXPECT_EQ(out, U64(~uint64_t{0}) + Bytes({8, 7, 6, 5, 4, 3, 2, 1}));
  out.clear();
  AppendTorchStoreBytes("v1", &out);
  AppendTorchStoreBytes("", &out);
  EXPECT_EQ(out, Bytes({2, 0, 0, 0, 0, 0, 0, 0, 'v', '1', 0, 0, 0, 0, 0, 0, 0, 0}));
  out.clear();
  AppendTorchStoreUint32(kTorchStoreValidateMagic, &out);
  EXPECT_EQ(out, Bytes({0xCE, 0xF7, 0x85, 0x3C}));
}

TEST(TorchStoreCodecTest, ALongConnectionDoesNotHoldWhatItHasRead) {
  TorchStoreDecoder decoder(Dialect::kLegacy, {});
  const std::string set = Op1(0) + Str("/key") + Str(std::string(100, 'v'));
  TorchStoreRequest r;
  for (int i = 0; i < 1000; ++i) {
    decoder.Append(set.substr(0, 50));
    EXPECT_EQ(decoder.Next(&r), Result::kNeedMore);
    decoder.Append(set.substr(50));
    ASSERT_EQ(decoder.Next(&r), Result::kRequest);
  }
  EXPECT_EQ(decoder.buffered(), 0u);
}

}  // namespace
}  // namespace distrun
