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
#include "icefloe/common/mutex.h"
#include "icefloe/iceberg/file_io.h"
#include "icefloe/iceberg/parquet_columns.h"
#include "icefloe/iceberg/scan_metrics.h"
#include "icefloe/protocol/messages.h"

namespace icefloe {

/// Counters a load updates as it goes; read concurrently for progress.
struct LoadProgress {
  std::atomic<int64_t> tasks_total{0};
  std::atomic<int64_t> tasks_done{0};
  std::atomic<int64_t> rows{0};
  std::atomic<int64_t> bytes_read{0};  ///< data file bytes read from storage
  /// What the load counted (row groups, the transform's drops and packing),
  /// over the tasks done.
  Mutex counters_mu;
  iceberg::LoadCounters counters GUARDED_BY(counters_mu);
  /// Set by the caller to stop the load at its next batch (it then fails
  /// with Cancelled).
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
  /// Other owners of batches' memory (tier files a TaskSink wrote), kept
  /// alive with them.
  std::vector<std::shared_ptr<const MappedRegion>> held;
  int64_t bytes() const { return pool ? pool->bytes_allocated() : 0; }
};

/// Where one task's rows go as they stream out of the reader (the node's
/// memory, or its disk tier). Add sees each of the task's output batches in
/// order; Finish returns the batches to keep, views of whatever now holds
/// them (LoadedTasks::held keeps those owners). One per task, used on one
/// loader thread.
class TaskSink {
 public:
  virtual ~TaskSink() = default;
  virtual arrow::Status Add(std::shared_ptr<arrow::RecordBatch> batch) = 0;
  virtual arrow::Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> Finish() = 0;
};

/// The memory a load's reads may take, shared between the loader (which
/// reserves before each read) and the node's sinks (which say what rows they
/// keep in memory).
struct ReadRoom {
  /// Bytes the reads may hold at once now (the budget less what the node
  /// keeps free, what others use and the rows this load keeps). Null: no
  /// limit (nothing is reserved).
  std::function<int64_t()> available;
  /// The most one read may take (the whole budget): a read that needs more
  /// is refused, naming its file and this. A read alone proceeds though
  /// `available` is less.
  int64_t most = 0;
  std::atomic<int64_t> reserved{0};  ///< estimates of the reads in flight
  std::atomic<int64_t> largest{0};   ///< the largest read estimated so far
  std::atomic<int64_t> kept{0};      ///< bytes of the load's rows kept in memory
};

/// How a load reads: Parquet I/O, memory admission and where rows go.
struct LoadPlan {
  iceberg::ParquetIo io;
  ReadRoom* room = nullptr;  ///< null: reads are not admitted by memory
  /// A sink per task, for its output schema (null: batches stay as read).
  std::function<std::unique_ptr<TaskSink>()> sink;
};

/// Reads every task of `request`, each streamed batch by batch (at most
/// `batch_rows` rows) from its file through deletes, filter and transform
/// into its sink, so a task of any size is never held whole. Before each
/// batch is read its peak memory is reserved from `plan.room` as the file's
/// footer estimates it (ScanTaskReader::read_bytes): a read waits while the
/// reads in flight hold the room, so the reads in flight adapt to the room
/// left, and a read alone always proceeds. A read whose estimate exceeds
/// `room->most` fails before it reads with OutOfMemory naming the file,
/// the estimate and the budget. The first failing task stops the load; its error
/// names the file. progress->cancelled stops it too (Cancelled), at the next
/// batch.
arrow::Result<LoadedTasks> LoadTasks(const NodeLoadRequest& request, iceberg::FileIO& io,
                                     std::shared_ptr<TrackingPool> pool, int32_t threads,
                                     LoadProgress* progress, const LoadPlan& plan = LoadPlan{});

}  // namespace icefloe
