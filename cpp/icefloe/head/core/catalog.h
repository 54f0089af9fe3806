// The head's catalog: every dataset it knows, where its slices live, and the
// state of its load.
//
// An entry is created when a load starts (state "loading"), filled in when
// it ends ("ready" or "failed"), and removed by evict. Entries are shared_ptr
// snapshots: readers take a copy under the catalog lock and never see a
// half-updated entry. Several names may share one cached copy (the same
// table, snapshot, columns and filter): they share `storage_name`.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <arrow/type_fwd.h>
#include <nlohmann/json.hpp>

#include "icefloe/common/mutex.h"
#include "icefloe/head/core/copy_key.h"
#include "icefloe/iceberg/scan.h"
#include "icefloe/protocol/actions.h"
#include "icefloe/protocol/copy_state.h"
#include "icefloe/protocol/replies.h"

namespace icefloe {

/// A contiguous run of global rows and the nodes holding it (primary first).
struct SliceLocation {
  uint64_t start = 0;
  uint64_t stop = 0;
  std::vector<std::string> nodes;
};

struct DatasetEntry {
  std::string name;
  std::string storage_name;  ///< the name nodes store it under (tickets use it)
  CopyKey key;               ///< identity of the cached copy (dedup, refresh)
  uint64_t generation = 0;
  /// loading, ready, degraded (some slice has no live replica), healing (a
  /// repair load runs), failed (protocol/copy_state.h).
  CopyState state = CopyState::kLoading;
  LoadRequest request;
  std::string metadata_location;
  std::optional<int64_t> snapshot_id;
  std::shared_ptr<arrow::Schema> schema;  ///< the cached columns (after the transform)
  /// Each tokenize model's SHA-256 as the head read it; nodes check theirs.
  std::vector<std::string> model_sha256;
  /// Each tokenize model's kind ("tokenizer.json WordPiece", "sentencepiece").
  std::vector<std::string> model_kind;
  int64_t num_rows = 0;
  int64_t nbytes = 0;  ///< memory used on nodes, all replicas
  std::vector<SliceLocation> slices;
  std::vector<std::string> nodes;  ///< every node holding this copy (some may hold no rows)
  iceberg::ScanMetrics scan;
  int64_t tasks_total = 0;
  int64_t estimated_bytes = 0;
  /// Data files larger than this were split at row-group boundaries
  /// (iceberg::SplitTasks); 0: none. Re-planning applies the same value.
  int64_t split_bytes = 0;
  double load_seconds = 0;
  std::string error;
  /// A refresh's diff against the copy it replaced (RefreshJson); null after
  /// a full load.
  std::optional<RefreshSummary> refresh;

  // Heal (head/core/heal.cc): what a repair needs to reload exactly the lost rows.
  /// The scan plan the copy was loaded from (same tasks, same order).
  std::shared_ptr<const iceberg::ScanPlan> plan;
  std::vector<uint64_t> task_starts;  ///< per plan task: global id of its first row
  std::vector<int64_t> task_rows;     ///< per plan task: exact rows
  /// When the slice map last changed: node reports requested before then may
  /// not show it yet.
  std::chrono::steady_clock::time_point placed_at{};
  int64_t slices_missing = 0;          ///< slices with no live replica
  int64_t replicas_missing = 0;        ///< slice replicas lost (replication > 1)
  std::optional<double> heal_seconds;  ///< the last heal's duration
  std::string heal_error;              ///< why the copy cannot be healed now

  /// Each data file's rows: {path, start, rows} in plan (row id) order.
  std::vector<FileRun> Files() const;

  /// Description for clients; `with_slices` adds the file and slice maps.
  DatasetDescription Description(bool with_slices) const;
  /// Description(with_slices) as JSON.
  nlohmann::json ToJson(bool with_slices) const { return Description(with_slices).ToJson(); }
};

/// A copy a refresh replaced, kept while consumers may still read it: an
/// epoch started on it finishes on it (docs/protocol.md, "Refresh").
struct RetiredCopy {
  std::shared_ptr<const DatasetEntry> entry;
  uint64_t replaced_by = 0;  ///< the generation that replaced it
  std::chrono::steady_clock::time_point retired_at{};
  /// When a node last reported a reader of it, or the head last handed out
  /// endpoints for it.
  std::chrono::steady_clock::time_point last_used{};
};

class Catalog {
 public:
  std::shared_ptr<const DatasetEntry> Find(const std::string& name) const EXCLUDES(mu_);
  /// A ready entry with this key, if any (for dedup).
  std::shared_ptr<const DatasetEntry> FindByKey(const CopyKey& key) const EXCLUDES(mu_);
  void Put(std::shared_ptr<const DatasetEntry> entry) EXCLUDES(mu_);
  /// Replaces `expected` by `entry` only if `expected` is still the entry of
  /// its name; false otherwise (a reload or evict came first).
  bool Replace(const std::shared_ptr<const DatasetEntry>& expected,
               std::shared_ptr<const DatasetEntry> entry) EXCLUDES(mu_);
  /// Removes `name`; returns the entry and whether its storage is now unused.
  std::pair<std::shared_ptr<const DatasetEntry>, bool> Remove(const std::string& name)
      EXCLUDES(mu_);
  std::vector<std::shared_ptr<const DatasetEntry>> All() const EXCLUDES(mu_);
  /// Applies `change` to a copy of every entry of (storage, generation) and
  /// puts it in place (Replace: a concurrent Put, a reload, wins); false when
  /// none is left (evicted or replaced).
  bool UpdateCopies(const std::string& storage, uint64_t generation,
                    const std::function<void(DatasetEntry*)>& change) EXCLUDES(mu_);
  /// Whether another entry than `name`, or a retired copy, uses
  /// `storage_name` at `generation` (0: at any generation).
  bool StorageShared(const std::string& name, const std::string& storage_name,
                     uint64_t generation) const EXCLUDES(mu_);

  /// Keeps `entry`, replaced by generation `replaced_by`, for its readers.
  void Retire(std::shared_ptr<const DatasetEntry> entry, uint64_t replaced_by,
              std::chrono::steady_clock::time_point now) EXCLUDES(mu_);
  /// The copy of `name` at `generation`: the current entry or a retired copy
  /// (which counts as used `now`); null when neither.
  std::shared_ptr<const DatasetEntry> FindGeneration(
      const std::string& name, uint64_t generation, std::chrono::steady_clock::time_point now) const
      EXCLUDES(mu_);
  /// Marks the retired copy (storage, generation) as used `now`.
  void TouchRetired(const std::string& storage, uint64_t generation,
                    std::chrono::steady_clock::time_point now) EXCLUDES(mu_);
  std::vector<RetiredCopy> Retired() const EXCLUDES(mu_);
  /// Removes and returns the retired copies of `name` at `generation` (0: all).
  std::vector<RetiredCopy> TakeRetired(const std::string& name, uint64_t generation) EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<const DatasetEntry>> entries_ GUARDED_BY(mu_);
  // Few: one per replaced copy still read. Mutable: a lookup marks one used.
  mutable std::vector<RetiredCopy> retired_ GUARDED_BY(mu_);
};

/// Base64 of the Arrow IPC serialization of a schema (for JSON bodies).
std::string SchemaToBase64(const arrow::Schema& schema);

}  // namespace icefloe
