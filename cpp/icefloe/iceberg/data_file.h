// The files a scan reads: data files, delete files, and scan tasks.
//
// These are the manifest entries' `data_file` structs (Iceberg spec field ids
// in comments), with sequence numbers already inherited, and the unit of work
// the planner hands to readers: one data file plus the delete files that apply
// to it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "icefloe/iceberg/types.h"

namespace icefloe::iceberg {

enum class FileContent : int32_t { kData = 0, kPositionDeletes = 1, kEqualityDeletes = 2 };

/// The value an identity partition field gives a table column for every row of
/// a data file. The spec's column projection rule 1: a column the file does not
/// hold (a Hive-migrated or `add_files` table) reads as this constant.
struct PartitionValue {
  int32_t source_id = 0;  ///< the table column's field id
  TypePtr type;           ///< the column's type in the schema the scan reads with
  Literal value;          ///< null for a null partition value
};

struct DataFile {
  FileContent content = FileContent::kData;         // 134
  std::string file_path;                            // 100, a full location
  std::string file_format = "PARQUET";              // 101 (upper-case)
  int32_t spec_id = 0;                              // partition spec of the manifest
  std::vector<Literal> partition;                   // 102, one per partition field
  int64_t record_count = 0;                         // 103
  int64_t file_size_in_bytes = 0;                   // 104
  std::map<int32_t, int64_t> column_sizes;          // 108
  std::map<int32_t, int64_t> value_counts;          // 109
  std::map<int32_t, int64_t> null_value_counts;     // 110
  std::map<int32_t, int64_t> nan_value_counts;      // 137
  std::map<int32_t, std::string> lower_bounds;      // 125, single-value serialized
  std::map<int32_t, std::string> upper_bounds;      // 128, single-value serialized
  std::vector<int64_t> split_offsets;               // 132
  std::vector<int32_t> equality_ids;                // 135
  std::optional<std::string> referenced_data_file;  // 143
  std::optional<int64_t> content_offset;            // 144, a deletion vector's blob
  std::optional<int64_t> content_size_in_bytes;     // 145
  int64_t data_sequence_number = 0;  // entry 3, inherited from the manifest when null
  int64_t file_sequence_number = 0;  // entry 4, inherited likewise
  /// Filled in by the planner for data files: the identity partition values of
  /// the file's partition spec, by source column (not part of the manifest).
  std::vector<PartitionValue> identity_values;

  /// A v3 deletion vector: a position delete stored as a Puffin blob.
  bool is_deletion_vector() const {
    return content == FileContent::kPositionDeletes && file_format == "PUFFIN";
  }
};

/// One data file to read and the delete files that apply to it (position
/// deletes with data sequence number >= the file's; equality deletes with a
/// strictly greater one; same partition, or global for equality deletes of
/// an unpartitioned spec). When a deletion vector applies, it replaces the
/// position delete files (the spec has writers merge those into it).
struct ScanTask {
  DataFile data_file;
  std::vector<DataFile> deletes;
  /// The row groups to read: `row_groups` of them from `first_row_group`;
  /// negative reads to the end of the file. A whole file is {0, -1}; a large
  /// file is split into several tasks at row-group boundaries (SplitTasks) so
  /// that several nodes share it. Delete positions still count rows of the
  /// whole file.
  int32_t first_row_group = 0;
  int32_t row_groups = -1;
  /// Rows in the data file before deletes and the filter.
  int64_t record_count() const { return data_file.record_count; }
  bool whole_file() const { return first_row_group == 0 && row_groups < 0; }
};

/// Splits every task whose data file is larger than `target_bytes` into
/// tasks of consecutive row groups of about `target_bytes` each, in order,
/// so that placement can spread a few large files over many nodes. Row-group
/// boundaries come from the file's `split_offsets` (Iceberg writers record
/// one per row group); a file without valid offsets (missing, unsorted, or
/// beyond the file) stays whole. The last part of a file reads to its end,
/// so the parts read exactly the file's rows even if the offsets miscount
/// its row groups. Deterministic: the same tasks and target give the same
/// parts. `target_bytes` <= 0 splits nothing.
std::vector<ScanTask> SplitTasks(std::vector<ScanTask> tasks, int64_t target_bytes);

/// What a task reads, as a string: the data file, its row groups and every
/// delete file (and deletion vector) applied to it. Two plans of one table
/// whose tasks have the same identity read the same rows for them (a file
/// path names immutable contents), so a refresh keeps those rows cached.
std::string TaskIdentity(const ScanTask& task);

/// The fraction of its data file's bytes (by split offsets) a task reads:
/// 1 for a whole file.
double FileShare(const ScanTask& task);

}  // namespace icefloe::iceberg
