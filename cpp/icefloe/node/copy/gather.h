// Copying scattered rows of a cached copy into one record batch.
//
// The gathers read rows in ascending storage order (monotone addresses, which
// rows spread over a large dataset need: ~4x faster than output order),
// sorting them first unless they already come that way in long stretches, and
// cut them into runs of consecutive rows of one cached batch. Gather writes
// each row where the caller asked for it; GatherSorted writes rows in storage
// order, so each run is one copy; GatherReadOrder is GatherSorted without the
// sort where the rows' own order already reads storage in long stretches.
//
// Each reads `copy` only (immutable), so any number may run at once.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <arrow/memory_pool.h>
#include <arrow/record_batch.h>
#include <arrow/result.h>

#include "icefloe/node/copy/dataset.h"

namespace icefloe {

/// The order to read `rows` in storage order: empty when they already come in
/// long ascending stretches (a window shuffle's blocks, window after window:
/// read them as they come), else the position of each row in ascending row
/// order (ties in input order).
std::vector<uint32_t> ReadOrder(const std::vector<uint64_t>& rows);

/// Copies the given global rows of `copy` (any order, duplicates allowed) into
/// one record batch, in that order. KeyError naming a row `copy` does not hold.
/// `columns` (indices into copy.schema(), checked by the caller; empty: all)
/// projects the batch: only those columns are copied, in that order.
arrow::Result<std::shared_ptr<arrow::RecordBatch>> Gather(const CachedDataset& copy,
                                                          const std::vector<uint64_t>& rows,
                                                          arrow::MemoryPool* pool,
                                                          const std::vector<int>& columns = {});

/// Copies the given global rows of `copy` (any order, duplicates allowed) into
/// one record batch in ascending row order, and sets (*order)[k] to the index
/// in `rows` of the batch's row k. Runs of consecutive rows are copied whole,
/// so rows that come in small blocks (window shuffle) cost little more than a
/// slice: the cheapest gather when the reader reorders rows anyway. Same
/// errors and `columns` as Gather.
arrow::Result<std::shared_ptr<arrow::RecordBatch>> GatherSorted(
    const CachedDataset& copy, const std::vector<uint64_t>& rows, arrow::MemoryPool* pool,
    std::vector<uint32_t>* order, const std::vector<int>& columns = {});

/// GatherSorted, except where `rows` already come in long ascending stretches
/// (a window shuffle's blocks, window after window): then the batch's rows are
/// `rows` in their own order, copied run by run as fast without the sort, and
/// *order is left empty.
arrow::Result<std::shared_ptr<arrow::RecordBatch>> GatherReadOrder(
    const CachedDataset& copy, const std::vector<uint64_t>& rows, arrow::MemoryPool* pool,
    std::vector<uint32_t>* order, const std::vector<int>& columns = {});

}  // namespace icefloe
