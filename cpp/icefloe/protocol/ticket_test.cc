#include "icefloe/protocol/ticket.h"

#include <random>

#include <gtest/gtest.h>

#include "icefloe/common/hmac.h"
#include "icefloe/protocol/plan_ticket.h"

namespace icefloe {
namespace {

std::string Hex(std::string_view s) {
  static const char* kDigits = "0123456789ABCDEF";
  std::string out;
  for (char c : s) {
    if (!out.empty()) out.push_back(' ');
    out.push_back(kDigits[(static_cast<uint8_t>(c) >> 4) & 0xF]);
    out.push_back(kDigits[static_cast<uint8_t>(c) & 0xF]);
  }
  return out;
}

}  // namespace

TEST(KubeflowTicket, MatchesTheContractExamples) {
  EXPECT_EQ(Hex(EncodeKubeflowTicket({0, 24})), "00 18");
  EXPECT_EQ(Hex(EncodeKubeflowTicket({1000, 1999})), "FB E8 03 FB CF 07");
  EXPECT_EQ(Hex(EncodeKubeflowTicket({0, 99999})), "00 FC 9F 86 01 00");
  EXPECT_EQ(Hex(EncodeKubeflowTicket({250, 251})), "FA FB FB 00");
  EXPECT_EQ(Hex(EncodeKubeflowTicket({0, 1ULL << 32})), "00 FD 00 00 00 00 01 00 00 00");
}

TEST(KubeflowTicket, RoundTripsAndIgnoresTrailingBytes) {
  for (uint64_t v :
       {0ULL, 250ULL, 251ULL, 65535ULL, 65536ULL, 4294967295ULL, 4294967296ULL, ~0ULL}) {
    KubeflowTicket t{v, v / 2};
    EXPECT_EQ(*DecodeKubeflowTicket(EncodeKubeflowTicket(t)), t);
    EXPECT_EQ(*DecodeKubeflowTicket(EncodeKubeflowTicket(t) + "junk"), t);
  }
}

TEST(KubeflowTicket, RejectsUndecodableBytes) {
  for (std::string bad : {std::string(), std::string("\x05"), std::string("\xFB\x01"),
                          std::string("\xFE\x00\x00", 3), std::string("\x00\xFC\x01\x02", 4)}) {
    auto r = DecodeKubeflowTicket(bad);
    ASSERT_FALSE(r.ok()) << Hex(bad);
    EXPECT_EQ(r.status().message(), "Invalid ticket format");
  }
}

TEST(NativeTicket, RoundTripsSignedAndUnsigned) {
  TicketHeader h{TicketKind::kRange, "mnist", 42};
  for (std::string secret : {"", "cluster-secret"}) {
    std::string bytes = EncodeNativeTicket(h, EncodeRangeBody({10, 20}), secret);
    EXPECT_TRUE(IsNativeTicket(bytes));
    auto t = DecodeNativeTicket(bytes, secret);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->header.dataset, "mnist");
    EXPECT_EQ(t->header.generation, 42u);
    EXPECT_EQ(t->signed_, !secret.empty());
    EXPECT_EQ(*DecodeRangeBody(t->body), (RowRange{10, 20}));
  }
}

TEST(NativeTicket, NeverCollidesWithKubeflowTickets) {
  // 0xFF is not a valid first byte of Kubeflow's encoding.
  std::string bytes = EncodeNativeTicket({TicketKind::kRange, "d", 1}, EncodeRangeBody({0, 1}), "");
  EXPECT_FALSE(DecodeKubeflowTicket(bytes).ok());
  EXPECT_FALSE(IsNativeTicket(EncodeKubeflowTicket({0, 24})));
}

TEST(NativeTicket, EveryFlippedBitIsRejectedWhenSigned) {
  std::string bytes =
      EncodeNativeTicket({TicketKind::kRange, "ds", 7}, EncodeRangeBody({0, 100}), "k");
  for (size_t bit = 0; bit < bytes.size() * 8; ++bit) {
    std::string tampered = bytes;
    tampered[bit / 8] = static_cast<char>(tampered[bit / 8] ^ (1 << (bit % 8)));
    auto r = DecodeNativeTicket(tampered, "k");
    EXPECT_FALSE(r.ok()) << "bit " << bit;
  }
}

TEST(NativeTicket, RequiresSignatureWhenSecretSet) {
  std::string unsigned_ticket =
      EncodeNativeTicket({TicketKind::kRange, "ds", 7}, EncodeRangeBody({0, 100}), "");
  auto r = DecodeNativeTicket(unsigned_ticket, "k");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not signed"), std::string::npos);
  auto wrong_key = DecodeNativeTicket(
      EncodeNativeTicket({TicketKind::kRange, "ds", 7}, EncodeRangeBody({0, 1}), "other"), "k");
  EXPECT_NE(wrong_key.status().message().find("signature mismatch"), std::string::npos);
}

TEST(NativeTicket, ProjectionRoundTripsInsideTheSignature) {
  TicketHeader h{TicketKind::kPlan, "mnist", 9, {7, 0, 3}};
  for (std::string secret : {"", "k"}) {
    std::string bytes = EncodeNativeTicket(h, EncodeRangeBody({1, 2}), secret);
    auto t = DecodeNativeTicket(bytes, secret);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->header.columns, (std::vector<uint16_t>{7, 0, 3}));
    EXPECT_EQ(t->header.generation, 9u);
    EXPECT_EQ(*DecodeRangeBody(t->body), (RowRange{1, 2}));
  }
  // Unprojected tickets keep their bytes: flags 0, no column list.
  std::string plain = EncodeNativeTicket({TicketKind::kRange, "d", 1}, EncodeRangeBody({0, 1}), "");
  EXPECT_EQ(static_cast<uint8_t>(plain[5]), 0);
  EXPECT_TRUE(DecodeNativeTicket(plain, "")->header.columns.empty());
  std::string projected =
      EncodeNativeTicket({TicketKind::kRange, "d", 1, {2}}, EncodeRangeBody({0, 1}), "");
  EXPECT_EQ(static_cast<uint8_t>(projected[5]), 0x02);
  EXPECT_EQ(projected.size(), plain.size() + 4);  // u16 n, one u16 index
  // Changing the projection of a signed ticket breaks its signature.
  std::string signed_ticket = EncodeNativeTicket(h, EncodeRangeBody({1, 2}), "k");
  signed_ticket[6 + 2 + 5 + 8 + 2] ^= 1;  // the first index's low byte
  EXPECT_NE(DecodeNativeTicket(signed_ticket, "k").status().message().find("signature mismatch"),
            std::string::npos);
}

TEST(NativeTicket, ProjectionIndexOutsideTheDatasetIsInvalid) {
  EXPECT_TRUE(CheckTicketColumns({0, 4, 2}, 5).ok());
  EXPECT_TRUE(CheckTicketColumns({}, 0).ok());
  auto st = CheckTicketColumns({1, 5, 9}, 5);
  ASSERT_TRUE(st.IsInvalid()) << st;
  EXPECT_NE(st.message().find("column index 5"), std::string::npos) << st;
}

TEST(NativeTicket, TruncatedOrDuplicateProjectionIsInvalid) {
  std::string full =
      EncodeNativeTicket({TicketKind::kRange, "d", 1, {3, 1}}, EncodeRangeBody({0, 1}), "");
  // Cut inside the column list (header 6, name 2+1, generation 8, n 2, 2 indices).
  for (size_t cut : {size_t{17}, size_t{18}, size_t{19}, size_t{20}, size_t{22}}) {
    auto t = DecodeNativeTicket(full.substr(0, cut), "");
    ASSERT_FALSE(t.ok()) << cut;
    EXPECT_NE(t.status().message().find("Invalid ticket format"), std::string::npos) << t.status();
  }
  std::string dup = full;
  dup[21] = dup[19];  // second index = first
  dup[22] = dup[20];
  auto t = DecodeNativeTicket(dup, "");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("column index 3 appears twice"), std::string::npos)
      << t.status();
  std::string zero = full;
  zero[17] = 0;  // n = 0
  zero[18] = 0;
  EXPECT_NE(DecodeNativeTicket(zero, "").status().message().find("0 columns"), std::string::npos);
}

TEST(NativeTicket, RandomBytesNeverCrash) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937 rng(seed);
  const std::string plain =
      EncodeNativeTicket({TicketKind::kRange, "ds", 7}, EncodeRangeBody({0, 9}), "");
  const std::string projected =
      EncodeNativeTicket({TicketKind::kRange, "ds", 7, {4, 1, 2}}, EncodeRangeBody({0, 9}), "");
  for (int i = 0; i < 20000; ++i) {
    const std::string& valid = i % 3 == 0 ? projected : plain;
    std::string bytes = valid.substr(0, rng() % (valid.size() + 1));
    for (size_t j = 3; j < bytes.size(); ++j) {
      if (rng() % 4 == 0) bytes[j] = static_cast<char>(rng());
    }
    auto t = DecodeNativeTicket(bytes, i % 2 ? "k" : "");
    if (t.ok()) (void)DecodeRangeBody(t->body);
    if (t.ok()) (void)CheckTicketColumns(t->header.columns, 3);
    (void)DecodeKubeflowTicket(bytes);
  }
}

namespace {

RowsTicket SomeRows() {
  RowsTicket rows;
  rows.total = 3;
  rows.positions = {2, 0, 1};
  rows.rows = {17, 5, 17};
  return rows;
}

}  // namespace

TEST(GrantedRowsTicket, RoundTripsSignedAndUnsigned) {
  const std::string body = EncodeRowsBody(SomeRows());
  for (std::string secret : {"", "cluster-secret"}) {
    std::string grant = EncodeReadGrant({TicketKind::kRange, "ds@3", 9}, secret);
    std::string bytes = EncodeGrantedRowsTicket(grant, body);
    EXPECT_EQ(static_cast<uint8_t>(bytes[4]), 4);  // the kind, whatever the header said
    EXPECT_EQ(bytes.substr(0, grant.size()), grant);
    auto t = DecodeNativeTicket(bytes, secret);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->header.kind, TicketKind::kGrantedRows);
    EXPECT_EQ(t->header.dataset, "ds@3");
    EXPECT_EQ(t->header.generation, 9u);
    EXPECT_EQ(t->signed_, !secret.empty());
    auto rows = DecodeRowsBody(t->body);
    ASSERT_TRUE(rows.ok()) << rows.status();
    EXPECT_EQ(rows->rows, SomeRows().rows);
    EXPECT_EQ(rows->positions, SomeRows().positions);
  }
}

TEST(GrantedRowsTicket, TamperedHeaderIsASignatureMismatch) {
  const std::string grant = EncodeReadGrant({TicketKind::kRows, "ds", 7}, "k");
  const std::string bytes = EncodeGrantedRowsTicket(grant, EncodeRowsBody(SomeRows()));
  // Every bit of the name, the generation and the MAC is covered.
  for (size_t bit = 6 * 8; bit < grant.size() * 8; ++bit) {
    std::string tampered = bytes;
    tampered[bit / 8] = static_cast<char>(tampered[bit / 8] ^ (1 << (bit % 8)));
    auto r = DecodeNativeTicket(tampered, "k");
    ASSERT_FALSE(r.ok()) << "bit " << bit;
  }
  // A grant for one copy does not sign another: a changed generation.
  std::string other = EncodeReadGrant({TicketKind::kRows, "ds", 8}, "k");
  other.replace(other.size() - kHmacSize, kHmacSize, grant.substr(grant.size() - kHmacSize));
  auto r = DecodeNativeTicket(EncodeGrantedRowsTicket(other, EncodeRowsBody(SomeRows())), "k");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("signature mismatch"), std::string::npos) << r.status();
  // Another cluster's grant, and an unsigned one where a secret is set.
  EXPECT_FALSE(DecodeNativeTicket(bytes, "other-secret").ok());
  const std::string open = EncodeGrantedRowsTicket(
      EncodeReadGrant({TicketKind::kRows, "ds", 7}, ""), EncodeRowsBody(SomeRows()));
  EXPECT_FALSE(DecodeNativeTicket(open, "k").ok());
}

TEST(GrantedRowsTicket, ChangedBodyStaysValid) {
  const std::string grant = EncodeReadGrant({TicketKind::kRows, "ds", 7}, "k");
  RowsTicket other;
  other.total = 1;
  other.positions = {0};
  other.rows = {123456};
  auto t = DecodeNativeTicket(EncodeGrantedRowsTicket(grant, EncodeRowsBody(other)), "k");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(DecodeRowsBody(t->body)->rows, other.rows);
}

TEST(GrantedRowsTicket, TruncatedIsInvalid) {
  const std::string grant = EncodeReadGrant({TicketKind::kRows, "ds", 7}, "k");
  for (size_t n = 0; n < grant.size(); ++n) {
    auto r = DecodeNativeTicket(std::string_view(grant).substr(0, n), "k");
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_TRUE(r.status().IsInvalid()) << n;
  }
  // Cut inside the body: the ticket decodes, its body does not.
  const std::string bytes = EncodeGrantedRowsTicket(grant, EncodeRowsBody(SomeRows()));
  auto t = DecodeNativeTicket(std::string_view(bytes).substr(0, bytes.size() - 3), "k");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(DecodeRowsBody(t->body).status().IsInvalid());
}

TEST(GrantedRowsTicket, UnknownFlagsAreInvalid) {
  std::string bytes = EncodeGrantedRowsTicket(EncodeReadGrant({TicketKind::kRows, "ds", 7}, ""),
                                              EncodeRowsBody(SomeRows()));
  bytes[5] = static_cast<char>(0x80);
  EXPECT_TRUE(DecodeNativeTicket(bytes, "").status().IsInvalid());
}

}  // namespace icefloe

namespace icefloe {

TEST(NativeTicket, LengthsFlagRoundTripsInsideTheSignatureOnOneColumnRangesOnly) {
  const TicketHeader header{TicketKind::kRange, "sft", 3, {2}, /*lengths=*/true};
  const std::string ticket = EncodeNativeTicket(header, EncodeRangeBody({0, 10}), "secret");
  EXPECT_EQ(static_cast<uint8_t>(ticket[5]), 0x01 | 0x02 | 0x04);
  auto decoded = DecodeNativeTicket(ticket, "secret");
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_TRUE(decoded->header.lengths);
  EXPECT_EQ(decoded->header.columns, std::vector<uint16_t>{2});
  // Clearing the flag breaks the signature: rows cannot be had for lengths' grant.
  std::string cleared = ticket;
  cleared[5] = static_cast<char>(0x01 | 0x02);
  EXPECT_FALSE(DecodeNativeTicket(cleared, "secret").ok());
  // Only a range ticket of exactly one column may ask for lengths.
  for (const TicketHeader& bad : {TicketHeader{TicketKind::kRange, "sft", 3, {}, true},
                                  TicketHeader{TicketKind::kRange, "sft", 3, {1, 2}, true},
                                  TicketHeader{TicketKind::kRows, "sft", 3, {2}, true}}) {
    auto status = DecodeNativeTicket(EncodeNativeTicket(bad, "", ""), "").status();
    EXPECT_TRUE(status.IsInvalid()) << status;
    EXPECT_NE(status.message().find("lengths ticket"), std::string::npos) << status;
  }
}

}  // namespace icefloe
