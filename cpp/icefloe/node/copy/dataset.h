// A data node's cached copy of (its part of) one dataset.
//
// A CachedDataset holds record batches, each tagged with the global row id of
// its first row. The batches a node holds need not be contiguous in the global
// row space (a node may own several slices), but they never overlap. Reading is
// arithmetic on global ids: Slice() returns zero-copy views of cached batches
// (gather.h copies scattered rows into one batch).
//
// Immutable after construction and therefore safe to share across threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <arrow/record_batch.h>
#include <arrow/result.h>
#include <arrow/type_fwd.h>

#include "icefloe/common/memory.h"
#include "icefloe/common/row_range.h"

namespace icefloe {

class SharedExport;  // shared_export.h

struct CachedBatch {
  uint64_t global_start = 0;  ///< Global row id of the batch's first row.
  std::shared_ptr<arrow::RecordBatch> batch;
  uint64_t global_stop() const { return global_start + static_cast<uint64_t>(batch->num_rows()); }
};

/// Bytes of a mapped tier file (dataset.h: CachedDataset::on_disk).
struct MappedSpan {
  const uint8_t* data = nullptr;
  int64_t size = 0;  ///< 0: not on the tier
};

class CachedDataset {
 public:
  /// `batches` must share `schema`, be sorted by global_start and not overlap;
  /// empty batches are dropped. Returns Invalid otherwise.
  /// `pool`, when given, is the pool every batch buffer was allocated from;
  /// the dataset keeps it alive and reports its bytes as the dataset's size.
  /// `kept` (a refresh): the pools of another copy some of `batches` share,
  /// kept alive too; the size is then the batches' own buffer bytes, so that
  /// rows two generations share count in each (the node's budget, charged by
  /// the pools, counts them once).
  /// `held`: other owners of batches' memory (the node's tier files, whose
  /// batches are views of a mapped file), kept alive with the copy; a copy
  /// with any is sized by its buffers.
  static arrow::Result<std::shared_ptr<CachedDataset>> Make(
      std::string name, uint64_t generation, std::shared_ptr<arrow::Schema> schema,
      std::vector<CachedBatch> batches, std::shared_ptr<arrow::MemoryPool> pool = nullptr,
      std::vector<std::shared_ptr<arrow::MemoryPool>> kept = {},
      std::vector<std::shared_ptr<const MappedRegion>> held = {});
  /// `base`'s batches plus `more` (rows of the same name and generation that
  /// `base` does not hold, e.g. a healed slice), as one dataset; `pool` (and
  /// `held`, as Make's) are `more`'s, kept alive beside base's. Invalid when
  /// rows overlap.
  static arrow::Result<std::shared_ptr<CachedDataset>> Extend(
      const CachedDataset& base, std::vector<CachedBatch> more,
      std::shared_ptr<arrow::MemoryPool> pool,
      std::vector<std::shared_ptr<const MappedRegion>> held = {});

  const std::string& name() const { return name_; }
  uint64_t generation() const { return generation_; }
  const std::shared_ptr<arrow::Schema>& schema() const { return schema_; }
  int64_t num_rows() const { return num_rows_; }
  int64_t nbytes() const { return nbytes_; }
  const std::vector<CachedBatch>& batches() const { return batches_; }
  /// The pools that own the batches' buffers (none for views of a shared file).
  const std::vector<std::shared_ptr<arrow::MemoryPool>>& pools() const { return pools_; }
  /// The other owners of batches' memory (Make's `held`): non-empty when
  /// some of the copy lives on the node's disk tier.
  const std::vector<std::shared_ptr<const MappedRegion>>& held() const { return held_; }
  /// Per cached batch (same indices as batches()), where its buffers lie in a
  /// held tier file: from its first buffer to the end of its last (a tier
  /// file's batch is contiguous). Size 0 for a batch in memory; empty when
  /// no batch is on the tier.
  const std::vector<MappedSpan>& on_disk() const { return on_disk_; }
  /// Bytes of the copy's batches on the tier (the sum of on_disk's sizes).
  int64_t disk_bytes() const { return disk_bytes_; }
  /// A number no other copy made by this process has: names the copy's
  /// batches (with their index) to the node's read-ahead.
  uint64_t serial() const { return serial_; }
  /// The index in batches() of the batch holding global row `row`, or
  /// batches().size() when this copy holds none.
  size_t BatchIndex(uint64_t row) const;
  /// The cached batch holding global row `row`, or null when this copy holds none.
  const CachedBatch* BatchHolding(uint64_t row) const;
  /// Held global row `row`'s index among the held rows (batch after batch):
  /// its row in a shared export. -1 when this copy does not hold it.
  int64_t LocalRow(uint64_t row) const;
  /// Where a held row lies: its LocalRow and the global end of its cached batch.
  struct HeldRow {
    uint64_t local;
    uint64_t batch_stop;
  };
  /// Held global row `row`'s HeldRow (one lookup), or nullopt when not held.
  std::optional<HeldRow> Locate(uint64_t row) const;
  /// Cached batch `batch`'s first row's index among the held rows (its
  /// LocalRow), without a lookup.
  int64_t LocalStart(size_t batch) const { return local_starts_[batch]; }
  /// The batches as one table (its chunks are batches()): for takes of
  /// scattered rows (gather.h).
  const std::shared_ptr<arrow::Table>& table() const { return table_; }

  /// The sealed memory file this copy's batches are views of, when the node
  /// shares it with same-host readers (shared_export.h); else null.
  const std::shared_ptr<const SharedExport>& shared() const { return shared_; }
  /// Sets shared(): once, before the copy is published (ExportShared).
  void AttachShared(std::shared_ptr<const SharedExport> shared) { shared_ = std::move(shared); }

  /// The rows this node holds within global [range.start, range.stop), in
  /// ascending global order, as zero-copy slices of cached batches. Rows of the
  /// range held elsewhere are skipped (they live on other nodes).
  std::vector<std::shared_ptr<arrow::RecordBatch>> Slice(RowRange range) const;

  /// Number of rows this node holds within `range`.
  uint64_t CountRows(RowRange range) const;

 private:
  CachedDataset() = default;
  static arrow::Result<std::shared_ptr<CachedDataset>> MakeWithPools(
      std::string name, uint64_t generation, std::shared_ptr<arrow::Schema> schema,
      std::vector<CachedBatch> batches, std::vector<std::shared_ptr<arrow::MemoryPool>> pools,
      bool size_by_pools, std::vector<std::shared_ptr<const MappedRegion>> held);
  // Declared first: outlive the batches. One per load that added rows.
  std::vector<std::shared_ptr<arrow::MemoryPool>> pools_;
  std::vector<std::shared_ptr<const MappedRegion>> held_;
  std::string name_;
  uint64_t generation_ = 0;
  std::shared_ptr<arrow::Schema> schema_;
  std::vector<CachedBatch> batches_;
  void BuildIndex();

  std::vector<int64_t> local_starts_;  // index of each batch's first row among held rows
  // Lookup index: bucket k (rows from index_base_ + k << index_bits_ on)
  // starts its search at batch bucket_first_[k] and ends before
  // bucket_first_[k + 1] + 1, so finding a row's batch costs O(1) for
  // batches of at least 2^index_bits_ rows.
  uint64_t index_base_ = 0;
  int index_bits_ = 0;
  std::vector<uint32_t> bucket_first_;
  std::shared_ptr<arrow::Table> table_;
  std::shared_ptr<const SharedExport> shared_;
  std::vector<MappedSpan> on_disk_;
  int64_t disk_bytes_ = 0;
  uint64_t serial_ = 0;
  int64_t num_rows_ = 0;
  int64_t nbytes_ = 0;
  bool by_pools_ = false;  // nbytes_ is what pools_ hold (no other copy shares them)
};

}  // namespace icefloe
