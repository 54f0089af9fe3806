#include "icefloe/node/copy/gather.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include <arrow/array/builder_primitive.h>
#include <arrow/array/concatenate.h>
#include <arrow/array/data.h>
#include <arrow/array/util.h>
#include <arrow/buffer.h>
#include <arrow/compute/api_vector.h>
#include <arrow/compute/exec.h>
#include <arrow/memory_pool.h>
#include <arrow/table.h>
#include <arrow/type_traits.h>
#include <arrow/util/bit_util.h>
#include <arrow/util/bitmap_ops.h>

namespace icefloe {

namespace {

// Runs of consecutive rows, in storage order. Run k copies `length` rows from
// row `row` of cached batch `batches[batch]` to output rows [dst, dst +
// length) (sorted output) or, for length-1 runs, to output row dst.
struct GatherPlan {
  std::vector<size_t> batches;   // cached batches touched, in visiting order
  std::vector<uint32_t> batch;   // per run: index into `batches`
  std::vector<int64_t> row;      // per run: first row within that cached batch
  std::vector<uint32_t> length;  // per run: rows
  std::vector<uint32_t> dst;     // per run: first output row
  size_t size() const { return row.size(); }
};

// Positions of `rows` in ascending row order (ties in input order). An LSD
// radix sort of the offsets from the smallest row, 11 bits a pass: a few
// linear passes where a comparison sort costs ~50 ns a row.
std::vector<uint32_t> SortedByRow(const std::vector<uint64_t>& rows) {
  const size_t n = rows.size();
  std::vector<uint32_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<uint32_t>(i);
  if (n < 256) {
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return rows[a] < rows[b]; });
    return order;
  }
  const auto [lo, hi] = std::minmax_element(rows.begin(), rows.end());
  const uint64_t base = *lo;
  const int bits = std::bit_width(*hi - base);
  constexpr int kDigitBits = 11;
  constexpr size_t kBuckets = size_t{1} << kDigitBits;
  std::vector<uint32_t> next(n);
  std::vector<uint32_t> count(kBuckets);
  for (int shift = 0; shift < bits; shift += kDigitBits) {
    std::fill(count.begin(), count.end(), 0);
    for (uint32_t i : order) ++count[((rows[i] - base) >> shift) & (kBuckets - 1)];
    uint32_t sum = 0;
    for (auto& c : count) {
      const uint32_t here = c;
      c = sum;
      sum += here;
    }
    for (uint32_t i : order) next[count[((rows[i] - base) >> shift) & (kBuckets - 1)]++] = i;
    order.swap(next);
  }
  return order;
}

// One column's data in each cached batch the plan touches.
std::vector<const arrow::ArrayData*> ColumnData(const std::vector<CachedBatch>& batches, int column,
                                                const GatherPlan& plan) {
  std::vector<const arrow::ArrayData*> out(plan.batches.size());
  for (size_t s = 0; s < out.size(); ++s) {
    out[s] = batches[plan.batches[s]].batch->column_data(column).get();
  }
  return out;
}

// Columns laid out as [validity, values] with whole-byte values: gathered by
// copying values straight from the cached batches.
int GatherWidth(const arrow::DataType& type) {
  if (!arrow::is_fixed_width(type.id()) || type.id() == arrow::Type::DICTIONARY ||
      type.id() == arrow::Type::BOOL) {
    return 0;
  }
  return std::max(0, type.byte_width());
}

// Copies every run of one fixed-width column, prefetching `ahead` runs
// ahead: scattered rows miss the cache one by one, and only a prefetch far
// enough ahead keeps enough misses in flight. A one-row run (most runs of a
// random take) copies kWidth bytes inline, not through memcpy's size dispatch.
template <int kWidth>
void CopyRuns(const std::vector<const uint8_t*>& base, const GatherPlan& plan, int width,
              size_t ahead, uint8_t* out) {
  const int64_t w = kWidth > 0 ? kWidth : width;
  const int64_t* row = plan.row.data();
  const uint32_t* dst = plan.dst.data();
  const uint32_t* batch = plan.batch.data();
  const uint32_t* length = plan.length.data();
  const size_t n = plan.size();
  const auto src = [&](size_t i) { return base[batch[i]] + row[i] * w; };
  for (size_t i = 0; i < std::min(n, ahead); ++i) __builtin_prefetch(src(i));
  for (size_t i = 0; i < n; ++i) {
    if (i + ahead < n) __builtin_prefetch(src(i + ahead));
    uint8_t* to = out + int64_t{dst[i]} * w;
    if (kWidth > 0 && length[i] == 1) {
      std::memcpy(to, src(i), kWidth);
    } else {
      std::memcpy(to, src(i), static_cast<size_t>(length[i] * w));
    }
  }
}

// One fixed-width column of the gathered rows.
arrow::Result<std::shared_ptr<arrow::ArrayData>> GatherFixedWidth(
    const std::vector<CachedBatch>& batches, int column, int width, const GatherPlan& plan,
    int64_t n, arrow::MemoryPool* pool) {
  const auto data = ColumnData(batches, column, plan);
  bool nulls = false;
  for (const auto* a : data) nulls = nulls || a->GetNullCount() > 0;
  ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> values,
                        arrow::AllocateBuffer(n * width, pool));
  uint8_t* out = values->mutable_data();
  std::vector<const uint8_t*> base(data.size());
  for (size_t s = 0; s < base.size(); ++s) {
    base[s] = data[s]->buffers[1]->data() + data[s]->offset * width;
  }
  // Runs ahead to prefetch. Gathering 2048 random rows of 750k, 18 columns,
  // 2 cores: 8 or 16 runs ahead, 13 ns a value; 64, 7.8-9 (Arrow's take of
  // one contiguous table: 7). Runs of 32 rows (a window shuffle's blocks)
  // stream on the hardware prefetcher, and 64 ahead costs them 10%.
  const size_t ahead = plan.size() * 2 > static_cast<size_t>(n) ? 64 : 8;
  const auto copy = width == 1    ? &CopyRuns<1>
                    : width == 2  ? &CopyRuns<2>
                    : width == 4  ? &CopyRuns<4>
                    : width == 8  ? &CopyRuns<8>
                    : width == 16 ? &CopyRuns<16>
                                  : &CopyRuns<0>;
  copy(base, plan, width, ahead, out);
  std::shared_ptr<arrow::Buffer> validity;
  int64_t null_count = 0;
  if (nulls) {
    ARROW_ASSIGN_OR_RAISE(validity, arrow::AllocateEmptyBitmap(n, pool));
    uint8_t* bits = validity->mutable_data();
    for (size_t i = 0; i < plan.size(); ++i) {
      const arrow::ArrayData& a = *data[plan.batch[i]];
      const uint8_t* src = a.buffers[0] ? a.buffers[0]->data() : nullptr;
      if (src == nullptr) {
        arrow::bit_util::SetBitsTo(bits, plan.dst[i], plan.length[i], true);
      } else {
        arrow::internal::CopyBitmap(src, a.offset + plan.row[i], plan.length[i], bits, plan.dst[i]);
      }
    }
    null_count = n - arrow::internal::CountSetBits(bits, 0, n);
  }
  return arrow::ArrayData::Make(batches.front().batch->schema()->field(column)->type(), n,
                                {std::move(validity), std::move(values)}, null_count);
}

arrow::Status NotHeld(const CachedDataset& copy, uint64_t row) {
  return arrow::Status::KeyError("row ", row, " of dataset '", copy.name(),
                                 "' is not held by this node");
}

// Runs of `rows`, visited in `visit` order (null: rows' own order); output
// row i is the i-th visited with `sorted_output`, else where rows has it.
arrow::Status PlanGather(const CachedDataset& copy, const std::vector<uint64_t>& rows,
                         const std::vector<uint32_t>* visit, bool sorted_output, GatherPlan* plan) {
  const std::vector<CachedBatch>& batches = copy.batches();
  const size_t n = rows.size();
  for (auto* v : {&plan->length, &plan->dst}) v->reserve(n);
  plan->batch.reserve(n);
  plan->row.reserve(n);
  size_t b = batches.size();
  uint64_t prev = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t at = visit != nullptr ? (*visit)[i] : static_cast<uint32_t>(i);
    const uint64_t r = rows[at];
    if (b == batches.size() || r < batches[b].global_start || r >= batches[b].global_stop()) {
      b = copy.BatchIndex(r);
      if (b == batches.size()) return NotHeld(copy, r);
      if (plan->batches.empty() || plan->batches.back() != b) plan->batches.push_back(b);
    } else if (sorted_output && i > 0 && r == prev + 1) {
      ++plan->length.back();  // The run goes on.
      prev = r;
      continue;
    }
    plan->batch.push_back(static_cast<uint32_t>(plan->batches.size() - 1));
    plan->row.push_back(static_cast<int64_t>(r - batches[b].global_start));
    plan->length.push_back(1);
    plan->dst.push_back(sorted_output ? static_cast<uint32_t>(i) : at);
    prev = r;
  }
  return arrow::Status::OK();
}

// The rows `plan` reads, `n` of them, copied into one batch.
arrow::Result<std::shared_ptr<arrow::RecordBatch>> Copy(const CachedDataset& copy,
                                                        const GatherPlan& plan, int64_t n,
                                                        arrow::MemoryPool* pool,
                                                        const std::vector<int>& projection) {
  const std::vector<CachedBatch>& batches = copy.batches();
  const std::shared_ptr<arrow::Schema>& schema = copy.schema();
  // A projection copies only its columns: the rows' other bytes are never read.
  const int out_fields =
      projection.empty() ? schema->num_fields() : static_cast<int>(projection.size());
  std::vector<std::shared_ptr<arrow::Array>> columns(static_cast<size_t>(out_fields));
  std::shared_ptr<arrow::Array> indices;  // for the other columns, made when first needed
  for (int k = 0; k < out_fields; ++k) {
    const int c = projection.empty() ? k : projection[static_cast<size_t>(k)];
    int width = batches.empty() ? 0 : GatherWidth(*schema->field(c)->type());
    if (width > 0) {
      // Fixed width: copy the values run by run, O(rows) whatever the dataset's size.
      ARROW_ASSIGN_OR_RAISE(auto data, GatherFixedWidth(batches, c, width, plan, n, pool));
      columns[k] = arrow::MakeArray(std::move(data));
      continue;
    }
    // Other types (strings, nested, dictionaries, booleans): Arrow's take over
    // the column's chunks, with indices in output order.
    if (indices == nullptr) {
      std::vector<int64_t> local(static_cast<size_t>(n));
      for (size_t i = 0; i < plan.size(); ++i) {
        const int64_t first = copy.LocalStart(plan.batches[plan.batch[i]]) + plan.row[i];
        for (uint32_t k = 0; k < plan.length[i]; ++k) local[plan.dst[i] + k] = first + k;
      }
      arrow::Int64Builder builder(pool);
      ARROW_RETURN_NOT_OK(builder.AppendValues(local));
      ARROW_ASSIGN_OR_RAISE(indices, builder.Finish());
    }
    arrow::compute::ExecContext ctx(pool);
    ARROW_ASSIGN_OR_RAISE(arrow::Datum taken,
                          arrow::compute::Take(copy.table()->column(c), indices,
                                               arrow::compute::TakeOptions::NoBoundsCheck(), &ctx));
    const auto& chunks = taken.chunked_array()->chunks();
    if (chunks.size() == 1) {
      columns[k] = chunks[0];
    } else if (chunks.empty()) {
      ARROW_ASSIGN_OR_RAISE(columns[k], arrow::MakeEmptyArray(schema->field(c)->type(), pool));
    } else {
      ARROW_ASSIGN_OR_RAISE(columns[k], arrow::Concatenate(chunks, pool));
    }
  }
  if (projection.empty()) return arrow::RecordBatch::Make(schema, n, std::move(columns));
  std::vector<std::shared_ptr<arrow::Field>> fields;
  fields.reserve(projection.size());
  for (int c : projection) fields.push_back(schema->field(c));
  return arrow::RecordBatch::Make(arrow::schema(std::move(fields), schema->metadata()), n,
                                  std::move(columns));
}

}  // namespace

arrow::Result<std::shared_ptr<arrow::RecordBatch>> Gather(const CachedDataset& copy,
                                                          const std::vector<uint64_t>& rows,
                                                          arrow::MemoryPool* pool,
                                                          const std::vector<int>& columns) {
  if (rows.size() > UINT32_MAX) return arrow::Status::Invalid("too many rows in one gather");
  GatherPlan plan;
  const std::vector<uint32_t> sorted = SortedByRow(rows);
  ARROW_RETURN_NOT_OK(PlanGather(copy, rows, &sorted, /*sorted_output=*/false, &plan));
  return Copy(copy, plan, static_cast<int64_t>(rows.size()), pool, columns);
}

arrow::Result<std::shared_ptr<arrow::RecordBatch>> GatherSorted(const CachedDataset& copy,
                                                                const std::vector<uint64_t>& rows,
                                                                arrow::MemoryPool* pool,
                                                                std::vector<uint32_t>* order,
                                                                const std::vector<int>& columns) {
  if (rows.size() > UINT32_MAX) return arrow::Status::Invalid("too many rows in one gather");
  *order = SortedByRow(rows);
  GatherPlan plan;
  ARROW_RETURN_NOT_OK(PlanGather(copy, rows, order, /*sorted_output=*/true, &plan));
  return Copy(copy, plan, static_cast<int64_t>(rows.size()), pool, columns);
}

std::vector<uint32_t> ReadOrder(const std::vector<uint64_t>& rows) {
  // Rows that descend less than once every kStretch rows are ascending
  // stretches (a window's blocks come window by window, ascending within
  // each): read in that order they read storage as monotonically as sorted
  // rows do, and the sort (a fifth of a window stream's CPU) is saved.
  constexpr size_t kStretch = 16;
  size_t descents = 0;
  for (size_t i = 1; i < rows.size(); ++i) descents += rows[i] < rows[i - 1] ? 1 : 0;
  if (descents * kStretch > rows.size()) return SortedByRow(rows);
  return {};
}

arrow::Result<std::shared_ptr<arrow::RecordBatch>> GatherReadOrder(
    const CachedDataset& copy, const std::vector<uint64_t>& rows, arrow::MemoryPool* pool,
    std::vector<uint32_t>* order, const std::vector<int>& columns) {
  if (rows.size() > UINT32_MAX) return arrow::Status::Invalid("too many rows in one gather");
  *order = ReadOrder(rows);
  GatherPlan plan;
  ARROW_RETURN_NOT_OK(
      PlanGather(copy, rows, order->empty() ? nullptr : order, /*sorted_output=*/true, &plan));
  return Copy(copy, plan, static_cast<int64_t>(rows.size()), pool, columns);
}

}  // namespace icefloe
