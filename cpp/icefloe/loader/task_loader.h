// Loading a node's scan tasks into memory.
//
// A node is handed scan tasks (data file + delete files) by the head. This
// reads them with a bounded number of threads through the Iceberg reader
// (field-id matching, projection, filter, deletes), charging every byte to
// the node's memory budget, and returns each task's batches in task order.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <arrow/record_batch.h>
#include <arrow/result.h>

#include "icefloe/common/memory.h"
#include "icefloe/iceberg/file_io.h"
#include "icefloe/protocol/messages.h"

namespace icefloe {

/// Counters a load updates as it goes; read concurrently for progress.
struct LoadProgress {
  std::atomic<int64_t> tasks_total{0};
  std::atomic<int64_t> tasks_done{0};
  std::atomic<int64_t> rows{0};
  std::atomic<int64_t> bytes_read{0};  ///< data file bytes read from storage
  std::atomic<int64_t> row_groups_total{0};
  std::atomic<int64_t> row_groups_read{0};  ///< the others were pruned by statistics
  /// Set by the caller to stop the load at the next task (it then fails with
  /// Cancelled); a task already being read finishes first.
  std::atomic<bool> cancelled{false};
};

struct LoadedTasks {
  std::shared_ptr<TrackingPool> pool;  ///< owns every buffer below
  std::shared_ptr<arrow::Schema> schema;
  /// Per task (request order): batches of at most batch_rows rows.
  std::vector<std::vector<std::shared_ptr<arrow::RecordBatch>>> batches;
  std::vector<int64_t> rows;  ///< exact rows per task after deletes and filter
  /// Refresh: the pools of the held copy whose batches reused tasks share
  /// (they own those batches' buffers; kept alive with them).
  std::vector<std::shared_ptr<arrow::MemoryPool>> kept_pools;
  /// Other owners of batches' memory (tier files a TaskHook wrote), kept
  /// alive with them.
  std::vector<std::shared_ptr<const MappedRegion>> held;
  int64_t bytes() const { return pool ? pool->bytes_allocated() : 0; }
};

/// Called on a loader thread with each task's batches as read (in `pool`):
/// the batches to keep instead (e.g. the same rows written to the node's disk
/// tier, their memory returned; the caller keeps what owns them, in
/// LoadedTasks::held). May run on several threads at once.
using TaskHook = std::function<arrow::Result<std::vector<std::shared_ptr<arrow::RecordBatch>>>(
    std::vector<std::shared_ptr<arrow::RecordBatch>> batches)>;

/// Reads every task of `request`. The first failing task stops the load; its
/// error names the file (OutOfMemory when the budget is exhausted).
/// progress->cancelled stops it too (Cancelled). `keep`, when set, sees each
/// task's batches once read; as it may take their rows out of memory, a read
/// that runs out of memory while others are in flight then waits for one of
/// them to finish (at most 30 s) and is tried again, at most once per other
/// reader, so that many threads load within a small budget; a read that runs
/// out alone fails as before. `max_reads`, when set, says how many reads may
/// be in flight now (asked as each read starts, which waits while that many
/// are; fewer than 1 counts as 1): how a budget that has run short narrows
/// the load's parallelism rather than have its reads run out of memory.
arrow::Result<LoadedTasks> LoadTasks(const NodeLoadRequest& request, iceberg::FileIO& io,
                                     std::shared_ptr<TrackingPool> pool, int32_t threads,
                                     LoadProgress* progress, const TaskHook& keep = nullptr,
                                     const std::function<int32_t()>& max_reads = nullptr);

}  // namespace icefloe
