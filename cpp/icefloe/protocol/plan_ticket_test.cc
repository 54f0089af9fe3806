#include "icefloe/protocol/plan_ticket.h"

#include <random>

#include <gtest/gtest.h>

namespace icefloe {

TEST(PlanTicket, RoundTrips) {
  PlanTicket t;
  t.params.order = {1000, 7, 3, ShuffleMode::kBlock, 64, true};
  t.params.world_size = 4;
  t.params.rank = 2;
  t.params.num_workers = 2;
  t.params.worker = 1;
  t.params.batch_size = 16;
  t.params.drop_last = false;
  t.params.start = 128;
  t.batch_begin = 1;
  t.batch_end = 5;
  t.owned = {{0, 100}, {300, 600}};
  auto back = DecodePlanBody(EncodePlanBody(t));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->params.order.seed, 7u);
  EXPECT_EQ(back->params.order.mode, ShuffleMode::kBlock);
  EXPECT_TRUE(back->params.order.shuffle_within_block);
  EXPECT_EQ(back->params.rank, 2u);
  EXPECT_FALSE(back->params.drop_last);
  EXPECT_EQ(back->params.start, 128u);
  EXPECT_EQ(back->batch_end, 5u);
  EXPECT_EQ(back->owned.size(), 2u);
  EXPECT_EQ(back->owned[1], (RowRange{300, 600}));
}

TEST(PlanTicket, RejectsInvalidParamsAndGarbage) {
  PlanTicket t;
  t.params.order.num_rows = 10;
  t.params.world_size = 2;
  t.params.rank = 5;  // >= world_size
  t.params.batch_size = 1;
  auto r = DecodePlanBody(EncodePlanBody(t));
  ASSERT_TRUE(r.status().IsInvalid());
  EXPECT_NE(r.status().message().find("rank"), std::string::npos) << r.status();
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937 rng(seed);
  t.params.rank = 1;
  std::string good = EncodePlanBody(t);
  for (int i = 0; i < 5000; ++i) {
    std::string bytes = good.substr(0, rng() % (good.size() + 1));
    for (auto& c : bytes) {
      if (rng() % 8 == 0) c = static_cast<char>(rng());
    }
    (void)DecodePlanBody(bytes);
    (void)DecodeRowsBody(bytes);
    (void)DecodePieceMetadata(bytes);
  }
}

TEST(RowsTicket, RoundTripsAndBoundsPositions) {
  RowsTicket t{5, {4, 0, 2}, {99, 7, 7}};
  auto back = *DecodeRowsBody(EncodeRowsBody(t));
  EXPECT_EQ(back.rows, t.rows);
  EXPECT_EQ(back.positions, t.positions);
  t.positions[0] = 5;
  EXPECT_TRUE(DecodeRowsBody(EncodeRowsBody(t)).status().IsInvalid());
}

TEST(PieceMetadata, RoundTrips) {
  PieceInfo p{12, 256, {{0, 10}, {20, 5}}};
  auto back = *DecodePieceMetadata(EncodePieceMetadata(p));
  EXPECT_EQ(back.batch, 12u);
  EXPECT_EQ(back.batch_rows, 256u);
  ASSERT_EQ(back.runs.size(), 2u);
  EXPECT_EQ(back.runs[1].offset, 20u);
  EXPECT_FALSE(DecodePieceMetadata("nope").ok());
  EXPECT_EQ(EncodePieceMetadata(p).substr(0, 4), "IFP1");
}

TEST(ChunkMetadata, RoundTripsAndRejectsWhatNoNodeSends) {
  ChunkInfo c{40, 4096, 16, 100};
  const std::string bytes = EncodeChunkMetadata(c);
  EXPECT_EQ(bytes.size(), 24u);
  EXPECT_EQ(bytes.substr(0, 4), "IFP3");
  auto back = *DecodeChunkMetadata(bytes);
  EXPECT_EQ(back.first_batch, 40u);
  EXPECT_EQ(back.batch_rows, 4096u);
  EXPECT_EQ(back.count, 16u);
  EXPECT_EQ(back.last_rows, 100u);
  EXPECT_TRUE(DecodeChunkMetadata(bytes.substr(0, 23)).status().IsInvalid());
  EXPECT_TRUE(DecodeChunkMetadata(bytes + "x").status().IsInvalid());
  EXPECT_TRUE(DecodeChunkMetadata(EncodeChunkMetadata({0, 8, 1, 8})).status().IsInvalid());
  EXPECT_TRUE(DecodeChunkMetadata(EncodeChunkMetadata({0, 8, 2, 0})).status().IsInvalid());
  EXPECT_TRUE(DecodeChunkMetadata(EncodeChunkMetadata({0, 8, 2, 9})).status().IsInvalid());
  EXPECT_TRUE(DecodeChunkMetadata(EncodePieceMetadata({0, 8, {{0, 8}}})).status().IsInvalid());
}

TEST(PieceMetadata, ScatteredRowsTravelAsPositions) {
  // Runs of one row (a window or sample piece): one u32 a row, not two.
  PieceInfo p{3, 100, {{7, 1}, {2, 1}, {50, 2}, {9, 1}}};
  const std::string bytes = EncodePieceMetadata(p);
  EXPECT_EQ(bytes.substr(0, 4), "IFP2");
  EXPECT_EQ(bytes.size(), 4u + 8 + 4 + 4 + 5 * 4);
  auto back = *DecodePieceMetadata(bytes);
  EXPECT_EQ(back.batch, 3u);
  EXPECT_EQ(back.batch_rows, 100u);
  std::vector<uint32_t> positions;
  for (const auto& run : back.runs) {
    for (uint32_t k = 0; k < run.length; ++k) positions.push_back(run.offset + k);
  }
  EXPECT_EQ(positions, (std::vector<uint32_t>{7, 2, 50, 51, 9}));
  EXPECT_FALSE(DecodePieceMetadata(bytes.substr(0, bytes.size() - 1)).ok());
}

// Positions given row by row (what a node's gather has) encode exactly as
// the same positions given as runs, in whichever form is smaller.
TEST(PieceMetadata, PositionsEncodeAsTheirRuns) {
  const std::vector<std::vector<PieceRun>> cases = {
      {{7, 1}, {2, 1}, {50, 2}, {9, 1}},  // mostly single rows: IFP2 / IFP5
      {{0, 40}, {60, 30}},                // long runs: IFP1 / IFP4
      {{5, 1}},
  };
  for (const auto& runs : cases) {
    for (uint32_t count : {1u, 3u}) {
      PieceInfo by_runs{9, 100, runs, count, count > 1 ? 40u : 0u};
      PieceInfo by_rows = by_runs;
      by_rows.runs.clear();
      for (const auto& run : runs) {
        for (uint32_t k = 0; k < run.length; ++k) by_rows.positions.push_back(run.offset + k);
      }
      EXPECT_EQ(EncodePieceMetadata(by_rows), EncodePieceMetadata(by_runs))
          << runs.size() << " runs, count " << count;
    }
  }
}

TEST(PieceMetadata, SpansRoundTripAndRejectWhatNoNodeSends) {
  // Three batches of 100 (the last 40): positions run over 240.
  PieceInfo p{7, 100, {{3, 1}, {150, 1}, {239, 1}}, 3, 40};
  std::string bytes = EncodePieceMetadata(p);
  EXPECT_EQ(bytes.substr(0, 4), "IFP5");
  EXPECT_EQ(bytes.size(), 4u + 8 + 4 + 4 + 4 + 4 + 3 * 4);
  auto back = *DecodePieceMetadata(bytes);
  EXPECT_EQ(back.batch, 7u);
  EXPECT_EQ(back.batch_rows, 100u);
  EXPECT_EQ(back.count, 3u);
  EXPECT_EQ(back.last_rows, 40u);
  EXPECT_EQ(back.span_rows(), 240u);
  ASSERT_EQ(back.runs.size(), 3u);
  EXPECT_EQ(back.runs[1].offset, 150u);
  p.runs = {{0, 50}, {100, 40}};
  bytes = EncodePieceMetadata(p);
  EXPECT_EQ(bytes.substr(0, 4), "IFP4");
  back = *DecodePieceMetadata(bytes);
  ASSERT_EQ(back.runs.size(), 2u);
  EXPECT_EQ(back.runs[1].length, 40u);
  EXPECT_EQ(back.count, 3u);
  EXPECT_TRUE(DecodePieceMetadata(bytes.substr(0, 20)).status().IsInvalid());
  for (uint32_t last : {0u, 101u}) {
    EXPECT_TRUE(
        DecodePieceMetadata(EncodePieceMetadata({7, 100, {{0, 1}}, 3, last})).status().IsInvalid());
  }
  EXPECT_EQ(EncodePieceMetadata({7, 100, {{0, 5}}, 1, 0}).substr(0, 4), "IFP1");  // not a span
  bytes = EncodePieceMetadata({7, 100, {{0, 5}}, 2, 100});
  bytes.replace(16, 4, std::string("\1\0\0\0", 4));  // count 1 under a span's magic
  EXPECT_TRUE(DecodePieceMetadata(bytes).status().IsInvalid());
  // More positions than a u32 holds.
  EXPECT_TRUE(
      DecodePieceMetadata(EncodePieceMetadata({0, 1u << 31, {{0, 1}}, 3, 1})).status().IsInvalid());
}

TEST(PlanTicket, WindowModeRoundTrips) {
  PlanTicket t;
  t.params.order.num_rows = 100'000;
  t.params.order.mode = ShuffleMode::kWindow;
  t.params.order.block_rows = 16;
  t.params.order.window_blocks = 300;
  t.params.batch_size = 64;
  t.batch_end = 3;
  auto back = DecodePlanBody(EncodePlanBody(t));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->params.order.mode, ShuffleMode::kWindow);
  EXPECT_EQ(back->params.order.block_rows, 16u);
  EXPECT_EQ(back->params.order.window_blocks, 300u);
  t.params.order.window_blocks = 0;  // Validated on decode.
  auto bad = DecodePlanBody(EncodePlanBody(t));
  ASSERT_TRUE(bad.status().IsInvalid());
  EXPECT_NE(bad.status().message().find("window_blocks"), std::string::npos) << bad.status();
}

}  // namespace icefloe
