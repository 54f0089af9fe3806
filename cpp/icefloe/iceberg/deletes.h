// Row-level deletes: position deletes, deletion vectors (v3) and equality
// deletes.
//
// The scan planner already chose, per data file, the delete files that apply
// to it (by sequence number and partition). This file reads them:
//
//  - a position delete file is Parquet with `file_path` (field id 2147483546)
//    and `pos` (2147483545); its rows naming this data file's path delete
//    those 0-based row positions of the file;
//  - a deletion vector is a blob of a Puffin file (puffin.h) listing the
//    deleted positions of the one data file it references;
//  - an equality delete file is Parquet with the columns named by its
//    `equality_ids`; a data row whose values in those columns equal a delete
//    row's values is deleted (null equals null).
//
// `LoadDeletes` reads both kinds for one scan task into a `DeleteFilter`,
// which the reader applies to each batch before the scan's filter.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <arrow/array.h>
#include <arrow/compute/exec.h>
#include <arrow/compute/row/grouper.h>
#include <arrow/record_batch.h>
#include <arrow/result.h>

#include "icefloe/iceberg/data_file.h"
#include "icefloe/iceberg/parquet_columns.h"
#include "icefloe/iceberg/types.h"

namespace icefloe::iceberg {

/// Field ids of the position delete columns (Iceberg spec, reserved ids).
constexpr int32_t kDeleteFilePathFieldId = 2147483546;
constexpr int32_t kDeletePosFieldId = 2147483545;

/// The keys of one or more equality delete files that share equality field
/// ids. Not thread-safe.
class EqualityDeleteSet {
 public:
  /// An empty set over `fields` (top-level primitive table columns, in this
  /// order). Keys compare as the fields' table types.
  static arrow::Result<std::unique_ptr<EqualityDeleteSet>> Make(std::vector<NestedField> fields,
                                                                arrow::MemoryPool* pool);

  /// Adds the keys of an equality delete file, reading its columns by field
  /// id (through `name_mapping` when it has none); returns the compressed
  /// bytes read. Invalid when the file lacks one of the fields.
  arrow::Result<int64_t> AddFile(const DataFile& file, const FileOpener& open, int64_t batch_rows,
                                 const NameMapping* name_mapping = nullptr);

  /// For each row of `keys` (one array per field, in fields() order, of the
  /// table types), whether the row is kept: true unless its key was deleted.
  arrow::Result<std::shared_ptr<arrow::Array>> Keep(const arrow::ArrayVector& keys);

  const std::vector<NestedField>& fields() const { return fields_; }
  /// Distinct deleted keys.
  int64_t num_keys() const { return grouper_->num_groups(); }

 private:
  EqualityDeleteSet() = default;

  std::vector<NestedField> fields_;
  std::shared_ptr<arrow::Schema> schema_;
  std::unique_ptr<arrow::compute::ExecContext> ctx_;
  std::unique_ptr<arrow::compute::Grouper> grouper_;
};

/// Everything deleted from one data file.
struct DeleteFilter {
  /// Deleted row positions of the data file, sorted and distinct.
  std::vector<int64_t> positions;
  /// One set per distinct list of equality field ids.
  std::vector<std::unique_ptr<EqualityDeleteSet>> equality;
  /// Compressed bytes read from the delete files (column chunks).
  int64_t bytes_read = 0;

  bool empty() const { return positions.empty() && equality.empty(); }
  /// Top-level field ids the equality deletes compare (to read with the data).
  std::vector<int32_t> EqualityFieldIds() const;
};

/// Reads the delete files of `task`. `schema` types the equality keys: each
/// equality id must be a top-level primitive column of it (NotImplemented for
/// nested ids, Invalid for unknown ones). Position delete row groups whose
/// `file_path` statistics exclude the data file are skipped. A deletion
/// vector is read from its blob alone; Invalid naming the Puffin file when the
/// blob is truncated or corrupt (length, magic, CRC, bitmap), names another
/// data file, deletes a position past the data file's rows or holds another
/// number of positions than its manifest entry's record_count.
/// NotImplemented for other delete files that are not Parquet.
/// `name_mapping` (may be null) gives ids to equality delete files without them.
arrow::Result<DeleteFilter> LoadDeletes(const ScanTask& task, const Schema& schema,
                                        const FileOpener& open, int64_t batch_rows,
                                        arrow::MemoryPool* pool,
                                        const NameMapping* name_mapping = nullptr);

/// The positions in [first_row, first_row + num_rows) that `sorted_positions`
/// leaves in, as a boolean keep mask; nullptr when none of them is deleted.
arrow::Result<std::shared_ptr<arrow::BooleanArray>> KeepPositions(
    const std::vector<int64_t>& sorted_positions, int64_t first_row, int64_t num_rows,
    arrow::MemoryPool* pool);

/// How many of `sorted_positions` fall in [first_row, first_row + num_rows).
int64_t CountPositions(const std::vector<int64_t>& sorted_positions, int64_t first_row,
                       int64_t num_rows);

}  // namespace icefloe::iceberg
