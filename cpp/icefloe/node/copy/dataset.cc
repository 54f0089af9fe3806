#include "icefloe/node/copy/dataset.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <cstring>

#include <unordered_set>

#include <arrow/array/builder_primitive.h>
#include <arrow/array/concatenate.h>
#include <arrow/array/util.h>
#include <arrow/buffer.h>
#include <arrow/compute/api_vector.h>
#include <arrow/compute/exec.h>
#include <arrow/memory_pool.h>
#include <arrow/table.h>
#include <arrow/type_traits.h>
#include <arrow/util/bit_util.h>

#include <arrow/array/data.h>

namespace icefloe {
namespace {

// Calls fn(buffer) for every buffer of `data`, its children and dictionary.
template <typename Fn>
void ForEachBuffer(const arrow::ArrayData& data, Fn&& fn) {
  for (const auto& buf : data.buffers) {
    if (buf) fn(*buf);
  }
  for (const auto& child : data.child_data) ForEachBuffer(*child, fn);
  if (data.dictionary) ForEachBuffer(*data.dictionary, fn);
}

std::atomic<uint64_t> next_serial{1};

}  // namespace

arrow::Result<std::shared_ptr<CachedDataset>> CachedDataset::Make(
    std::string name, uint64_t generation, std::shared_ptr<arrow::Schema> schema,
    std::vector<CachedBatch> batches, std::shared_ptr<arrow::MemoryPool> pool,
    std::vector<std::shared_ptr<arrow::MemoryPool>> kept,
    std::vector<std::shared_ptr<const MappedRegion>> held) {
  std::vector<std::shared_ptr<arrow::MemoryPool>> pools;
  if (pool) pools.push_back(std::move(pool));
  const bool by_pools = !pools.empty() && kept.empty() && held.empty();
  for (auto& p : kept) {
    if (std::find(pools.begin(), pools.end(), p) == pools.end()) pools.push_back(std::move(p));
  }
  return MakeWithPools(std::move(name), generation, std::move(schema), std::move(batches),
                       std::move(pools), by_pools, std::move(held));
}

arrow::Result<std::shared_ptr<CachedDataset>> CachedDataset::Extend(
    const CachedDataset& base, std::vector<CachedBatch> more,
    std::shared_ptr<arrow::MemoryPool> pool,
    std::vector<std::shared_ptr<const MappedRegion>> held) {
  std::vector<CachedBatch> all = base.batches_;
  all.insert(all.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  std::stable_sort(all.begin(), all.end(), [](const CachedBatch& a, const CachedBatch& b) {
    return a.global_start < b.global_start;
  });
  // Sizes come from the pools only when every part has one no other copy
  // shares (else from the buffers, Make's rule).
  const bool by_pools = base.by_pools_ && pool != nullptr && held.empty();
  std::vector<std::shared_ptr<arrow::MemoryPool>> pools = base.pools_;
  if (pool) pools.push_back(std::move(pool));
  held.insert(held.begin(), base.held_.begin(), base.held_.end());
  return MakeWithPools(base.name_, base.generation_, base.schema_, std::move(all), std::move(pools),
                       by_pools, std::move(held));
}

arrow::Result<std::shared_ptr<CachedDataset>> CachedDataset::MakeWithPools(
    std::string name, uint64_t generation, std::shared_ptr<arrow::Schema> schema,
    std::vector<CachedBatch> batches, std::vector<std::shared_ptr<arrow::MemoryPool>> pools,
    bool size_by_pools, std::vector<std::shared_ptr<const MappedRegion>> held) {
  auto ds = std::shared_ptr<CachedDataset>(new CachedDataset());
  ds->pools_ = std::move(pools);
  ds->held_ = std::move(held);
  ds->name_ = std::move(name);
  ds->generation_ = generation;
  ds->schema_ = std::move(schema);
  uint64_t prev_stop = 0;
  std::unordered_set<const void*> seen;
  for (auto& b : batches) {
    if (b.batch == nullptr || b.batch->num_rows() == 0) continue;
    if (!b.batch->schema()->Equals(*ds->schema_, /*check_metadata=*/false)) {
      return arrow::Status::Invalid("dataset '", ds->name_, "': batch schema ",
                                    b.batch->schema()->ToString(), " differs from ",
                                    ds->schema_->ToString());
    }
    if (!ds->batches_.empty() && b.global_start < prev_stop) {
      return arrow::Status::Invalid("dataset '", ds->name_,
                                    "': batches overlap or are unsorted at row ", b.global_start);
    }
    prev_stop = b.global_stop();
    ds->num_rows_ += b.batch->num_rows();
    // Batches sliced from one chunk share buffers: each is counted once.
    for (const auto& column : b.batch->column_data()) {
      ForEachBuffer(*column, [&](const arrow::Buffer& buf) {
        if (seen.insert(buf.data()).second) ds->nbytes_ += buf.size();
      });
    }
    ds->batches_.push_back(std::move(b));
  }
  ds->by_pools_ = size_by_pools;
  if (size_by_pools) {
    ds->nbytes_ = 0;
    for (const auto& p : ds->pools_) ds->nbytes_ += p->bytes_allocated();
  }
  std::vector<std::shared_ptr<arrow::RecordBatch>> plain;
  int64_t local = 0;
  for (const auto& b : ds->batches_) {
    ds->local_starts_.push_back(local);
    local += b.batch->num_rows();
    plain.push_back(b.batch);
  }
  ARROW_ASSIGN_OR_RAISE(ds->table_, arrow::Table::FromRecordBatches(ds->schema_, plain));
  ds->BuildIndex();
  ds->serial_ = next_serial.fetch_add(1);
  if (!ds->held_.empty()) {
    ds->on_disk_.resize(ds->batches_.size());
    for (size_t i = 0; i < ds->batches_.size(); ++i) {
      const uint8_t* begin = nullptr;
      const uint8_t* end = nullptr;
      for (const auto& column : ds->batches_[i].batch->column_data()) {
        ForEachBuffer(*column, [&](const arrow::Buffer& buf) {
          if (buf.size() == 0) return;
          if (begin == nullptr || buf.data() < begin) begin = buf.data();
          end = std::max(end, buf.data() + buf.size());
        });
      }
      if (begin == nullptr) continue;
      for (const auto& region : ds->held_) {
        if (!region->Contains(begin, end)) continue;
        ds->on_disk_[i] = {begin, end - begin};
        ds->disk_bytes_ += end - begin;
        break;
      }
    }
  }
  return ds;
}

namespace {

// First batch whose rows end after `row`.
std::vector<CachedBatch>::const_iterator FirstEndingAfter(const std::vector<CachedBatch>& batches,
                                                          uint64_t row) {
  return std::upper_bound(batches.begin(), batches.end(), row,
                          [](uint64_t r, const CachedBatch& b) { return r < b.global_stop(); });
}

// Buckets of at least 4096 rows, and at most ~1M of them (8 MB at worst).
constexpr int kMinIndexBits = 12;
constexpr uint64_t kMaxIndexBuckets = uint64_t{1} << 20;

}  // namespace

void CachedDataset::BuildIndex() {
  if (batches_.empty()) return;
  index_base_ = batches_.front().global_start;
  const uint64_t span = batches_.back().global_stop() - index_base_;
  index_bits_ = kMinIndexBits;
  while ((span >> index_bits_) >= kMaxIndexBuckets) ++index_bits_;
  const uint64_t buckets = (span >> index_bits_) + 1;
  bucket_first_.resize(buckets + 1);
  for (uint64_t k = 0; k <= buckets; ++k) {
    const uint64_t row = index_base_ + (k << index_bits_);
    bucket_first_[k] = static_cast<uint32_t>(FirstEndingAfter(batches_, row) - batches_.begin());
  }
}

size_t CachedDataset::BatchIndex(uint64_t row) const {
  if (batches_.empty() || row < index_base_ || row >= batches_.back().global_stop()) {
    return batches_.size();
  }
  const uint64_t k = (row - index_base_) >> index_bits_;
  // The batch holding `row` ends after the bucket's start and starts before
  // the next bucket's start: it lies in [first[k], first[k + 1]].
  auto begin = batches_.begin() + bucket_first_[k];
  auto end = batches_.begin() + std::min<size_t>(bucket_first_[k + 1] + 1, batches_.size());
  auto it = std::upper_bound(begin, end, row,
                             [](uint64_t r, const CachedBatch& b) { return r < b.global_stop(); });
  if (it == batches_.end() || it->global_start > row) return batches_.size();
  return static_cast<size_t>(it - batches_.begin());
}

const CachedBatch* CachedDataset::BatchHolding(uint64_t row) const {
  const size_t i = BatchIndex(row);
  return i == batches_.size() ? nullptr : &batches_[i];
}

int64_t CachedDataset::LocalRow(uint64_t row) const {
  const auto held = Locate(row);
  return held ? static_cast<int64_t>(held->local) : -1;
}

std::optional<CachedDataset::HeldRow> CachedDataset::Locate(uint64_t row) const {
  const size_t i = BatchIndex(row);
  if (i == batches_.size()) return std::nullopt;
  const CachedBatch& b = batches_[i];
  return HeldRow{static_cast<uint64_t>(local_starts_[i]) + (row - b.global_start), b.global_stop()};
}

std::vector<std::shared_ptr<arrow::RecordBatch>> CachedDataset::Slice(RowRange range) const {
  std::vector<std::shared_ptr<arrow::RecordBatch>> out;
  for (auto it = FirstEndingAfter(batches_, range.start);
       it != batches_.end() && it->global_start < range.stop; ++it) {
    uint64_t from = std::max(range.start, it->global_start);
    uint64_t to = std::min(range.stop, it->global_stop());
    if (from == it->global_start && to == it->global_stop()) {
      out.push_back(it->batch);
    } else {
      out.push_back(it->batch->Slice(static_cast<int64_t>(from - it->global_start),
                                     static_cast<int64_t>(to - from)));
    }
  }
  return out;
}

uint64_t CachedDataset::CountRows(RowRange range) const {
  uint64_t n = 0;
  for (auto it = FirstEndingAfter(batches_, range.start);
       it != batches_.end() && it->global_start < range.stop; ++it) {
    n += std::min(range.stop, it->global_stop()) - std::max(range.start, it->global_start);
  }
  return n;
}

}  // namespace icefloe
