// Reading one Iceberg scan task — a Parquet data file plus the delete files
// and deletion vectors that apply to it — as Arrow record batches of the
// table schema.
//
// For each row group of the data file the reader
//  1. skips it when its statistics show that no row can match the filter, or
//     when position deletes remove every row;
//  2. decodes only the leaf columns it needs (projection, filter columns,
//     equality delete columns), matched to table columns by field id (or
//     the name mapping); columns the file lacks are constants: identity
//     partition values, v3 initial-defaults or null;
//  3. conforms them to the table's Arrow types (see parquet_columns.h);
//  4. drops deleted rows (positions count rows of the whole file, so skipped
//     row groups do not shift them), then rows failing the filter;
//  5. keeps only the projected columns.
// Output batches are re-cut to exactly `batch_rows` rows (the last one may be
// shorter), so memory stays near one row group's column chunks plus two
// batches, whatever the file size.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <arrow/compute/expression.h>
#include <arrow/memory_pool.h>
#include <arrow/record_batch.h>
#include <arrow/result.h>

#include "icefloe/iceberg/data_file.h"
#include "icefloe/iceberg/parquet_columns.h"
#include "icefloe/iceberg/types.h"

namespace icefloe::iceberg {

struct ReadOptions {
  /// Opens data and delete files by location, e.g. a wrapper of
  /// FileIO::OpenInput or FileSystemOpener(fs).
  FileOpener open;
  /// The table schema to read with (ids -> names and types). Needed only
  /// during ScanTaskReader::Open.
  const Schema* schema = nullptr;
  /// The table's `schema.name-mapping.default` (not owned; may be null):
  /// field ids for files written without them (see MatchColumns).
  const NameMapping* name_mapping = nullptr;
  /// Top-level field ids to return, in this order; empty = every top-level
  /// field of the schema.
  std::vector<int32_t> projection;
  /// Rows to keep: a boolean expression on the schema's top-level column
  /// names (arrow::compute field refs by name). It may use columns that are
  /// not projected; they are read and dropped. Null results drop the row.
  std::optional<arrow::compute::Expression> filter;
  /// Most rows per output batch; must be positive.
  int64_t batch_rows = 64 * 1024;
  /// Where batches are allocated; nullptr = arrow::default_memory_pool().
  arrow::MemoryPool* pool = nullptr;
  /// How data files' column chunks come off storage: coalesced per row
  /// group, or streamed when a row group is too large to hold whole.
  ParquetIo io;
};

/// What a read did, for tests and metrics.
struct ReadStats {
  int64_t row_groups_total = 0;    ///< row groups of the task (the data file's, or its part's)
  int64_t row_groups_read = 0;     ///< row groups decoded; the others were pruned
  int64_t rows_read = 0;           ///< rows decoded from the data file
  int64_t rows_after_deletes = 0;  ///< of those, rows that are not deleted
  int64_t rows_after_filter = 0;   ///< of those, rows matching the filter (returned)
  int64_t bytes_read = 0;          ///< compressed column-chunk bytes of the data file
  int64_t delete_bytes_read = 0;   ///< compressed column-chunk bytes of delete files
};

/// Streams the rows of one scan task. Not thread-safe; batches it returns are
/// immutable and may be shared.
class ScanTaskReader : public arrow::RecordBatchReader {
 public:
  /// Opens the data file (footer only), loads the task's delete files, and
  /// resolves columns and the filter. Errors name the file or column:
  /// NotImplemented for files that are not Parquet; IOError for missing or
  /// unreadable files (IOError or Invalid for corrupt ones); Invalid for a
  /// filter that does not bind to a boolean; KeyError for unknown field ids
  /// or filter columns. ReadNext fails with Invalid, naming the column and
  /// both types, when a file's column cannot be read as the table's type.
  static arrow::Result<std::unique_ptr<ScanTaskReader>> Open(const ScanTask& task,
                                                             const ReadOptions& options);

  /// Counters so far; complete once ReadNext has returned the end.
  virtual const ReadStats& stats() const = 0;

  /// Memory one ReadNext may hold at its peak, estimated from the data
  /// file's footer before any row is decoded: a batch of `batch_rows` of the
  /// task's widest rows decoded (kDecodePeak times: the decoded columns,
  /// their conformed, filtered and re-cut copies), the pages being decoded,
  /// and the column chunks of a row group held whole or one stream buffer
  /// per column. What a load reserves before each read.
  virtual int64_t read_bytes() const = 0;
  static constexpr int64_t kDecodePeak = 3;
};

/// Reads a whole scan task: every batch of ScanTaskReader, in order. `stats`
/// (optional) receives the counters.
arrow::Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> ReadScanTask(
    const ScanTask& task, const ReadOptions& options, ReadStats* stats = nullptr);

}  // namespace icefloe::iceberg
