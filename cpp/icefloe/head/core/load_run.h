// LoadRun: one load of a copy onto data nodes, on its load thread, from the
// placed tasks to the published copy. The coordinator (load_coordinator.h)
// plans and places a load and fills the run's inputs; a heal (heal_runner.h)
// fills them with the lost tasks of a copy. The run then starts the tasks on
// their nodes, watches them until staged, numbers the rows, commits and (a
// load) publishes:
//   Load:    node.load everywhere, node.load_status until all are staged,
//            global row ids from the exact row counts, node.commit.
//   Repair:  the same for a heal's tasks, which must give the rows they gave
//            at load; the copy keeps its row ids.
//   Publish: the slice map, the catalog entry; the copy it replaces retired
//            (kept for its readers) or evicted.
// Every fan-out runs on the shared node-call pool, bounded by its timeout;
// the load thread waits for each round. On error nothing is cleaned up here:
// the caller evicts what the run placed (`nodes`).
//
// Not thread-safe: one thread runs it (the job's progress is thread-safe).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <arrow/status.h>

#include "icefloe/common/thread_pool.h"
#include "icefloe/head/core/catalog.h"
#include "icefloe/head/core/load_job.h"
#include "icefloe/head/core/load_options.h"
#include "icefloe/head/core/node_rpc.h"
#include "icefloe/head/core/placement.h"
#include "icefloe/head/core/refresh.h"
#include "icefloe/head/core/registry.h"
#include "icefloe/iceberg/scan.h"

namespace icefloe {

/// What load runs work with. Every pointer outlives the runs.
struct LoadRunEnv {
  const LoadOptions* options = nullptr;
  NodeRpc* rpc = nullptr;
  ThreadPool* calls = nullptr;  ///< node calls
  NodeRegistry* registry = nullptr;
  Catalog* catalog = nullptr;
  /// Runs after Publish puts the copy in the catalog (never under a lock).
  std::function<void()> after_publish;
};

class LoadRun {
 public:
  /// `job` (progress, cancellation) outlives the run.
  LoadRun(const LoadRunEnv* env, LoadJob* job) : env_(env), job_(job) {}

  // The inputs, filled in before Load or Repair.
  iceberg::ScanPlan plan;
  std::shared_ptr<DatasetEntry> entry;  ///< filled in as the load goes; published at the end
  std::shared_ptr<const DatasetEntry> previous;  ///< the copy a reload replaces
  Placement placement;
  std::vector<std::string> nodes;                ///< index -> location, as placed
  std::vector<std::vector<int64_t>> node_tasks;  ///< per node: plan task indices, in order
  bool extend = false;                           ///< a heal: node.load adds rows to the copy
  /// A refresh (refresh.h): the copy reused tasks take their rows from, and
  /// per plan task the old task index it reuses (-1: read).
  std::shared_ptr<const DatasetEntry> base;
  std::vector<int64_t> reuse;

  // What the nodes reported.
  std::vector<NodeLoadState> staged;  ///< per node: its final load state
  std::vector<int64_t> task_rows;     ///< per plan task: exact rows
  std::vector<uint64_t> starts;       ///< per plan task: global id of its first row

  /// Places a refresh's tasks: reused ones on the nodes holding their rows
  /// (`diff`'s holders among `nodes`, in the order of this run's `nodes`),
  /// the others (balanced) within the nodes' free memory. A reused task
  /// whose holder left since the diff is read instead (`diff` updated).
  arrow::Status PlaceRefresh(RefreshDiff* diff, const std::vector<int64_t>& task_bytes,
                             const std::vector<PlacementNode>& nodes);
  /// Loads the placed tasks and commits them with fresh row ids (fills
  /// node_tasks from the placement, then staged, task_rows, starts, and the
  /// entry's num_rows, nbytes and scan counts).
  arrow::Status Load();
  /// Loads a heal's node_tasks into the copy (extend) and commits them at the
  /// rows they had; IOError when a task's row count changed.
  arrow::Status Repair();
  /// Puts the loaded copy in the catalog (state ready, with its slice map and
  /// task map) and retires or evicts the copy it replaces.
  void Publish();

 private:
  arrow::Status StartOnNodes();
  arrow::Status WaitForNodes();
  arrow::Status CommitOnNodes();

  const LoadRunEnv* const env_;
  LoadJob* const job_;
};

}  // namespace icefloe
