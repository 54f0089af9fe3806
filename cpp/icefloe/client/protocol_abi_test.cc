#include "icefloe/client/protocol_abi.h"

#include <cstddef>
#include <string>

#include <gtest/gtest.h>

#include "icefloe/client/arrow_c_abi.h"
#include "icefloe/client/merge.h"
#include "icefloe/protocol/piece.h"

namespace icefloe {
namespace {

const uint8_t* Bytes(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }

// The layout Python checks its ctypes mirrors against is this build's own.
TEST(AbiLayout, NamesEachStructsSizeAndFields) {
  const std::string layout = icefloe_abi_layout();
  EXPECT_EQ(layout.front(), '{');
  EXPECT_EQ(layout.back(), '}');
  EXPECT_NE(
      layout.find("\"IcefloeMergeStep\":{\"size\":" + std::to_string(sizeof(IcefloeMergeStep))),
      std::string::npos)
      << layout;
  EXPECT_NE(layout.find("\"rows\":[" + std::to_string(offsetof(IcefloeMergeStep, rows)) + ",8]"),
            std::string::npos)
      << layout;
  EXPECT_NE(layout.find("\"ArrowArray\":{\"size\":" + std::to_string(sizeof(ArrowArray))),
            std::string::npos);
  EXPECT_NE(
      layout.find("\"IcefloePieceHeader\":{\"size\":" + std::to_string(sizeof(IcefloePieceHeader))),
      std::string::npos);
  EXPECT_EQ(icefloe_abi_layout(), icefloe_abi_layout());  // built once
}

TEST(PieceAbi, ParsesWhereEntriesAndSourcesStart) {
  PieceInfo p{7, 100, {}, 3, 40};
  p.positions = {3, 150, 239};
  p.by_reference = true;
  p.source = {{10, 2}, {50, 1}};
  const std::string bytes = EncodePiece(p);
  IcefloePieceHeader h{};
  ASSERT_EQ(icefloe_parse_piece(Bytes(bytes), static_cast<int64_t>(bytes.size()), &h), 0);
  EXPECT_EQ(h.flags, kPiecePositions | kPieceSpan | kPieceByReference);
  EXPECT_EQ(h.batch, 7u);
  EXPECT_EQ(h.batch_size, 100u);
  EXPECT_EQ(h.count, 3u);
  EXPECT_EQ(h.last_size, 40u);
  EXPECT_EQ(h.entries, 3u);
  EXPECT_EQ(h.sources, 2u);
  EXPECT_EQ(h.entry_offset, static_cast<int64_t>(kPieceHeaderBytes));
  EXPECT_EQ(h.source_offset, static_cast<int64_t>(kPieceHeaderBytes + 3 * 4));
}

TEST(PieceAbi, RefusesWithTheErrorsWords) {
  const std::string bytes = EncodePiece({1, 8, {{0, 8}}});
  IcefloePieceHeader h{};
  h.batch = 99;
  const int32_t code =
      icefloe_parse_piece(Bytes(bytes), static_cast<int64_t>(bytes.size()) - 1, &h);
  EXPECT_EQ(code, static_cast<int32_t>(PieceError::kLength));
  EXPECT_STREQ(icefloe_piece_error(code), PieceErrorText(PieceError::kLength));
  EXPECT_EQ(h.batch, 99u) << "left untouched";
  EXPECT_EQ(icefloe_parse_piece(nullptr, -1, &h), static_cast<int32_t>(PieceError::kTruncated));
  EXPECT_STREQ(icefloe_piece_error(200), "unknown error");
}

}  // namespace
}  // namespace icefloe
