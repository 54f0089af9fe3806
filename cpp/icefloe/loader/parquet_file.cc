#include "icefloe/loader/parquet_file.h"

#include <arrow/table.h>
#include <parquet/arrow/reader.h>
#include <parquet/exception.h>
#include <parquet/file_reader.h>

namespace icefloe {

arrow::Result<ParquetFileData> ReadParquetFile(const std::shared_ptr<arrow::fs::FileSystem>& fs,
                                               const std::string& path,
                                               const ParquetReadOptions& options) {
  auto with_path = [&](const arrow::Status& st) {
    return st.WithMessage("reading Parquet file ", path, ": ", st.message());
  };
  arrow::MemoryPool* pool = options.pool ? options.pool : arrow::default_memory_pool();
  auto input = fs->OpenInputFile(path);
  if (!input.ok()) return with_path(input.status());

  parquet::arrow::FileReaderBuilder builder;
  parquet::ArrowReaderProperties props;
  props.set_batch_size(options.batch_rows);
  props.set_use_threads(false);
  auto st = builder.Open(*input);
  if (!st.ok()) return with_path(st);
  std::unique_ptr<parquet::arrow::FileReader> reader;
  st = builder.memory_pool(pool)->properties(props)->Build(&reader);
  if (!st.ok()) return with_path(st);

  auto read = reader->ReadTable();
  if (!read.ok()) return with_path(read.status());
  std::shared_ptr<arrow::Table> table = std::move(*read);

  ParquetFileData out;
  out.schema = table->schema();
  arrow::TableBatchReader batches(*table);
  batches.set_chunksize(options.batch_rows);
  while (true) {
    std::shared_ptr<arrow::RecordBatch> batch;
    ARROW_RETURN_NOT_OK(batches.ReadNext(&batch));
    if (!batch) break;
    out.batches.push_back(std::move(batch));
  }
  return out;
}

}  // namespace icefloe
