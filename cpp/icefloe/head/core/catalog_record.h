// A catalog record: what the head knows about one cached copy, minus what
// only the head's running state holds (liveness, loads in progress).
//
// The head hands each node holding a copy its record (action node.record);
// the node keeps it with the data and reports it in node.status and
// node.register. A restarted head rebuilds its catalog from these records
// and the row ranges the nodes report (head/core/adopt.h), without reading the
// table again. One record covers every catalog name sharing the copy (dedup
// aliases): `requests` holds one load request per name.
//
// FromJson checks everything it reads (a record comes from a node, over the
// network): a bad record is Invalid naming the field, never a crash.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <arrow/result.h>
#include <nlohmann/json.hpp>

#include "icefloe/head/core/catalog.h"
#include "icefloe/head/core/copy_key.h"
#include "icefloe/iceberg/scan.h"
#include "icefloe/protocol/actions.h"

namespace icefloe {

struct CatalogRecord {
  std::string storage_name;
  CopyKey key;  ///< as text in the JSON ({} when absent: an old record)
  uint64_t generation = 0;
  /// One per catalog name sharing the copy, sorted by name.
  std::vector<LoadRequest> requests;
  std::string metadata_location;
  std::optional<int64_t> snapshot_id;
  std::shared_ptr<arrow::Schema> schema;
  /// The transform's models as the head read them (DatasetEntry::model_sha256).
  std::vector<std::string> model_sha256;
  std::vector<std::string> model_kind;  ///< DatasetEntry::model_kind (absent: older records)
  int64_t num_rows = 0;
  int64_t nbytes = 0;
  int64_t tasks_total = 0;
  int64_t estimated_bytes = 0;
  int64_t split_bytes = 0;  ///< DatasetEntry::split_bytes
  double load_seconds = 0;
  iceberg::ScanMetrics scan;
  /// Exact rows of each scan task, in plan (row id) order: a restarted head
  /// re-plans the pinned snapshot and checks it against these before it
  /// shows the file map or heals the copy.
  std::vector<int64_t> task_rows;
  /// The slice map when the record was made: contiguous, from row 0 to num_rows.
  std::vector<SliceLocation> slices;
  /// When the head made this record (µs since the epoch): of two records of
  /// one copy, the later one names its current aliases.
  int64_t updated_us = 0;

  nlohmann::json ToJson() const;
  /// `what` names the source in errors (e.g. "node X dataset 'd' record").
  static arrow::Result<CatalogRecord> FromJson(const nlohmann::json& j, const std::string& what);
  /// Same copy, names, requests and slice map (updated_us aside).
  bool SameAs(const CatalogRecord& other) const;
};

/// The record of the copy shared by `entries` (one or more catalog entries
/// with the same storage_name and generation; the first gives the copy's
/// fields). `updated_us` stamps it.
CatalogRecord RecordOf(const std::vector<std::shared_ptr<const DatasetEntry>>& entries,
                       int64_t updated_us);

/// The catalog entry of `request` (one of record.requests) over the record's
/// copy, in state "ready", with the record's slice map.
std::shared_ptr<DatasetEntry> EntryOf(const CatalogRecord& record, const LoadRequest& request);

/// Microseconds since the epoch, for CatalogRecord::updated_us.
int64_t NowMicros();

}  // namespace icefloe
