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
