// Refresh: a newer snapshot of a table cached under the same name, loaded as
// the difference between the two scan plans. Pure decisions; the coordinator
// carries them out (load_coordinator.cc, load_run.cc).
//
// A task of the new plan whose identity (iceberg::TaskIdentity: data file,
// row groups, delete files) matches a task of the cached copy reads the same
// rows, so its rows are taken from the holders of the old copy (zero-copy,
// node.load with `reuse_rows`) instead of read again; every other task (an
// added file, or a file with new deletes) is read. Old tasks without a match
// (removed or rewritten files) are dropped with the old copy. The new copy
// numbers its rows densely in its own plan order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "icefloe/head/core/catalog.h"
#include "icefloe/head/core/heal.h"
#include "icefloe/protocol/replies.h"

namespace icefloe {

struct RefreshDiff {
  /// Per new task: the old copy's task whose rows it takes, or -1 (read it).
  std::vector<int64_t> reuse;
  /// Per new task: the live nodes holding the reused rows (every replica);
  /// empty for a read task and for a reused task of no rows.
  std::vector<std::vector<std::string>> holders;
  int64_t tasks_reused = 0;
  int64_t tasks_read = 0;
  int64_t tasks_dropped = 0;  ///< old tasks the new plan no longer has
  int64_t rows_reused = 0;
  int64_t rows_dropped = 0;  ///< rows of the dropped tasks
  int64_t files_added = 0;   ///< data files the old plan did not read
  int64_t files_removed = 0;
};

/// Matches `tasks` (the new plan's, split like the old) against `old`'s plan
/// tasks. A match is reused only when every replica of its rows is live
/// (`health`: AssessCopy of `old`); otherwise it is read again. `old` must
/// have its plan and task map.
RefreshDiff DiffTasks(const DatasetEntry& old, const std::vector<iceberg::ScanTask>& tasks,
                      const CopyHealth& health);

/// What `describe` shows of a refresh: the generation and snapshot it
/// started from and what the diff kept, read and dropped.
RefreshSummary SummarizeRefresh(const DatasetEntry& old, const RefreshDiff& diff,
                                int64_t rows_read);

}  // namespace icefloe
