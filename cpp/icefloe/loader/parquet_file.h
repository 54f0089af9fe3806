// Reading one Parquet file into record batches of a chosen size.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <arrow/filesystem/filesystem.h>
#include <arrow/record_batch.h>
#include <arrow/result.h>

namespace icefloe {

struct ParquetReadOptions {
  int64_t batch_rows = 64 * 1024;     ///< Maximum rows per output batch.
  arrow::MemoryPool* pool = nullptr;  ///< Defaults to arrow::default_memory_pool().
};

struct ParquetFileData {
  std::shared_ptr<arrow::Schema> schema;
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
};

/// Reads a whole Parquet file. Batches are zero-copy slices of the decoded
/// column chunks, at most `batch_rows` rows each. Dictionary columns are decoded
/// as their value type. IOError names the path when the file cannot be read.
arrow::Result<ParquetFileData> ReadParquetFile(const std::shared_ptr<arrow::fs::FileSystem>& fs,
                                               const std::string& path,
                                               const ParquetReadOptions& options);

}  // namespace icefloe
