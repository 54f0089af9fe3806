// The window shuffle (window_order.h) through plan.h: its structure, how well
// it mixes a sorted table, and the mode defaults.
#include "icefloe/plan/window_order.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "icefloe/plan/plan.h"

namespace icefloe {
namespace {

std::vector<uint64_t> Order(const EpochOrder& order) {
  return *PositionRows(order, 0, order.num_rows);
}

EpochOrder WindowMode(uint64_t n, uint64_t block_rows, uint64_t window_blocks, uint64_t seed) {
  EpochOrder o;
  o.num_rows = n;
  o.mode = ShuffleMode::kWindow;
  o.block_rows = block_rows;
  o.window_blocks = window_blocks;
  o.seed = seed;
  return o;
}

// Mean total-variation distance between the label histogram of each batch
// of `batch` positions (from `offset`) and the table's, for a table of N rows
// sorted by a 10-class label (row r has label 10 r / N).
double MeanLabelDistance(const std::vector<uint64_t>& g, uint64_t batch, uint64_t offset) {
  const uint64_t n = g.size();
  std::vector<double> table(10, 0);
  for (uint64_t r = 0; r < n; ++r) table[r * 10 / n] += 1.0 / static_cast<double>(n);
  double total = 0;
  int batches = 0;
  for (uint64_t p = offset; p + batch <= n; p += batch, ++batches) {
    std::vector<double> h(10, 0);
    for (uint64_t i = p; i < p + batch; ++i) h[g[i] * 10 / n] += 1.0 / static_cast<double>(batch);
    double d = 0;
    for (int c = 0; c < 10; ++c) d += std::abs(h[c] - table[c]);
    total += d / 2;
  }
  return total / batches;
}

}  // namespace

TEST(WindowOrder, EveryWindowTakesOneWholeBlockFromEveryStratum) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  for (int iter = 0; iter < 300; ++iter) {
    const uint64_t n = rng() % 4 == 0 ? rng() % 50 : rng() % 6000;
    const uint64_t c = 1 + rng() % 24;
    const uint64_t m = 1 + rng() % 70;
    SCOPED_TRACE(testing::Message() << "N=" << n << " c=" << c << " m=" << m);
    const WindowOrder w(n, c, m, rng(), rng());
    std::vector<uint64_t> g;
    w.AppendRows(0, n, &g);
    ASSERT_EQ(g.size(), n);
    // The documented layout: C blocks in min(m, C) strata of floor(C / m)
    // or one more blocks, the longer ones spread evenly.
    const uint64_t blocks = (n + c - 1) / c;
    const uint64_t strata = std::min(m, blocks);
    std::vector<uint64_t> stratum_of(blocks);
    for (uint64_t s = 0, b = 0; s < strata; ++s) {
      const uint64_t size = (s + 1) * blocks / strata - s * blocks / strata;
      ASSERT_TRUE(size == blocks / strata || size == blocks / strata + 1);
      for (uint64_t i = 0; i < size; ++i) stratum_of[b++] = s;
    }
    std::set<uint64_t> seen_blocks;
    uint64_t p = 0;
    for (uint64_t k = 0; k < (n ? w.num_windows() : 0); ++k) {
      ASSERT_EQ(w.WindowStart(k), p);
      const uint64_t length = w.WindowLength(k);
      std::vector<uint64_t> rows(g.begin() + p, g.begin() + p + length);
      std::sort(rows.begin(), rows.end());
      // Whole blocks, and no two from one stratum.
      std::set<uint64_t> strata_seen;
      for (uint64_t i = 0; i < rows.size();) {
        const uint64_t b = rows[i] / c;
        const uint64_t size = std::min(c, n - b * c);
        for (uint64_t x = 0; x < size; ++x) ASSERT_EQ(rows.at(i + x), b * c + x);
        ASSERT_TRUE(seen_blocks.insert(b).second) << "block " << b << " twice";
        ASSERT_TRUE(strata_seen.insert(stratum_of[b]).second) << "window " << k;
        i += size;
      }
      // Full windows take every stratum; the last may take fewer.
      if (k + 1 < w.num_windows()) {
        EXPECT_EQ(strata_seen.size(), strata) << "window " << k;
      }
      p += length;
    }
    EXPECT_EQ(p, n);
    EXPECT_EQ(seen_blocks.size(), blocks);
  }
}

TEST(WindowOrder, MixesATableSortedByLabelAsWellAsSample) {
  // The figure: batches of 1024 from a table sorted by a 10-class
  // label, mean total-variation distance to the table's histogram <= 0.05.
  // A uniform sample of 1024 rows averages ~0.037; block shuffle 0.45 to 0.9.
  for (uint64_t n : {10'000ULL, 100'000ULL, 1'000'003ULL}) {
    for (uint64_t seed : {1ULL, 2ULL, 3ULL}) {
      EpochOrder o;
      o.num_rows = n;
      o.seed = seed;
      o.epoch = seed * 7;
      o.mode = ShuffleMode::kWindow;
      ResolveDefaults(&o);
      const auto g = Order(o);
      for (uint64_t offset : {0ULL, 777ULL}) {
        EXPECT_LE(MeanLabelDistance(g, 1024, offset), 0.05)
            << "N=" << n << " seed=" << seed << " offset=" << offset;
      }
      o.mode = ShuffleMode::kSample;
      ResolveDefaults(&o);
      EXPECT_LE(MeanLabelDistance(Order(o), 1024, 0), 0.05);
      o.mode = ShuffleMode::kBlock;
      ResolveDefaults(&o);
      EXPECT_GE(MeanLabelDistance(Order(o), 1024, 0), 0.3) << "block shuffle does not mix";
    }
  }
}

TEST(WindowOrder, DefaultsDoNotDependOnTheLoadAndSmallTablesShuffle) {
  EpochOrder o;
  o.num_rows = 10'000;
  o.mode = ShuffleMode::kBlock;
  ResolveDefaults(&o);
  EXPECT_EQ(o.block_rows, 157u);  // ceil(10000 / 64): 64 blocks
  o.block_rows = 0;
  o.num_rows = 1'000'000'000;
  ResolveDefaults(&o);
  EXPECT_EQ(o.block_rows, 65536u);
  o.num_rows = 0;
  o.block_rows = 0;
  ResolveDefaults(&o);
  EXPECT_EQ(o.block_rows, 1u);
  o.mode = ShuffleMode::kWindow;
  o.block_rows = 0;
  ResolveDefaults(&o);
  EXPECT_EQ(o.block_rows, kDefaultWindowBlockRows);
  EXPECT_EQ(o.window_blocks, kDefaultWindowBlocks);
  o.mode = ShuffleMode::kSample;
  ResolveDefaults(&o);
  EXPECT_EQ(o.block_rows, 0u);
  EXPECT_EQ(o.window_blocks, 0u);
  // Two epochs of a 10,000-row table differ in every shuffling mode, and
  // already in their first batch.
  for (ShuffleMode mode : {ShuffleMode::kBlock, ShuffleMode::kSample, ShuffleMode::kWindow}) {
    EpochOrder a;
    a.num_rows = 10'000;
    a.mode = mode;
    ResolveDefaults(&a);
    EpochOrder b = a;
    b.epoch = 1;
    EXPECT_NE(*PositionRows(a, 0, 64), *PositionRows(b, 0, 64)) << ShuffleModeName(mode);
  }
}

TEST(WindowOrder, RejectsBadWindowParameters) {
  EpochOrder o = WindowMode(100, 0, 4, 0);
  EXPECT_NE(ValidateOrder(o).message().find("block_rows must be at least 1 in window"),
            std::string::npos);
  o = WindowMode(100, 4, 0, 0);
  EXPECT_NE(ValidateOrder(o).message().find("window_blocks 0 is not between 1 and 65536"),
            std::string::npos);
  o = WindowMode(100, 4, kMaxWindowBlocks + 1, 0);
  EXPECT_TRUE(ValidateOrder(o).IsInvalid());
  o = WindowMode(100, kMaxPlanRows / 2, 4, 0);
  EXPECT_NE(ValidateOrder(o).message().find("block_rows * window_blocks"), std::string::npos);
}

TEST(WindowOrder, RowMatchesAppendRows) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  for (int iter = 0; iter < 100; ++iter) {
    const uint64_t n = 1 + rng() % 20000;
    const EpochOrder o = WindowMode(n, 1 + rng() % 40, 1 + rng() % 300, rng());
    const auto g = Order(o);
    for (int i = 0; i < 50; ++i) {
      const uint64_t p = rng() % n;
      ASSERT_EQ(*GlobalRow(o, p), g[p]) << "N=" << n << " position " << p;
    }
  }
}

TEST(WindowOrder, ACacheChangesNothing) {
  // One cache across batches of several orders, visited out of order, as a
  // node's stream (and a confused caller) might.
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  PlanCache cache;
  for (int iter = 0; iter < 40; ++iter) {
    PlanParams p;
    p.order = WindowMode(1 + rng() % 50'000, 1 + rng() % 70, 1 + rng() % 300, rng() % 3);
    p.world_size = 1 + rng() % 3;
    p.batch_size = 1 + rng() % 3000;
    p.drop_last = rng() % 2 == 0;
    const auto shape = *Shape(p);
    for (int b = 0; b < 30 && shape.worker_batches > 0; ++b) {
      const uint64_t j = rng() % 3 == 0 ? rng() % shape.worker_batches
                                        : std::min<uint64_t>(b, shape.worker_batches - 1);
      ASSERT_EQ(*BatchRows(p, j, &cache), *BatchRows(p, j)) << "batch " << j;
    }
  }
}

TEST(WindowOrder, OwnedRowsAreTheBatchRowsInTheOwnedRanges) {
  // What a node serves: from the blocks or from the positions, with or
  // without a cache, every mode, owned ranges cutting through blocks.
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  PlanCache cache;
  constexpr ShuffleMode kAll[] = {ShuffleMode::kNone, ShuffleMode::kBlock, ShuffleMode::kSample,
                                  ShuffleMode::kWindow, ShuffleMode::kWindow};
  for (int iter = 0; iter < 150; ++iter) {
    PlanParams p;
    p.order.num_rows = 1 + rng() % 20'000;
    p.order.mode = kAll[rng() % std::size(kAll)];
    p.order.seed = rng();
    if (rng() % 2 == 0) {
      p.order.block_rows = 1 + rng() % 40;
      p.order.window_blocks = 1 + rng() % 100;
    }
    ResolveDefaults(&p.order);
    p.world_size = 1 + rng() % 3;
    p.rank = static_cast<uint32_t>(rng() % p.world_size);
    p.batch_size = 1 + rng() % 6000;
    p.drop_last = rng() % 2 == 0;
    p.start = rng() % 3 == 0 ? rng() % p.order.num_rows : 0;
    const uint64_t n = p.order.num_rows;
    // 1 to 4 owned ranges with gaps.
    std::vector<RowRange> owned;
    for (uint64_t at = rng() % 50; at < n && owned.size() < 4;) {
      const uint64_t stop = std::min(n, at + 1 + rng() % (n / 2 + 1));
      owned.push_back({at, stop});
      at = stop + rng() % 200;
    }
    const auto shape = *Shape(p);
    SCOPED_TRACE(testing::Message() << "N=" << n << " mode=" << ShuffleModeName(p.order.mode)
                                    << " B=" << p.batch_size << " ranges=" << owned.size());
    for (uint64_t j = 0; j < std::min<uint64_t>(shape.worker_batches, 3); ++j) {
      const auto all = *BatchRows(p, j);
      std::multiset<std::pair<uint64_t, uint32_t>> want;
      for (uint32_t i = 0; i < all.size(); ++i) {
        for (const auto& r : owned) {
          if (all[i] >= r.start && all[i] < r.stop) want.insert({all[i], i});
        }
      }
      for (PlanCache* c : {static_cast<PlanCache*>(nullptr), &cache}) {
        std::vector<uint64_t> rows;
        std::vector<uint32_t> offsets;
        ASSERT_TRUE(BatchOwnedRows(p, j, owned, c, &rows, &offsets).ok());
        ASSERT_EQ(rows.size(), offsets.size());
        std::multiset<std::pair<uint64_t, uint32_t>> got;
        for (size_t i = 0; i < rows.size(); ++i) got.insert({rows[i], offsets[i]});
        ASSERT_EQ(got, want) << "batch " << j;
      }
    }
  }
}

}  // namespace icefloe
