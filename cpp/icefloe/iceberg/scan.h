// Scan planning: from a table location and options to the scan tasks that
// produce exactly the table's rows (at a snapshot, projected and filtered).
//
// metadata.json -> snapshot -> manifest list (pruned by partition summaries)
// -> manifests (entries pruned by partition values and column bounds) -> live
// data files, each with the delete files and deletion vector that apply to
// it. Tasks come out oldest data first: by data sequence number, then by file
// path (rows keep their order within a file). The order depends only on the
// snapshot's files, not on how manifests list them, so every load of a
// snapshot gives the same global row order, and appended data gets the
// highest row ids.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <arrow/result.h>
#include <arrow/type_fwd.h>

#include "icefloe/iceberg/data_file.h"
#include "icefloe/iceberg/file_io.h"
#include "icefloe/iceberg/manifest.h"
#include "icefloe/iceberg/scan_metrics.h"
#include "icefloe/iceberg/types.h"

namespace icefloe::iceberg {

struct ScanOptions {
  std::optional<int64_t> snapshot_id;
  std::optional<std::string> ref;    ///< branch or tag name
  std::optional<int64_t> as_of_ms;   ///< latest snapshot at or before this time
  std::vector<std::string> columns;  ///< projection by name; empty = all columns
  std::string filter;                ///< SQL-style predicate; empty = all rows
  /// Manifests parsed by earlier plans (null: every manifest is read).
  ManifestCache* manifests = nullptr;
};

struct ScanPlan {
  std::string metadata_location;  ///< the metadata.json actually read
  std::string table_uuid;
  int32_t format_version = 0;
  std::optional<int64_t> snapshot_id;  ///< empty for a table with no snapshot
  Schema schema;                       ///< the schema rows are read with
  std::vector<int32_t> projection;     ///< top-level field ids, in output order
  std::string filter;                  ///< the filter text (re-bound by readers)
  /// The table's `schema.name-mapping.default` JSON (validated), or empty.
  std::string name_mapping;
  std::shared_ptr<arrow::Schema> arrow_schema;  ///< output schema (projected)
  std::vector<ScanTask> tasks;
  ScanMetrics metrics;

  int64_t total_records() const;  ///< before deletes and filter, each file once
  int64_t total_bytes() const;    ///< data file sizes, each file once
};

/// Plans a scan. `location` is a metadata.json location or a table directory.
/// Errors: IOError for unreadable files (naming them), Invalid for malformed
/// metadata/manifests or a bad filter/column (with the position), KeyError
/// for unknown snapshot ids/refs.
arrow::Result<ScanPlan> PlanScan(FileIO& io, const std::string& location,
                                 const ScanOptions& options);

}  // namespace icefloe::iceberg
