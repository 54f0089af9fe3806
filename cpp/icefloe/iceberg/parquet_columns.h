// Parquet columns by Iceberg field id: the pieces the scan-task reader and the
// delete-file loaders share.
//
// An Iceberg table names its columns by field id; Parquet files written by
// Iceberg writers carry those ids (`PARQUET:field_id` on the Arrow fields that
// parquet::arrow derives from the file schema). `MatchColumns` finds each
// table column in a file by id (through the table's name mapping for files
// written without ids), `ReadRowGroup` streams a row group's matched columns, `ConformBatch` turns
// what the file holds into the table's Arrow types (renames, promotions, added and nested fields,
// columns absent from the file as their partition value or default), and `RowGroupMayMatch` decides
// from row-group statistics whether a filter can match any row of a row group.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <arrow/compute/expression.h>
#include <arrow/filesystem/filesystem.h>
#include <arrow/io/interfaces.h>
#include <arrow/record_batch.h>
#include <arrow/result.h>
#include <parquet/arrow/reader.h>

#include "icefloe/iceberg/data_file.h"
#include "icefloe/iceberg/name_mapping.h"
#include "icefloe/iceberg/types.h"

namespace icefloe::iceberg {

/// Opens a file named by a table location (a path or URI) for random access.
/// A missing file should be an IOError. Must be callable from any thread.
using FileOpener = std::function<arrow::Result<std::shared_ptr<arrow::io::RandomAccessFile>>(
    const std::string& location)>;

/// A FileOpener that passes locations unchanged to `fs->OpenInputFile`.
FileOpener FileSystemOpener(std::shared_ptr<arrow::fs::FileSystem> fs);

/// An open Parquet file. Not thread-safe.
struct ParquetFile {
  std::string location;
  std::unique_ptr<parquet::arrow::FileReader> reader;
  /// Whether any column of the file carries a field id. Files without any are
  /// matched through `name_mapping` instead (see MatchColumns).
  bool has_field_ids = false;
  /// The table's name mapping (not owned; may be null).
  const NameMapping* name_mapping = nullptr;
  /// Column chunks stream through buffers of this many bytes each (0: each
  /// row group's are read whole; see ParquetIo).
  int64_t stream_buffer_bytes = 0;
};

/// How a Parquet file's column chunks come off storage.
struct ParquetIo {
  /// A file whose largest row group holds at most this many compressed
  /// bytes reads each row group's chunks in a few coalesced requests, held
  /// whole while the row group is decoded (the fewest requests to object
  /// storage); a larger one streams each column chunk through a buffer of
  /// `stream_buffer_bytes`, so that a row group of any size reads in bounded
  /// memory. Negative: always coalesced.
  int64_t coalesce_limit_bytes = -1;
  int64_t stream_buffer_bytes = int64_t{1} << 20;
  /// When positive, the stream buffers of all of a file's columns together
  /// stay within this (each at least 16 KiB): wide files get smaller ones.
  int64_t stream_budget_bytes = 0;
};

/// Opens `location` as Parquet, reading batches of at most `batch_rows` rows.
/// `name_mapping` (may be null; must outlive the file) gives ids to the
/// columns of a file written without them. Errors name the location: the
/// opener's status (IOError when missing), or IOError/Invalid when the file is
/// not Parquet or its footer is corrupt.
arrow::Result<std::unique_ptr<ParquetFile>> OpenParquetFile(
    const FileOpener& open, const std::string& location, int64_t batch_rows,
    arrow::MemoryPool* pool, const NameMapping* name_mapping = nullptr,
    const ParquetIo& io = ParquetIo{});

/// NotImplemented naming the file unless `file_format` is PARQUET (any case).
arrow::Status CheckParquetFormat(const std::string& file_format, const std::string& location);

/// Where one top-level table column lives in a file.
struct ColumnMatch {
  NestedField field;                          ///< the table column
  std::shared_ptr<arrow::Field> arrow_field;  ///< ToArrowField(field)
  int file_root = -1;       ///< top-level column index in the file, -1 when absent
  int batch_index = -1;     ///< column index in batches from ReadRowGroup, -1 when absent
  std::vector<int> leaves;  ///< Parquet leaf column indices read for it
  /// Absent columns: the value of every row (null scalar or nullptr: null).
  std::shared_ptr<arrow::Scalar> constant;
  /// Files without field ids: the name mapping entries of the column's
  /// children (null when the file has ids).
  const std::vector<MappedField>* mapping = nullptr;
};

/// The table columns `fields` (top-level) as found in `file`, plus the leaf
/// columns to read for them. Columns are matched by field id; the columns of
/// a file with no field ids at all (Hive-migrated, `add_files`) get their ids
/// from the file's name mapping, as the spec says (unmapped ones are not
/// read). Nested columns read only the leaves of struct fields the table
/// still has. A column whose id is not in the file is absent and reads as a
/// constant (spec "Column Projection"): the identity partition value that
/// `data_file` (may be null) gives it, else its initial-default, else null.
/// Columns of the file that are not asked for are not read. Invalid naming
/// the file when it has no field ids and there is no name mapping (as
/// pyiceberg refuses it).
arrow::Result<std::vector<ColumnMatch>> MatchColumns(const ParquetFile& file,
                                                     const std::vector<NestedField>& fields,
                                                     const DataFile* data_file = nullptr);

/// Every leaf of `columns`, sorted: what ReadRowGroup reads.
std::vector<int> LeavesOf(const std::vector<ColumnMatch>& columns);

/// Streams one row group's `leaves` in batches of at most the file's batch
/// rows. When `leaves` is empty no data is read: batches carry no columns,
/// only row counts. The file must outlive the reader.
arrow::Result<std::unique_ptr<arrow::RecordBatchReader>> ReadRowGroup(
    ParquetFile& file, int row_group, const std::vector<int>& leaves);

/// Turns a batch from ReadRowGroup into `schema` (the Arrow schema of
/// `columns`' table fields, in that order): dictionaries decoded, types
/// promoted (int->long, float->double, decimal precision widening), struct
/// children matched by id (or the name mapping) and renamed, absent columns
/// as their constant, absent struct fields as their initial-default or null.
/// Invalid naming the column and both types when the file's type cannot be
/// read as the table's.
arrow::Result<std::shared_ptr<arrow::RecordBatch>> ConformBatch(
    const arrow::RecordBatch& file_batch, const std::vector<ColumnMatch>& columns,
    const std::shared_ptr<arrow::Schema>& schema, arrow::compute::ExecContext* ctx);

/// Whether any row of `row_group` may satisfy `bound_filter` (bound to the
/// columns' table schema), judged from the row group's min/max and null-count
/// statistics of the top-level primitive `columns`; absent columns are known
/// to hold their constant. False only when no row can match. A float or double
/// column's bounds are used only when NaN in that column cannot make the
/// filter true, since Parquet statistics leave NaN out.
arrow::Result<bool> RowGroupMayMatch(const ParquetFile& file, int row_group,
                                     const std::vector<ColumnMatch>& columns,
                                     const arrow::compute::Expression& bound_filter);

/// Bytes the `leaves` of `row_group` take once decoded as Arrow arrays (an
/// estimate from the footer: values times their width, and for strings
/// and binaries the unencoded bytes the writer recorded, else the
/// uncompressed size).
int64_t DecodedBytes(const ParquetFile& file, int row_group, const std::vector<int>& leaves);

/// Bytes of the pages of `leaves` in `row_group` that a reader holds
/// decompressed at once: per column a data page of the writers' default
/// page size (1 MiB; the footer does not say page sizes) at most, and its
/// dictionary page (its compressed size scaled by the chunk's compression).
int64_t PageBytes(const ParquetFile& file, int row_group, const std::vector<int>& leaves);

/// Compressed bytes of the column chunks of `leaves` in `row_group`.
int64_t ColumnChunkBytes(const ParquetFile& file, int row_group, const std::vector<int>& leaves);

}  // namespace icefloe::iceberg
