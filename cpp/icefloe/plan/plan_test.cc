#include "icefloe/plan/plan.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

namespace icefloe {
namespace {

constexpr ShuffleMode kModes[] = {ShuffleMode::kNone, ShuffleMode::kBlock, ShuffleMode::kSample,
                                  ShuffleMode::kWindow};

// The whole order G, through PositionRows (checked against GlobalRow below).
std::vector<uint64_t> Order(const EpochOrder& order) {
  return *PositionRows(order, 0, order.num_rows);
}

std::vector<uint64_t> Flatten(const std::vector<RowRange>& runs) {
  std::vector<uint64_t> rows;
  for (const RowRange& r : runs) {
    for (uint64_t i = r.start; i < r.stop; ++i) rows.push_back(i);
  }
  return rows;
}

// Row counts, where the domain is small.
std::vector<uint64_t> Counts(uint64_t n, const std::vector<uint64_t>& rows) {
  std::vector<uint64_t> counts(n, 0);
  for (uint64_t r : rows) counts.at(r)++;
  return counts;
}

std::string Describe(const PlanParams& p) {
  std::ostringstream s;
  s << "N=" << p.order.num_rows << " seed=" << p.order.seed << " epoch=" << p.order.epoch
    << " mode=" << ShuffleModeName(p.order.mode) << " block_rows=" << p.order.block_rows
    << " within=" << p.order.shuffle_within_block << " window_blocks=" << p.order.window_blocks
    << " W=" << p.world_size << " K=" << p.num_workers << " B=" << p.batch_size
    << " drop_last=" << p.drop_last << " start=" << p.start;
  return s.str();
}

// Draws a job: N in [0, 5000] with edge cases, W 1..8, K 0..4, B 1..64.
PlanParams RandomJob(std::mt19937_64& rng) {
  static const uint64_t kEdgeRows[] = {0, 1, 2, 3, 7, 61, 97, 127, 128, 997, 4096, 4099, 5000};
  PlanParams p;
  p.order.num_rows = rng() % 3 == 0 ? kEdgeRows[rng() % std::size(kEdgeRows)] : rng() % 5001;
  p.order.seed = rng();
  p.order.epoch = rng() % 100;
  p.order.mode = kModes[rng() % std::size(kModes)];
  p.order.block_rows = rng() % 4 == 0 ? 1 + rng() % 8000 : 1 + rng() % 300;
  p.order.shuffle_within_block = rng() % 2 == 0;
  p.order.window_blocks = rng() % 4 == 0 ? 1 + rng() % 1000 : 1 + rng() % 40;
  if (p.order.mode == ShuffleMode::kWindow) p.order.block_rows = 1 + rng() % 40;
  p.world_size = 1 + rng() % 8;
  p.num_workers = rng() % 5;
  p.batch_size = 1 + rng() % 64;
  p.drop_last = rng() % 2 == 0;
  return p;
}

// What a job reads, as PyTorch delivers it: for every rank, its batches in
// the order its DataLoader yields them, taking batches from the workers
// round-robin and skipping a worker once it is exhausted.
struct JobRead {
  std::vector<std::vector<std::vector<uint64_t>>> rank_batches;  // [rank][step] -> rows
  EpochShape shape;
};

JobRead ReadJob(const PlanParams& job) {
  JobRead read;
  read.shape = *Shape(job);
  read.rank_batches.resize(job.world_size);
  const uint32_t k = std::max<uint32_t>(job.num_workers, 1);
  for (uint32_t r = 0; r < job.world_size; ++r) {
    std::vector<uint64_t> next(k, 0);
    std::vector<uint64_t> count(k);
    for (uint32_t w = 0; w < k; ++w) {
      PlanParams c = job;
      c.rank = r;
      c.worker = w;
      count[w] = Shape(c)->worker_batches;
    }
    for (bool any = true; any;) {
      any = false;
      for (uint32_t w = 0; w < k; ++w) {
        if (next[w] == count[w]) continue;
        PlanParams c = job;
        c.rank = r;
        c.worker = w;
        EXPECT_EQ(StepOfBatch(c, next[w]), read.rank_batches[r].size()) << "rank " << r;
        read.rank_batches[r].push_back(*BatchRows(c, next[w]++));
        any = true;
      }
    }
  }
  return read;
}

// All rows a job reads, step by step, rank by rank.
std::vector<uint64_t> Stream(const JobRead& read) {
  std::vector<uint64_t> rows;
  for (uint64_t s = 0; s < read.shape.steps; ++s) {
    for (const auto& batches : read.rank_batches) {
      rows.insert(rows.end(), batches[s].begin(), batches[s].end());
    }
  }
  return rows;
}

// Positions a job reads from its start: its full steps and the last one.
uint64_t ReadPositions(const PlanParams& job, const EpochShape& shape) {
  if (shape.steps == 0) return 0;
  return (shape.steps - 1) * shape.step_rows + job.world_size * shape.last_batch_size;
}

// What a job from `start` must read: G[start, N) cut short by drop_last or
// followed by G read again from position 0 (position q reads G[q mod N]).
std::vector<uint64_t> Expected(const std::vector<uint64_t>& g, const PlanParams& job,
                               const EpochShape& shape) {
  std::vector<uint64_t> rows;
  for (uint64_t x = 0; x < ReadPositions(job, shape); ++x) {
    rows.push_back(g[(job.start + x) % g.size()]);
  }
  return rows;
}

}  // namespace

TEST(ShuffleMode, NamesRoundTrip) {
  for (ShuffleMode m : kModes) EXPECT_EQ(*ParseShuffleMode(ShuffleModeName(m)), m);
  auto bad = ParseShuffleMode("rows");
  ASSERT_TRUE(bad.status().IsInvalid());
  EXPECT_NE(bad.status().message().find("'rows'"), std::string::npos) << bad.status();
}

TEST(ShuffleMode, OneTableListsEveryModeInTheWiresOrder) {
  EXPECT_EQ(std::vector<std::string_view>(kShuffleModeNames.begin(), kShuffleModeNames.end()),
            (std::vector<std::string_view>{"window", "none", "block", "sample"}));
  for (const ShuffleModeInfo& m : kShuffleModes) {
    EXPECT_EQ(ShuffleModeName(m.mode), m.name);
    EXPECT_TRUE(IsShuffleMode(static_cast<uint8_t>(m.mode))) << m.name;
  }
  EXPECT_FALSE(IsShuffleMode(static_cast<uint8_t>(std::size(kShuffleModes))));
  auto bad = ParseShuffleMode("rows");
  EXPECT_EQ(bad.status().message(),
            "unknown shuffle mode 'rows'; expected 'none', 'block', 'sample' or 'window'");
}

TEST(Plan, RejectsBadParametersNamingTheField) {
  auto expect_invalid = [](const PlanParams& p, const std::string& needle) {
    auto s = Shape(p);
    ASSERT_TRUE(s.status().IsInvalid()) << Describe(p);
    EXPECT_NE(s.status().message().find(needle), std::string::npos) << s.status();
  };
  PlanParams ok;
  ok.order.num_rows = 100;
  ASSERT_TRUE(Shape(ok).ok());
  PlanParams p = ok;
  p.world_size = 0;
  expect_invalid(p, "world_size must be at least 1");
  p = ok;
  p.world_size = 2;
  p.rank = 2;
  expect_invalid(p, "rank 2 is out of range for world_size 2");
  p = ok;
  p.worker = 1;
  expect_invalid(p, "worker 1 is out of range for num_workers 0");
  p.num_workers = 1;
  expect_invalid(p, "worker 1 is out of range for num_workers 1");
  p = ok;
  p.batch_size = 0;
  expect_invalid(p, "batch_size must be at least 1");
  p = ok;
  p.start = 101;
  expect_invalid(p, "start 101 is past the end of the epoch (100 rows)");
  p = ok;
  p.order.mode = ShuffleMode::kBlock;
  expect_invalid(p, "block_rows must be at least 1");
  p = ok;
  p.order.mode = static_cast<ShuffleMode>(9);
  expect_invalid(p, "unknown shuffle mode 9");
  p = ok;
  p.order.num_rows = kMaxPlanRows + 1;
  expect_invalid(p, "num_rows");
  p = ok;
  p.world_size = 1 << 20;
  p.batch_size = uint64_t{1} << 50;
  expect_invalid(p, "world_size * batch_size");

  EXPECT_TRUE(GlobalRow(ok.order, 100).status().IsInvalid());
  EXPECT_TRUE(PositionRows(ok.order, 5, 4).status().IsInvalid());
  EXPECT_TRUE(PositionRuns(ok.order, 0, 101).status().IsInvalid());
  auto past = BatchRows(ok, 100);
  ASSERT_TRUE(past.status().IsInvalid());
  EXPECT_NE(past.status().message().find("reads 100 batch(es)"), std::string::npos)
      << past.status();
}

TEST(Plan, WorkedExampleSequential) {
  // N=10, 2 ranks, batches of 3: drop_last reads one step and drops 4 rows;
  // without it every rank reads ceil(10 / 2) = 5 rows: a step of 3, then a
  // short step of 2 each, nothing repeated.
  PlanParams p;
  p.order.num_rows = 10;
  p.world_size = 2;
  p.batch_size = 3;
  auto drop = *Shape(p);
  EXPECT_EQ(drop.steps, 1u);
  EXPECT_EQ(drop.dropped_rows, 4u);
  EXPECT_EQ(*BatchRows(p, 0), (std::vector<uint64_t>{0, 1, 2}));
  p.rank = 1;
  EXPECT_EQ(*BatchRows(p, 0), (std::vector<uint64_t>{3, 4, 5}));
  p.drop_last = false;
  auto pad = *Shape(p);
  EXPECT_EQ(pad.steps, 2u);
  EXPECT_EQ(pad.last_batch_size, 2u);
  EXPECT_EQ(pad.padded_rows, 0u);
  EXPECT_EQ(pad.worker_rows, 5u);
  EXPECT_EQ(*BatchRows(p, 1), (std::vector<uint64_t>{8, 9}));
  p.rank = 0;
  EXPECT_EQ(*BatchRows(p, 1), (std::vector<uint64_t>{6, 7}));
  // Three ranks: 4 rows each (ceil(10 / 3)); the last step reads one row per
  // rank, rows 0 and 1 again on ranks 1 and 2 (W - 1 = 2 repeats).
  p.world_size = 3;
  pad = *Shape(p);
  EXPECT_EQ(pad.steps, 2u);
  EXPECT_EQ(pad.last_batch_size, 1u);
  EXPECT_EQ(pad.padded_rows, 2u);
  EXPECT_EQ(*BatchRows(p, 1), (std::vector<uint64_t>{9}));
  p.rank = 1;
  EXPECT_EQ(*BatchRows(p, 1), (std::vector<uint64_t>{0}));
  p.rank = 2;
  EXPECT_EQ(*BatchRows(p, 0), (std::vector<uint64_t>{6, 7, 8}));
  EXPECT_EQ(*BatchRuns(p, 1), (std::vector<RowRange>{{1, 2}}));
  // Three workers for two steps: worker 2 has nothing to read.
  p.num_workers = 3;
  p.worker = 2;
  EXPECT_EQ(Shape(p)->worker_batches, 0u);
  p.worker = 1;
  EXPECT_EQ(*BatchRows(p, 0), (std::vector<uint64_t>{1}));
  EXPECT_EQ(Shape(p)->worker_rows, 1u);
  // Resume after the first step of 2 ranks, alone now: rows 6..9, no padding.
  p = PlanParams{};
  p.order.num_rows = 10;
  p.world_size = 2;
  p.batch_size = 3;
  p.start = PositionAfterSteps(p, 1);
  EXPECT_EQ(p.start, 6u);
  p.world_size = 1;
  p.drop_last = false;
  EXPECT_EQ(*BatchRows(p, 0), (std::vector<uint64_t>{6, 7, 8}));
  EXPECT_EQ(*BatchRows(p, 1), (std::vector<uint64_t>{9}));
  EXPECT_EQ(PositionAfterSteps(p, 2), 10u);
}

TEST(Plan, OneRankReadsEveryRowExactlyOnceWithAShortLastBatch) {
  // The evaluation epoch: 1000 rows, batch 64, one process.
  PlanParams p;
  p.order.num_rows = 1000;
  p.order.mode = ShuffleMode::kWindow;
  ResolveDefaults(&p.order);
  p.batch_size = 64;
  p.drop_last = false;
  const auto shape = *Shape(p);
  EXPECT_EQ(shape.steps, 16u);
  EXPECT_EQ(shape.last_batch_size, 1000u - 15 * 64);
  EXPECT_EQ(shape.padded_rows, 0u);
  std::vector<uint64_t> rows;
  for (uint64_t j = 0; j < shape.steps; ++j) {
    const auto batch = *BatchRows(p, j);
    EXPECT_EQ(batch.size(), j + 1 < shape.steps ? 64u : 40u);
    rows.insert(rows.end(), batch.begin(), batch.end());
  }
  for (uint64_t c : Counts(1000, rows)) ASSERT_EQ(c, 1u);
  // The checkpoint after the last step is the end of the epoch, and resuming
  // from it reads nothing, with any shape.
  EXPECT_EQ(PositionAfterSteps(p, 16), 1000u);
  EXPECT_EQ(*ResumePosition(p, 16), 1000u);
  p.start = 1000;
  p.world_size = 3;
  EXPECT_EQ(Shape(p)->steps, 0u);
}

TEST(Plan, ResumePositionRefusesMoreStepsThanTheEpochHas) {
  PlanParams p;
  p.order.num_rows = 100;
  p.batch_size = 10;
  p.world_size = 2;
  EXPECT_EQ(*ResumePosition(p, 0), 0u);
  EXPECT_EQ(*ResumePosition(p, 3), 60u);
  EXPECT_EQ(*ResumePosition(p, 5), 100u);
  auto past = ResumePosition(p, 6);
  ASSERT_TRUE(past.status().IsInvalid());
  EXPECT_NE(past.status().message().find("resume_steps 6 is more than the 5 steps"),
            std::string::npos)
      << past.status();
  p.world_size = 0;
  EXPECT_TRUE(ResumePosition(p, 0).status().IsInvalid());
}

TEST(Plan, PaddingCyclesWhenRanksOutnumberTheRows) {
  // 2 rows, 3 ranks of 2: one step of one row per rank; row 0 once more.
  PlanParams p;
  p.order.num_rows = 2;
  p.world_size = 3;
  p.batch_size = 2;
  p.drop_last = false;
  EXPECT_EQ(Shape(p)->padded_rows, 1u);
  EXPECT_EQ(Shape(p)->last_batch_size, 1u);
  const uint64_t want[] = {0, 1, 0};
  for (uint32_t r = 0; r < 3; ++r) {
    p.rank = r;
    EXPECT_EQ(*BatchRows(p, 0), (std::vector<uint64_t>{want[r]}));
  }
  // 1 row, 5 ranks: every rank reads it.
  p.order.num_rows = 1;
  p.world_size = 5;
  p.rank = 4;
  EXPECT_EQ(Shape(p)->padded_rows, 4u);
  EXPECT_EQ(*BatchRows(p, 0), (std::vector<uint64_t>{0}));
  p.order.num_rows = 2;
  p.world_size = 3;
  p.rank = 0;
  p.drop_last = true;
  EXPECT_EQ(Shape(p)->steps, 0u);
  EXPECT_EQ(Shape(p)->dropped_rows, 2u);
}

TEST(Plan, BlockOrderKeepsBlocksWhole) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  for (int iter = 0; iter < 300; ++iter) {
    EpochOrder o;
    o.mode = ShuffleMode::kBlock;
    o.num_rows = rng() % 3000;
    o.block_rows = 1 + rng() % 200;
    o.seed = rng();
    o.shuffle_within_block = rng() % 2 == 0;
    SCOPED_TRACE(testing::Message() << "N=" << o.num_rows << " B=" << o.block_rows
                                    << " within=" << o.shuffle_within_block);
    const auto g = Order(o);
    // Walk G: every piece is one whole block, in order unless shuffled within.
    std::set<uint64_t> blocks;
    for (uint64_t p = 0; p < g.size();) {
      const uint64_t block = g[p] / o.block_rows;
      const uint64_t length = std::min(o.block_rows, o.num_rows - block * o.block_rows);
      ASSERT_LE(p + length, g.size());
      std::vector<uint64_t> piece(g.begin() + p, g.begin() + p + length);
      if (!o.shuffle_within_block) {
        for (uint64_t i = 0; i < length; ++i) ASSERT_EQ(piece[i], block * o.block_rows + i);
      }
      std::sort(piece.begin(), piece.end());
      for (uint64_t i = 0; i < length; ++i) ASSERT_EQ(piece[i], block * o.block_rows + i);
      ASSERT_TRUE(blocks.insert(block).second);
      p += length;
    }
    // Runs: one per block piece at most, and exactly the rows.
    const uint64_t a = g.empty() ? 0 : rng() % g.size();
    const uint64_t b = a + (g.empty() ? 0 : rng() % (g.size() - a + 1));
    const auto runs = *PositionRuns(o, a, b);
    EXPECT_EQ(Flatten(runs), (std::vector<uint64_t>(g.begin() + a, g.begin() + b)));
    if (!o.shuffle_within_block) {
      EXPECT_LE(runs.size(), (b - a) / o.block_rows + 3);  // Ends and the short block.
    }
  }
}

TEST(Plan, EveryModeOrdersEveryRowOnce) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  for (int iter = 0; iter < 300; ++iter) {
    const PlanParams job = RandomJob(rng);
    SCOPED_TRACE(Describe(job));
    const auto g = Order(job.order);
    ASSERT_EQ(g.size(), job.order.num_rows);
    for (uint64_t c : Counts(job.order.num_rows, g)) ASSERT_EQ(c, 1u);
    for (int i = 0; i < 20 && !g.empty(); ++i) {
      const uint64_t p = rng() % g.size();
      ASSERT_EQ(*GlobalRow(job.order, p), g[p]) << "position " << p;
    }
    if (job.order.mode == ShuffleMode::kNone) {
      for (uint64_t p = 0; p < g.size(); ++p) ASSERT_EQ(g[p], p);
    }
    EXPECT_EQ(Flatten(*PositionRuns(job.order, 0, g.size())), g);
  }
}

TEST(Plan, EpochReadsEveryRowOnceWithEqualBatchesPerRank) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  for (int iter = 0; iter < 200; ++iter) {
    const PlanParams job = RandomJob(rng);
    SCOPED_TRACE(Describe(job));
    const uint64_t n = job.order.num_rows;
    const auto g = Order(job.order);
    const JobRead read = ReadJob(job);
    const EpochShape& shape = read.shape;
    for (const auto& batches : read.rank_batches) {
      ASSERT_EQ(batches.size(), shape.steps);  // Equal batch counts: DDP never hangs.
      for (uint64_t s = 0; s < batches.size(); ++s) {
        // Full batches, and a last one of the same length on every rank.
        ASSERT_EQ(batches[s].size(), s + 1 < shape.steps ? job.batch_size : shape.last_batch_size);
      }
    }
    const auto rows = Stream(read);
    // The stream is G (the prefix property), then padding from G's start.
    ASSERT_EQ(rows, Expected(g, job, shape));
    const auto counts = Counts(n, rows);
    if (job.drop_last) {
      EXPECT_EQ(shape.steps, n / shape.step_rows);
      EXPECT_EQ(shape.padded_rows, 0u);
      EXPECT_EQ(rows.size() + shape.dropped_rows, n);
      // Read at most once; the dropped rows are G's last ones.
      for (uint64_t p = 0; p < n; ++p) ASSERT_EQ(counts[g[p]], p < rows.size() ? 1u : 0u);
    } else {
      // DistributedSampler's rule: ceil(N / W) rows per rank, so at most W - 1
      // repeats in the whole job, none with one rank.
      EXPECT_EQ(shape.dropped_rows, 0u);
      EXPECT_EQ(rows.size(), n + shape.padded_rows);
      EXPECT_EQ(rows.size(), job.world_size * ((n + job.world_size - 1) / job.world_size));
      EXPECT_LT(shape.padded_rows, job.world_size);
      EXPECT_LE(shape.last_batch_size, job.batch_size);
      if (n > 0) {
        EXPECT_GE(shape.last_batch_size, 1u);
      }
      uint64_t repeats = 0;
      for (uint64_t c : counts) {
        ASSERT_GE(c, 1u);
        repeats += c - 1;
      }
      EXPECT_EQ(repeats, shape.padded_rows);
      // The repeats are G's first positions, read again.
      for (uint64_t p = 0; p < shape.padded_rows; ++p) {
        ASSERT_GE(counts[g[p % n]], 2u);
      }
    }
  }
}

TEST(Plan, WorkersSplitARanksShare) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  for (int iter = 0; iter < 200; ++iter) {
    PlanParams job = RandomJob(rng);
    SCOPED_TRACE(Describe(job));
    const JobRead read = ReadJob(job);
    PlanParams solo = job;  // One worker: the rank's own step order.
    solo.num_workers = 0;
    for (uint32_t r = 0; r < job.world_size; ++r) {
      solo.rank = r;
      uint64_t total = 0;
      for (uint32_t w = 0; w < std::max<uint32_t>(job.num_workers, 1); ++w) {
        PlanParams c = job;
        c.rank = r;
        c.worker = w;
        const auto shape = *Shape(c);
        total += shape.worker_batches;
        for (uint64_t j = 0; j < shape.worker_batches; ++j) {
          ASSERT_EQ(*BatchRows(c, j), *BatchRows(solo, StepOfBatch(c, j)));
        }
      }
      ASSERT_EQ(total, read.shape.steps);
      // Round-robin through the DataLoader gives back the rank's step order.
      for (uint64_t s = 0; s < read.shape.steps; ++s) {
        ASSERT_EQ(read.rank_batches[r][s], *BatchRows(solo, s)) << "rank " << r << " step " << s;
      }
    }
  }
}

TEST(Plan, AfterKStepsAllRanksReadAPrefixOfG) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  for (int iter = 0; iter < 200; ++iter) {
    const PlanParams job = RandomJob(rng);
    SCOPED_TRACE(Describe(job));
    const auto g = Order(job.order);
    const JobRead read = ReadJob(job);
    // Step s, whatever the ranks' and workers' interleaving, reads the set
    // G[s*W*B, (s+1)*W*B); so after k steps the ranks have read G's prefix.
    const uint64_t full = job.order.num_rows / read.shape.step_rows;  // Steps without padding.
    for (uint64_t k = 0; k < std::min(full, read.shape.steps); ++k) {
      std::multiset<uint64_t> step;
      for (const auto& batches : read.rank_batches)
        step.insert(batches[k].begin(), batches[k].end());
      const uint64_t begin = PositionAfterSteps(job, k);
      ASSERT_EQ(begin, k * read.shape.step_rows);
      ASSERT_EQ(step, std::multiset<uint64_t>(g.begin() + begin,
                                              g.begin() + begin + read.shape.step_rows))
          << "step " << k;
    }
    EXPECT_EQ(PositionAfterSteps(job, read.shape.steps),
              job.drop_last ? read.shape.steps * read.shape.step_rows : job.order.num_rows);
  }
}

TEST(Plan, ResumeWithAnyShapeReadsExactlyTheRest) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  for (int iter = 0; iter < 200; ++iter) {
    const PlanParams first = RandomJob(rng);
    const uint64_t n = first.order.num_rows;
    const auto g = Order(first.order);
    const JobRead before = ReadJob(first);
    const uint64_t k = rng() % (before.shape.steps + 1);
    // The resumed job keeps the order (and drop_last) but may change the rest.
    PlanParams second = RandomJob(rng);
    second.order = first.order;
    second.drop_last = first.drop_last;
    if (rng() % 3 == 0) {
      second.world_size = first.world_size;
      second.batch_size = first.batch_size;
    }
    second.start = PositionAfterSteps(first, k);
    SCOPED_TRACE(Describe(first) + " | k=" + std::to_string(k) + " | " + Describe(second));
    const JobRead after = ReadJob(second);
    ASSERT_EQ(Stream(after), Expected(g, second, after.shape));

    // Real positions read: [0, P) before, [P, P + read) after, each once.
    std::vector<uint64_t> rows;
    for (uint64_t s = 0; s < k; ++s) {
      for (const auto& batches : before.rank_batches) {
        rows.insert(rows.end(), batches[s].begin(), batches[s].end());
      }
    }
    const uint64_t before_real = std::min<uint64_t>(rows.size(), n);
    ASSERT_EQ(before_real, second.start);
    const auto resumed = Stream(after);
    const uint64_t after_real = std::min<uint64_t>(resumed.size(), after.shape.remaining_rows);
    std::vector<uint64_t> real(rows.begin(), rows.begin() + before_real);
    real.insert(real.end(), resumed.begin(), resumed.begin() + after_real);
    ASSERT_EQ(real, (std::vector<uint64_t>(g.begin(), g.begin() + real.size())));
    if (first.drop_last) {
      EXPECT_EQ(real.size() + after.shape.dropped_rows, n);
    } else {
      EXPECT_EQ(real.size(), n);  // Nothing lost; repeats are padding only.
    }
    // Same shape: exactly the uninterrupted run.
    if (second.world_size == first.world_size && second.batch_size == first.batch_size &&
        k < before.shape.steps) {
      rows.insert(rows.end(), resumed.begin(), resumed.end());
      EXPECT_EQ(rows, Stream(before));
    }
  }
}

TEST(Plan, OrdersDifferByEpochAndSeedAndReproduce) {
  for (ShuffleMode mode : {ShuffleMode::kBlock, ShuffleMode::kSample, ShuffleMode::kWindow}) {
    for (uint64_t n : {10ULL, 11ULL, 100ULL, 4097ULL}) {
      EpochOrder o;
      o.num_rows = n;
      o.mode = mode;
      o.block_rows = std::max<uint64_t>(1, n / 10);  // At least 10 blocks.
      o.window_blocks = 4;
      o.seed = 5;
      o.epoch = 3;
      const auto g = Order(o);
      EXPECT_EQ(Order(o), g);
      std::set<std::vector<uint64_t>> seen = {g};
      for (uint64_t e = 0; e < 20; ++e) {
        EpochOrder other = o;
        other.epoch = e;
        if (e != o.epoch) {
          EXPECT_TRUE(seen.insert(Order(other)).second) << "epoch " << e;
        }
        other = o;
        other.seed = 100 + e;
        EXPECT_TRUE(seen.insert(Order(other)).second) << "seed " << other.seed;
      }
    }
  }
}

TEST(Plan, SampleModePlacesARowUniformly) {
  // Position of row 0 among N=10 over 20000 seeds: chi-square with 9 degrees
  // of freedom has mean 9; 45 is beyond p = 1e-6. Deterministic seeds.
  for (bool vary_epoch : {false, true}) {
    std::vector<uint64_t> counts(10, 0);
    for (uint64_t i = 0; i < 20000; ++i) {
      EpochOrder o;
      o.num_rows = 10;
      o.mode = ShuffleMode::kSample;
      o.seed = vary_epoch ? 77 : i;
      o.epoch = vary_epoch ? i : 0;
      const auto g = Order(o);
      counts[std::find(g.begin(), g.end(), 0) - g.begin()]++;
    }
    double chi = 0;
    for (uint64_t c : counts) chi += (c - 2000.0) * (c - 2000.0) / 2000.0;
    EXPECT_LT(chi, 45.0) << "vary_epoch=" << vary_epoch;
  }
  // And many distinct orders of 6 rows arise (720 possible).
  std::set<std::vector<uint64_t>> orders;
  for (uint64_t seed = 0; seed < 20000; ++seed) {
    EpochOrder o;
    o.num_rows = 6;
    o.mode = ShuffleMode::kSample;
    o.seed = seed;
    orders.insert(Order(o));
  }
  EXPECT_EQ(orders.size(), 720u);
}

TEST(Plan, BatchCostDoesNotDependOnRowCount) {
  // A billion rows: one batch is computed from its positions alone.
  PlanParams p;
  p.order.num_rows = 1'000'000'000;
  p.order.seed = 9;
  p.order.epoch = 4;
  p.world_size = 8;
  p.rank = 5;
  p.num_workers = 4;
  p.worker = 3;
  p.batch_size = 1024;
  for (ShuffleMode mode : kModes) {
    p.order.mode = mode;
    p.order.block_rows = mode == ShuffleMode::kWindow ? 16 : 4096;
    p.order.window_blocks = 256;
    const auto shape = *Shape(p);
    EXPECT_EQ(shape.steps, 1'000'000'000ULL / (8 * 1024));
    const uint64_t last = shape.worker_batches - 1;
    const auto rows = *BatchRows(p, last);
    ASSERT_EQ(rows.size(), 1024u);
    std::set<uint64_t> distinct(rows.begin(), rows.end());
    EXPECT_EQ(distinct.size(), 1024u);
    EXPECT_LT(*distinct.rbegin(), p.order.num_rows);
    const auto runs = *BatchRuns(p, last);
    EXPECT_EQ(Flatten(runs), rows);
    if (mode == ShuffleMode::kNone) {
      EXPECT_EQ(runs.size(), 1u);
    }
    if (mode == ShuffleMode::kBlock) {
      EXPECT_LE(runs.size(), 2u);
    }
  }
  EpochOrder huge;
  huge.num_rows = kMaxPlanRows;
  huge.mode = ShuffleMode::kSample;
  EXPECT_LT(*GlobalRow(huge, kMaxPlanRows - 1), kMaxPlanRows);
  huge.mode = ShuffleMode::kWindow;
  huge.num_rows = kMaxPlanRows - 3;  // A short last block.
  ResolveDefaults(&huge);
  EXPECT_LT(*GlobalRow(huge, kMaxPlanRows - 4), kMaxPlanRows - 3);
  EXPECT_EQ(PositionRows(huge, kMaxPlanRows - 5000, kMaxPlanRows - 3)->size(), 4997u);
}

}  // namespace icefloe
