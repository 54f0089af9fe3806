#include "icefloe/iceberg/reader.h"

#include <algorithm>
#include <deque>
#include <utility>

#include <arrow/compute/api_scalar.h>
#include <arrow/compute/api_vector.h>
#include <arrow/compute/exec.h>
#include <arrow/scalar.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>

#include "icefloe/iceberg/deletes.h"

namespace icefloe::iceberg {

namespace cp = arrow::compute;

namespace {

arrow::Result<NestedField> TopLevelField(const Schema& schema, int32_t id) {
  for (const auto& field : schema.fields) {
    if (field.id == id) return field;
  }
  if (schema.FindById(id) != nullptr) {
    return arrow::Status::Invalid("field id ", id, " is nested; only top-level fields project");
  }
  return arrow::Status::KeyError("no field with id ", id, " in schema ", schema.schema_id);
}

void AddField(const NestedField& field, std::vector<NestedField>* fields) {
  for (const auto& f : *fields) {
    if (f.id == field.id) return;
  }
  fields->push_back(field);
}

arrow::Result<std::vector<NestedField>> ProjectedFields(const Schema& schema,
                                                        const std::vector<int32_t>& projection) {
  if (projection.empty()) return schema.fields;
  std::vector<NestedField> fields;
  for (int32_t id : projection) {
    ARROW_ASSIGN_OR_RAISE(auto field, TopLevelField(schema, id));
    if (std::any_of(fields.begin(), fields.end(),
                    [&](const NestedField& f) { return f.id == id; })) {
      return arrow::Status::Invalid("field id ", id, " is projected twice");
    }
    fields.push_back(std::move(field));
  }
  return fields;
}

// Adds the top-level columns `filter` uses to `fields` (once each).
arrow::Status AddFilterFields(const Schema& schema, const cp::Expression& filter,
                              std::vector<NestedField>* fields) {
  for (const arrow::FieldRef& ref : cp::FieldsInExpression(filter)) {
    const arrow::FieldRef* first = &ref;
    if (ref.nested_refs() != nullptr && !ref.nested_refs()->empty()) {
      first = &ref.nested_refs()->front();
    }
    if (first->name() == nullptr) {
      return arrow::Status::Invalid("filter refers to ", ref.ToString(),
                                    ": only column names are supported");
    }
    auto it = std::find_if(schema.fields.begin(), schema.fields.end(),
                           [&](const NestedField& f) { return f.name == *first->name(); });
    if (it == schema.fields.end()) {
      return arrow::Status::KeyError("filter refers to unknown column '", *first->name(), "'");
    }
    AddField(*it, fields);
  }
  return arrow::Status::OK();
}

arrow::Result<cp::Expression> BindFilter(const cp::Expression& filter, const arrow::Schema& schema,
                                         cp::ExecContext* ctx) {
  auto bound = filter.Bind(schema, ctx);
  if (!bound.ok()) {
    return bound.status().WithMessage("filter ", filter.ToString(), ": ", bound.status().message());
  }
  if (bound->type()->id() != arrow::Type::BOOL) {
    return arrow::Status::Invalid("filter ", filter.ToString(), " is ", bound->type()->ToString(),
                                  ", not boolean");
  }
  return bound;
}

class ScanTaskReaderImpl : public ScanTaskReader {
 public:
  arrow::Status Init(const ScanTask& task, const ReadOptions& options);

  std::shared_ptr<arrow::Schema> schema() const override { return output_schema_; }
  arrow::Status ReadNext(std::shared_ptr<arrow::RecordBatch>* out) override;
  const ReadStats& stats() const override { return stats_; }
  int64_t read_bytes() const override { return read_bytes_; }

 private:
  // Starts the next row group worth reading; leaves current_ null at the end.
  arrow::Status NextRowGroup();
  // The next batch after deletes, filter and projection (possibly empty);
  // nullptr at the end of the file.
  arrow::Result<std::shared_ptr<arrow::RecordBatch>> NextProcessed();
  arrow::Result<std::shared_ptr<arrow::RecordBatch>> Process(const arrow::RecordBatch& file_batch,
                                                             int64_t first_row);
  arrow::Result<std::shared_ptr<arrow::RecordBatch>> ApplyMask(
      const std::shared_ptr<arrow::RecordBatch>& batch, const arrow::Datum& mask);

  int64_t batch_rows_ = 0;
  std::unique_ptr<cp::ExecContext> ctx_;
  std::unique_ptr<ParquetFile> file_;
  // Projected columns first, then those read only for the filter or deletes.
  std::vector<ColumnMatch> columns_;
  std::vector<int> leaves_;
  std::shared_ptr<arrow::Schema> work_schema_;
  std::shared_ptr<arrow::Schema> output_schema_;
  std::optional<cp::Expression> filter_;  // bound to work_schema_
  DeleteFilter deletes_;
  std::vector<std::vector<int>> equality_columns_;  // per equality set, into columns_

  std::vector<int64_t> row_group_starts_;
  int next_row_group_ = 0;
  int end_row_group_ = 0;  // the task's row groups are [next_row_group_, end_row_group_)
  std::unique_ptr<arrow::RecordBatchReader> current_;
  int64_t next_row_ = 0;  // file position of current_'s next row
  std::deque<std::shared_ptr<arrow::RecordBatch>> pending_;
  int64_t pending_rows_ = 0;
  bool exhausted_ = false;
  ReadStats stats_;
  int64_t read_bytes_ = 0;
};

arrow::Status ScanTaskReaderImpl::Init(const ScanTask& task, const ReadOptions& options) {
  if (options.schema == nullptr) return arrow::Status::Invalid("ReadOptions.schema is not set");
  if (options.batch_rows <= 0) {
    return arrow::Status::Invalid("ReadOptions.batch_rows must be positive, got ",
                                  options.batch_rows);
  }
  const Schema& schema = *options.schema;
  const DataFile& data_file = task.data_file;
  ARROW_RETURN_NOT_OK(CheckParquetFormat(data_file.file_format, data_file.file_path));
  batch_rows_ = options.batch_rows;
  arrow::MemoryPool* pool = options.pool ? options.pool : arrow::default_memory_pool();
  ctx_ = std::make_unique<cp::ExecContext>(pool);

  std::vector<NestedField> fields;
  ARROW_ASSIGN_OR_RAISE(fields, ProjectedFields(schema, options.projection));
  const size_t num_output = fields.size();
  if (options.filter) ARROW_RETURN_NOT_OK(AddFilterFields(schema, *options.filter, &fields));

  ARROW_ASSIGN_OR_RAISE(file_, OpenParquetFile(options.open, data_file.file_path, batch_rows_, pool,
                                               options.name_mapping, options.io));
  ARROW_ASSIGN_OR_RAISE(
      deletes_, LoadDeletes(task, schema, options.open, batch_rows_, pool, options.name_mapping));
  stats_.delete_bytes_read = deletes_.bytes_read;
  for (const auto& set : deletes_.equality) {
    for (const auto& field : set->fields()) AddField(field, &fields);
  }

  ARROW_ASSIGN_OR_RAISE(columns_, MatchColumns(*file_, fields, &data_file));
  leaves_ = LeavesOf(columns_);
  arrow::FieldVector arrow_fields;
  for (const auto& column : columns_) arrow_fields.push_back(column.arrow_field);
  work_schema_ = arrow::schema(arrow_fields);
  output_schema_ =
      arrow::schema(arrow::FieldVector(arrow_fields.begin(), arrow_fields.begin() + num_output));
  for (const auto& set : deletes_.equality) {
    std::vector<int> indices;
    for (const auto& field : set->fields()) {
      for (size_t i = 0; i < columns_.size(); ++i) {
        if (columns_[i].field.id == field.id) indices.push_back(static_cast<int>(i));
      }
    }
    equality_columns_.push_back(std::move(indices));
  }

  if (options.filter) {
    ARROW_ASSIGN_OR_RAISE(filter_, BindFilter(*options.filter, *work_schema_, ctx_.get()));
  }

  auto metadata = file_->reader->parquet_reader()->metadata();
  int64_t start = 0;
  for (int rg = 0; rg < metadata->num_row_groups(); ++rg) {
    row_group_starts_.push_back(start);
    start += metadata->RowGroup(rg)->num_rows();
  }
  // A part of a split file: its row groups only (none when the file has
  // fewer than the split offsets said; the part before reads to the end).
  const int64_t total = metadata->num_row_groups();
  if (task.first_row_group < 0) {
    return arrow::Status::Invalid(data_file.file_path, ": negative first row group ",
                                  task.first_row_group);
  }
  next_row_group_ = static_cast<int>(std::min<int64_t>(task.first_row_group, total));
  end_row_group_ = static_cast<int>(
      task.row_groups < 0
          ? total
          : std::min<int64_t>(total, int64_t{task.first_row_group} + task.row_groups));
  stats_.row_groups_total = end_row_group_ - next_row_group_;

  // The peak of one ReadNext: a batch of the widest rows decoded, the
  // pages being decoded, and the row group's chunks held whole or one stream
  // buffer per column.
  int64_t task_rows = 0;
  int64_t row_bytes = 0;  // decoded bytes per row, rounded up, of the widest row group
  int64_t held = 0;
  for (int rg = next_row_group_; rg < end_row_group_; ++rg) {
    const int64_t rows = metadata->RowGroup(rg)->num_rows();
    if (rows == 0) continue;
    task_rows += rows;
    row_bytes = std::max(row_bytes, (DecodedBytes(*file_, rg, leaves_) + rows - 1) / rows);
    held =
        std::max(held, PageBytes(*file_, rg, leaves_) +
                           (file_->stream_buffer_bytes > 0
                                ? file_->stream_buffer_bytes * static_cast<int64_t>(leaves_.size())
                                : ColumnChunkBytes(*file_, rg, leaves_)));
  }
  read_bytes_ = kDecodePeak * row_bytes * std::min(batch_rows_, task_rows) + held;
  return arrow::Status::OK();
}

arrow::Status ScanTaskReaderImpl::NextRowGroup() {
  current_.reset();
  auto metadata = file_->reader->parquet_reader()->metadata();
  while (next_row_group_ < end_row_group_) {
    const int rg = next_row_group_++;
    const int64_t start = row_group_starts_[rg];
    const int64_t rows = metadata->RowGroup(rg)->num_rows();
    if (rows == 0 || CountPositions(deletes_.positions, start, rows) == rows) continue;
    if (filter_) {
      ARROW_ASSIGN_OR_RAISE(bool may_match, RowGroupMayMatch(*file_, rg, columns_, *filter_));
      if (!may_match) continue;
    }
    ++stats_.row_groups_read;
    stats_.bytes_read += ColumnChunkBytes(*file_, rg, leaves_);
    ARROW_ASSIGN_OR_RAISE(current_, ReadRowGroup(*file_, rg, leaves_));
    next_row_ = start;
    return arrow::Status::OK();
  }
  return arrow::Status::OK();
}

arrow::Result<std::shared_ptr<arrow::RecordBatch>> ScanTaskReaderImpl::NextProcessed() {
  while (true) {
    if (current_ == nullptr) {
      ARROW_RETURN_NOT_OK(NextRowGroup());
      if (current_ == nullptr) return nullptr;
    }
    std::shared_ptr<arrow::RecordBatch> file_batch;
    ARROW_RETURN_NOT_OK(current_->ReadNext(&file_batch));
    if (file_batch == nullptr) {
      current_.reset();
      continue;
    }
    const int64_t first_row = next_row_;
    next_row_ += file_batch->num_rows();
    return Process(*file_batch, first_row);
  }
}

arrow::Result<std::shared_ptr<arrow::RecordBatch>> ScanTaskReaderImpl::ApplyMask(
    const std::shared_ptr<arrow::RecordBatch>& batch, const arrow::Datum& mask) {
  if (mask.is_scalar()) {
    const auto& keep = mask.scalar_as<arrow::BooleanScalar>();
    if (keep.is_valid && keep.value) return batch;
    return batch->Slice(0, 0);
  }
  ARROW_ASSIGN_OR_RAISE(arrow::Datum kept,
                        cp::Filter(batch, mask, cp::FilterOptions::Defaults(), ctx_.get()));
  return kept.record_batch();
}

arrow::Result<std::shared_ptr<arrow::RecordBatch>> ScanTaskReaderImpl::Process(
    const arrow::RecordBatch& file_batch, int64_t first_row) {
  stats_.rows_read += file_batch.num_rows();
  ARROW_ASSIGN_OR_RAISE(auto batch, ConformBatch(file_batch, columns_, work_schema_, ctx_.get()));
  // Deletes first: positions name rows of the file, before any filtering.
  ARROW_ASSIGN_OR_RAISE(
      std::shared_ptr<arrow::Array> keep,
      KeepPositions(deletes_.positions, first_row, batch->num_rows(), ctx_->memory_pool()));
  for (size_t i = 0; i < deletes_.equality.size(); ++i) {
    arrow::ArrayVector keys;
    for (int index : equality_columns_[i]) keys.push_back(batch->column(index));
    ARROW_ASSIGN_OR_RAISE(auto keep_keys, deletes_.equality[i]->Keep(keys));
    if (keep == nullptr) {
      keep = std::move(keep_keys);
    } else {
      ARROW_ASSIGN_OR_RAISE(arrow::Datum both, cp::And(keep, keep_keys, ctx_.get()));
      keep = both.make_array();
    }
  }
  if (keep != nullptr) {
    ARROW_ASSIGN_OR_RAISE(batch, ApplyMask(batch, keep));
  }
  stats_.rows_after_deletes += batch->num_rows();

  if (filter_ && batch->num_rows() > 0) {
    ARROW_ASSIGN_OR_RAISE(arrow::Datum mask,
                          cp::ExecuteScalarExpression(*filter_, cp::ExecBatch(*batch), ctx_.get()));
    ARROW_ASSIGN_OR_RAISE(batch, ApplyMask(batch, mask));
  }
  stats_.rows_after_filter += batch->num_rows();

  if (batch->num_columns() == output_schema_->num_fields()) return batch;
  arrow::ArrayVector output(batch->columns().begin(),
                            batch->columns().begin() + output_schema_->num_fields());
  return arrow::RecordBatch::Make(output_schema_, batch->num_rows(), std::move(output));
}

arrow::Status ScanTaskReaderImpl::ReadNext(std::shared_ptr<arrow::RecordBatch>* out) {
  while (pending_rows_ < batch_rows_ && !exhausted_) {
    ARROW_ASSIGN_OR_RAISE(auto batch, NextProcessed());
    if (batch == nullptr) {
      exhausted_ = true;
    } else if (batch->num_rows() > 0) {
      pending_rows_ += batch->num_rows();
      pending_.push_back(std::move(batch));
    }
  }
  if (pending_rows_ == 0) {
    *out = nullptr;
    return arrow::Status::OK();
  }
  const int64_t take = std::min(pending_rows_, batch_rows_);
  pending_rows_ -= take;
  if (pending_.front()->num_rows() == take) {  // the common case: no copy
    *out = std::move(pending_.front());
    pending_.pop_front();
    return arrow::Status::OK();
  }
  arrow::RecordBatchVector parts;
  int64_t needed = take;
  while (needed > 0) {
    std::shared_ptr<arrow::RecordBatch> front = std::move(pending_.front());
    pending_.pop_front();
    if (front->num_rows() > needed) {
      pending_.push_front(front->Slice(needed));
      front = front->Slice(0, needed);
    }
    needed -= front->num_rows();
    parts.push_back(std::move(front));
  }
  ARROW_ASSIGN_OR_RAISE(*out, arrow::ConcatenateRecordBatches(parts, ctx_->memory_pool()));
  return arrow::Status::OK();
}

}  // namespace

arrow::Result<std::unique_ptr<ScanTaskReader>> ScanTaskReader::Open(const ScanTask& task,
                                                                    const ReadOptions& options) {
  auto reader = std::make_unique<ScanTaskReaderImpl>();
  ARROW_RETURN_NOT_OK(reader->Init(task, options));
  return reader;
}

arrow::Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> ReadScanTask(
    const ScanTask& task, const ReadOptions& options, ReadStats* stats) {
  ARROW_ASSIGN_OR_RAISE(auto reader, ScanTaskReader::Open(task, options));
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
  while (true) {
    std::shared_ptr<arrow::RecordBatch> batch;
    ARROW_RETURN_NOT_OK(reader->ReadNext(&batch));
    if (batch == nullptr) break;
    batches.push_back(std::move(batch));
  }
  if (stats != nullptr) *stats = reader->stats();
  return batches;
}

}  // namespace icefloe::iceberg
