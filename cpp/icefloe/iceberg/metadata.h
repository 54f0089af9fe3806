// Table metadata: metadata.json, snapshot selection and finding the current
// metadata file of a table directory.
//
// `ParseTableMetadata` reads format v1 and v2 (v3 is accepted; fields that
// scan planning does not need are ignored), filling v1's single `schema` /
// `partition-spec` and missing v2 fields with the spec's defaults (appendix E),
// so callers see one shape. `SelectSnapshot` implements time travel (by id,
// branch or tag, or timestamp); `LoadTableMetadata` resolves a table location
// through FileIO and parses what it finds.
//
// Errors: IOError for unreadable files (naming the location), Invalid for
// malformed JSON (file and byte offset) or a missing or ill-typed field (naming
// it), NotImplemented for format versions after 3, KeyError for unknown
// snapshot ids, refs and schema ids.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/result.h>
#include <nlohmann/json_fwd.hpp>

#include "icefloe/iceberg/file_io.h"
#include "icefloe/iceberg/partition.h"
#include "icefloe/iceberg/types.h"

namespace icefloe::iceberg {

/// One snapshot: the table's state after a commit.
struct Snapshot {
  int64_t snapshot_id = 0;
  std::optional<int64_t> parent_snapshot_id;
  int64_t sequence_number = 0;  ///< 0 for v1 tables
  int64_t timestamp_ms = 0;
  /// Location of the manifest list (Avro). Empty when a v1 snapshot lists its
  /// manifests inline in `manifests` instead.
  std::string manifest_list;
  std::vector<std::string> manifests;          ///< v1 only, when there is no manifest list
  std::map<std::string, std::string> summary;  ///< includes "operation"
  std::optional<int32_t> schema_id;            ///< the schema it was written with

  /// summary["operation"] ("append", "overwrite", ...), or "" when absent.
  std::string operation() const;
};

/// A named reference to a snapshot.
struct SnapshotRef {
  enum class Kind { kBranch, kTag };
  int64_t snapshot_id = 0;
  Kind kind = Kind::kBranch;
};

/// An entry of `snapshot-log`: `snapshot_id` became current at `timestamp_ms`.
struct SnapshotLogEntry {
  int64_t timestamp_ms = 0;
  int64_t snapshot_id = 0;
};

/// An entry of `metadata-log`: an earlier metadata file of the table.
struct MetadataLogEntry {
  int64_t timestamp_ms = 0;
  std::string metadata_file;
};

/// A parsed metadata.json. Parsing guarantees that `current_schema_id`,
/// `default_spec_id`, `current_snapshot_id` and every ref name an existing
/// schema, spec or snapshot.
struct TableMetadata {
  int32_t format_version = 2;
  std::string table_uuid;  ///< may be empty in v1
  std::string location;    ///< the table's base location
  int64_t last_sequence_number = 0;
  int64_t last_updated_ms = 0;
  int32_t last_column_id = 0;
  int32_t current_schema_id = 0;
  std::vector<Schema> schemas;
  int32_t default_spec_id = 0;
  std::vector<PartitionSpec> partition_specs;
  std::map<std::string, std::string> properties;
  std::optional<int64_t> current_snapshot_id;  ///< none for a table without data
  std::vector<Snapshot> snapshots;
  std::vector<SnapshotLogEntry> snapshot_log;
  std::map<std::string, SnapshotRef> refs;
  std::vector<MetadataLogEntry> metadata_log;
  /// Where this metadata was read from (set by LoadTableMetadata).
  std::string metadata_location;

  /// The current schema (always present after parsing).
  const Schema& CurrentSchema() const;
  /// The schema with `schema_id`, or nullptr.
  const Schema* FindSchema(int32_t schema_id) const;
  /// The partition spec with `spec_id`, or nullptr.
  const PartitionSpec* FindSpec(int32_t spec_id) const;
  /// The default partition spec (always present after parsing).
  const PartitionSpec& DefaultSpec() const;
  /// The snapshot with `snapshot_id`, or nullptr.
  const Snapshot* FindSnapshot(int64_t snapshot_id) const;
  /// The current snapshot, or nullptr for a table without one.
  const Snapshot* CurrentSnapshot() const;
  /// The schema `snapshot` was written with (its schema-id), or the current
  /// schema when the snapshot does not say. Reading an old snapshot uses this
  /// schema, as Iceberg Java and pyiceberg do. KeyError when the snapshot
  /// names a schema that is not in the table.
  arrow::Result<const Schema*> SchemaFor(const Snapshot& snapshot) const;
};

/// Parses metadata.json text. `source` (a file name) prefixes every error.
arrow::Result<TableMetadata> ParseTableMetadata(std::string_view text,
                                                std::string_view source = "metadata.json");
/// Parses an already-parsed metadata.json document (a separate name: a
/// std::string converts to both nlohmann::json and std::string_view).
arrow::Result<TableMetadata> ParseTableMetadataJson(const nlohmann::json& json);

/// Which snapshot of a table to read.
struct SnapshotSelector {
  enum class Kind { kCurrent, kSnapshotId, kRef, kAsOfTimestamp };
  Kind kind = Kind::kCurrent;
  int64_t snapshot_id = 0;         ///< kSnapshotId
  std::string ref;                 ///< kRef: a branch or tag name
  int64_t as_of_timestamp_ms = 0;  ///< kAsOfTimestamp

  /// The current snapshot.
  static SnapshotSelector Current() { return {}; }
  /// A snapshot by id.
  static SnapshotSelector Id(int64_t snapshot_id) {
    return {Kind::kSnapshotId, snapshot_id, {}, 0};
  }
  /// The snapshot a branch or tag points at ("main" is the current snapshot).
  static SnapshotSelector Ref(std::string name) { return {Kind::kRef, 0, std::move(name), 0}; }
  /// The snapshot that was current at a time (milliseconds since the epoch).
  static SnapshotSelector AsOf(int64_t timestamp_ms) {
    return {Kind::kAsOfTimestamp, 0, {}, timestamp_ms};
  }
  /// For messages: "current", "snapshot 42", "ref 'x'", "as of 2024-...Z".
  std::string ToString() const;
};

/// Picks a snapshot. nullptr (not an error) for the current snapshot, or
/// "main", of a table that has none: such a table is empty.
///
/// As-of-timestamp takes the last `snapshot-log` entry at or before the time
/// (as Iceberg Java and pyiceberg do); without a log, the newest ancestor of
/// the current snapshot with timestamp-ms at or before it. KeyError naming the
/// id, ref or time when there is no such snapshot.
arrow::Result<const Snapshot*> SelectSnapshot(const TableMetadata& metadata,
                                              const SnapshotSelector& selector);

/// Whether `location` names a metadata file itself (it ends in ".json" or
/// ".json.gz", trailing slashes aside) rather than a table directory: such a
/// location always reads the same table state.
bool IsMetadataFileLocation(const std::string& location);

/// Finds the current metadata file of a table. A location ending in ".json"
/// (or ".json.gz") is taken as the metadata file itself. Otherwise it is a table directory:
/// `<dir>/metadata/version-hint.text` names the version (a number N for
/// vN.metadata.json, or a file name or location); without a hint, the
/// metadata directory is listed for the highest vN.metadata.json or, as
/// catalogs name them, the highest NNNNN-<uuid>.metadata.json. IOError naming
/// the location when nothing is found; Invalid when two files share the
/// highest sequence number.
arrow::Result<std::string> ResolveMetadataLocation(FileIO& io, const std::string& location);

/// The table directory of a metadata file in its table's `metadata/`
/// directory (`<table>/metadata/<file>`); nullopt for a table directory or a
/// metadata file anywhere else.
std::optional<std::string> TableOfMetadataFile(const std::string& location);

/// The current metadata file of the table `source` names: a table
/// directory, or one of its metadata files (`<table>/metadata/<file>`), whose
/// table may have moved on since (what a refresh loads). A metadata file
/// anywhere else is returned as it is.
arrow::Result<std::string> NewestMetadataLocation(FileIO& io, const std::string& source);

/// Resolves `location` (see ResolveMetadataLocation), reads and parses the
/// metadata file; gzip-compressed files (".gz.metadata.json") are inflated.
/// Errors are prefixed with the metadata file's location.
arrow::Result<TableMetadata> LoadTableMetadata(FileIO& io, const std::string& location);

}  // namespace icefloe::iceberg
