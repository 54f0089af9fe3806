#include "icefloe/node/copy/gather.h"
#include "icefloe/node/copy/id_batches_test_util.h"

#include <arrow/array/builder_binary.h>
#include <arrow/array/builder_decimal.h>
#include <arrow/array/builder_primitive.h>
#include <arrow/scalar.h>
#include <arrow/type.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace icefloe {
namespace {

using copy_test_util::Batch;
using copy_test_util::Ids;
using copy_test_util::TestSchema;

// Rows with an int64 id, a float32 with nulls (every 3rd row), an int8 and a
// string (null every 5th row): the gather's fixed-width and fallback paths.
std::shared_ptr<arrow::Schema> MixedSchema() {
  return arrow::schema({arrow::field("id", arrow::int64()), arrow::field("x", arrow::float32()),
                        arrow::field("b", arrow::int8()), arrow::field("s", arrow::utf8())});
}

std::shared_ptr<arrow::RecordBatch> MixedRows(int64_t start, int64_t rows) {
  arrow::Int64Builder id;
  arrow::FloatBuilder x;
  arrow::Int8Builder b;
  arrow::StringBuilder s;
  for (int64_t r = start; r < start + rows; ++r) {
    EXPECT_TRUE(id.Append(r).ok());
    EXPECT_TRUE((r % 3 == 0 ? x.AppendNull() : x.Append(static_cast<float>(r) / 2)).ok());
    EXPECT_TRUE(b.Append(static_cast<int8_t>(r % 100)).ok());
    EXPECT_TRUE((r % 5 == 0 ? s.AppendNull() : s.Append("s" + std::to_string(r))).ok());
  }
  return arrow::RecordBatch::Make(MixedSchema(), rows,
                                  {*id.Finish(), *x.Finish(), *b.Finish(), *s.Finish()});
}

}  // namespace

TEST(CachedDataset, GatherCopiesRowsInRequestOrder) {
  // Batches are slices (non-zero offsets) of bigger batches, with a gap of
  // rows [40, 50) held elsewhere.
  auto big = MixedRows(0, 40);
  auto tail = MixedRows(45, 20);
  auto ds = *CachedDataset::Make(
      "d", 1, MixedSchema(),
      {{0, big->Slice(0, 17)}, {17, big->Slice(17, 23)}, {50, tail->Slice(5, 15)}});
  std::vector<uint64_t> rows = {63, 0, 17, 16, 3, 3, 50, 39, 5, 64, 21};
  auto got = Gather(*ds, rows, arrow::default_memory_pool());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE((*got)->ValidateFull().ok());
  ASSERT_EQ((*got)->num_rows(), static_cast<int64_t>(rows.size()));
  for (size_t k = 0; k < rows.size(); ++k) {
    auto want = MixedRows(static_cast<int64_t>(rows[k]), 1);
    for (int c = 0; c < want->num_columns(); ++c) {
      auto expected = *want->column(c)->GetScalar(0);
      auto actual = *(*got)->column(c)->GetScalar(static_cast<int64_t>(k));
      EXPECT_TRUE(actual->Equals(*expected))
          << "row " << rows[k] << " column " << c << ": " << actual->ToString() << " vs "
          << expected->ToString();
    }
  }
  int64_t nulls = 0;
  for (uint64_t r : rows) nulls += r % 3 == 0;
  EXPECT_EQ((*got)->column(1)->null_count(), nulls);
  EXPECT_TRUE(Gather(*ds, {45}, arrow::default_memory_pool()).status().IsKeyError());
  EXPECT_TRUE(Gather(*ds, {65}, arrow::default_memory_pool()).status().IsKeyError());
  auto none = Gather(*ds, {}, arrow::default_memory_pool());
  ASSERT_TRUE(none.ok());
  EXPECT_EQ((*none)->num_rows(), 0);
}

// A projection gathers only its columns, in its order; each equals that
// column of the full gather (fixed-width with nulls and the string fallback).
TEST(CachedDataset, GatherProjectsColumns) {
  auto big = MixedRows(0, 40);
  auto ds = *CachedDataset::Make("d", 1, MixedSchema(),
                                 {{0, big->Slice(0, 17)}, {17, big->Slice(17, 23)}});
  const std::vector<uint64_t> rows = {39, 0, 17, 16, 3, 3, 18, 19, 20, 5};
  const std::vector<int> columns = {3, 1};  // s, x
  for (bool sorted : {false, true}) {
    std::vector<uint32_t> order, full_order;
    auto full = sorted ? GatherSorted(*ds, rows, arrow::default_memory_pool(), &full_order)
                       : Gather(*ds, rows, arrow::default_memory_pool());
    auto got = sorted ? GatherSorted(*ds, rows, arrow::default_memory_pool(), &order, columns)
                      : Gather(*ds, rows, arrow::default_memory_pool(), columns);
    ASSERT_TRUE(full.ok() && got.ok()) << full.status() << got.status();
    ASSERT_TRUE((*got)->ValidateFull().ok());
    EXPECT_EQ((*got)->schema()->ToString(), "s: string\nx: float");
    EXPECT_EQ(order, full_order);
    auto want = *(*full)->SelectColumns(columns);
    EXPECT_TRUE((*got)->Equals(*want)) << (*got)->ToString() << " vs " << want->ToString();
  }
}

// A window stream's rows: blocks of consecutive rows, ascending within each
// window, windows one after another (so the rows step back between them,
// into earlier cached batches). They are gathered in their own order, whole
// blocks at a time, across batch boundaries; scattered rows are sorted.
TEST(CachedDataset, GatherReadOrderKeepsAscendingStretchesAndSortsTheRest) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  std::vector<CachedBatch> batches;
  uint64_t total = 0;
  for (int b = 0; b < 40; ++b) {  // uneven batches: blocks straddle their edges
    const int64_t n = 1 + static_cast<int64_t>(rng() % 200);
    batches.push_back(Batch(total, n));
    total += static_cast<uint64_t>(n);
  }
  auto ds = *CachedDataset::Make("d", 1, TestSchema(), batches);
  std::vector<uint64_t> window_rows;
  for (int w = 0; w < 4; ++w) {
    std::vector<uint64_t> starts;
    for (int j = 0; j < 12; ++j) starts.push_back(rng() % total);
    std::sort(starts.begin(), starts.end());
    for (uint64_t start : starts) {
      for (uint64_t r = start; r < std::min(start + 32, total); ++r) window_rows.push_back(r);
    }
  }
  std::vector<uint64_t> scattered;
  for (int i = 0; i < 500; ++i) scattered.push_back(rng() % total);
  for (const auto* rows : {&window_rows, &scattered}) {
    std::vector<uint32_t> order = {7};
    auto got = GatherReadOrder(*ds, *rows, arrow::default_memory_pool(), &order);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE((*got)->ValidateFull().ok());
    const auto ids = Ids({*got});
    ASSERT_EQ(ids.size(), rows->size());
    if (rows == &window_rows) {
      EXPECT_TRUE(order.empty());  // kept their own order
      auto want = Gather(*ds, *rows, arrow::default_memory_pool());
      ASSERT_TRUE(want.ok()) << want.status();
      EXPECT_TRUE((*got)->Equals(**want));
      continue;
    }
    ASSERT_EQ(order.size(), rows->size());  // sorted, as GatherSorted
    for (size_t k = 0; k < rows->size(); ++k) {
      ASSERT_EQ(static_cast<uint64_t>(ids[k]), (*rows)[order[k]]);
      if (k > 0) {
        ASSERT_LE(ids[k - 1], ids[k]);
      }
    }
  }
  std::vector<uint32_t> order;
  EXPECT_TRUE(GatherReadOrder(*ds, {0, 1, total}, arrow::default_memory_pool(), &order)
                  .status()
                  .IsKeyError());
}

TEST(CachedDataset, GatherOrdersAgreeAndFindEveryHeldRow) {
  // Many batches of uneven sizes with gaps, spread over several lookup buckets.
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  std::vector<CachedBatch> batches;
  std::vector<uint64_t> held;
  std::vector<uint64_t> gaps;
  uint64_t row = rng() % 100;
  for (int b = 0; b < 400; ++b) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % (b % 50 == 0 ? 9000 : 60));
    batches.push_back(Batch(row, n));
    for (int64_t i = 0; i < n; ++i) held.push_back(row + static_cast<uint64_t>(i));
    row += static_cast<uint64_t>(n);
    const uint64_t gap = rng() % 3 == 0 ? rng() % 40 : 0;
    for (uint64_t g = 0; g < gap; ++g) gaps.push_back(row + g);
    row += gap;
  }
  auto ds = *CachedDataset::Make("d", 1, TestSchema(), batches);
  std::vector<uint64_t> rows;
  for (int i = 0; i < 5000; ++i) rows.push_back(held[rng() % held.size()]);
  rows.push_back(held.front());
  rows.push_back(held.back());
  for (bool sorted : {false, true}) {
    auto gather = [&](const std::vector<uint64_t>& want, std::vector<uint32_t>* order) {
      if (sorted) return GatherSorted(*ds, want, arrow::default_memory_pool(), order);
      order->resize(want.size());
      for (uint32_t i = 0; i < want.size(); ++i) (*order)[i] = i;
      return Gather(*ds, want, arrow::default_memory_pool());
    };
    std::vector<uint32_t> order;
    auto got = gather(rows, &order);
    ASSERT_TRUE(got.ok()) << got.status();
    const auto ids = Ids({*got});
    ASSERT_EQ(ids.size(), rows.size());
    for (size_t k = 0; k < rows.size(); ++k) {
      ASSERT_EQ(static_cast<uint64_t>(ids[k]), rows[order[k]]);
    }
    for (int i = 0; i < 50 && !gaps.empty(); ++i) {
      const uint64_t g = gaps[rng() % gaps.size()];
      EXPECT_TRUE(gather({held[0], g}, &order).status().IsKeyError()) << "row " << g;
    }
    EXPECT_TRUE(gather({row + 5}, &order).status().IsKeyError());
    if (held.front() > 0) {
      EXPECT_TRUE(gather({0}, &order).status().IsKeyError());
    }
  }
}

// Every width the gather copies itself (1, 2, 4, 8, 16 bytes and an odd 3),
// in one-row runs and longer ones, fewer and more than the prefetch distance:
// each gathered value is its row's, in either order.
namespace {

std::shared_ptr<arrow::Schema> WidthsSchema() {
  return arrow::schema({arrow::field("u8", arrow::uint8()), arrow::field("i16", arrow::int16()),
                        arrow::field("f32", arrow::float32()), arrow::field("i64", arrow::int64()),
                        arrow::field("d128", arrow::decimal128(30, 2)),
                        arrow::field("b3", arrow::fixed_size_binary(3))});
}

std::shared_ptr<arrow::RecordBatch> WidthsRows(int64_t start, int64_t rows) {
  arrow::UInt8Builder u8;
  arrow::Int16Builder i16;
  arrow::FloatBuilder f32;
  arrow::Int64Builder i64;
  arrow::Decimal128Builder d128(arrow::decimal128(30, 2));
  arrow::FixedSizeBinaryBuilder b3(arrow::fixed_size_binary(3));
  for (int64_t r = start; r < start + rows; ++r) {
    EXPECT_TRUE(u8.Append(static_cast<uint8_t>(r * 7)).ok());
    EXPECT_TRUE((r % 7 == 0 ? i16.AppendNull() : i16.Append(static_cast<int16_t>(r * 3))).ok());
    EXPECT_TRUE(f32.Append(static_cast<float>(r) / 4).ok());
    EXPECT_TRUE(i64.Append(r * 1000003).ok());
    EXPECT_TRUE(d128.Append(arrow::Decimal128(r, static_cast<uint64_t>(r) * 11)).ok());
    const char bytes[3] = {static_cast<char>(r), static_cast<char>(r >> 8),
                           static_cast<char>(r >> 16)};
    EXPECT_TRUE(b3.Append(bytes).ok());
  }
  return arrow::RecordBatch::Make(
      WidthsSchema(), rows,
      {*u8.Finish(), *i16.Finish(), *f32.Finish(), *i64.Finish(), *d128.Finish(), *b3.Finish()});
}

}  // namespace

TEST(CachedDataset, GatherCopiesEveryWidthInRunsOfAnyLength) {
  std::vector<CachedBatch> batches;
  for (int64_t start = 0; start < 3000; start += 500) {
    batches.push_back({static_cast<uint64_t>(start), WidthsRows(start, 500)->Slice(0, 450)});
  }
  auto ds = *CachedDataset::Make("d", 1, WidthsSchema(), batches);
  auto held = [](uint64_t r) { return r % 500 < 450; };
  std::mt19937_64 rng(7);
  for (size_t want : {5, 300}) {
    std::vector<uint64_t> rows;
    while (rows.size() < want) {
      const uint64_t first = rng() % 3000;
      const uint64_t run = rng() % 3 == 0 ? 1 + rng() % 40 : 1;  // runs of 1 and longer
      for (uint64_t r = first; r < first + run && rows.size() < want; ++r) {
        if (held(r)) rows.push_back(r);
      }
    }
    for (bool sorted : {false, true}) {
      std::vector<uint32_t> order(rows.size());
      for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
      auto got = sorted ? GatherSorted(*ds, rows, arrow::default_memory_pool(), &order)
                        : Gather(*ds, rows, arrow::default_memory_pool());
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ASSERT_TRUE((*got)->ValidateFull().ok());
      for (size_t k = 0; k < rows.size(); ++k) {
        auto row = WidthsRows(static_cast<int64_t>(rows[order[k]]), 1);
        for (int c = 0; c < row->num_columns(); ++c) {
          auto expected = *row->column(c)->GetScalar(0);
          auto actual = *(*got)->column(c)->GetScalar(static_cast<int64_t>(k));
          ASSERT_TRUE(actual->Equals(*expected))
              << "row " << rows[order[k]] << " column " << c << " (" << want << " rows, sorted "
              << sorted << "): " << actual->ToString() << " vs " << expected->ToString();
        }
      }
    }
  }
}

}  // namespace icefloe
