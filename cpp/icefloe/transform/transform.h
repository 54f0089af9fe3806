// A load's transform bound to a table: what the head checks before a load
// starts and what each data node runs on every batch it loads.
//
// Transform::Make binds a TransformSpec (protocol/transform_spec.h) to the
// loaded columns' schema: each `expr` is parsed (value_expr.h) and bound by
// Arrow (types checked, kernels chosen), each `tokenize` and `chat` model is
// read and parsed (a chat's source columns and template checked, chat.h),
// `pack` is checked against its column's type. Every error is
// Invalid naming the output column and its expression, the model location
// or the source column. The result is immutable and shared by a load's
// reader threads.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <arrow/compute/expression.h>
#include <arrow/memory_pool.h>
#include <arrow/record_batch.h>
#include <arrow/result.h>

#include "icefloe/protocol/transform_spec.h"
#include "icefloe/transform/chat.h"
#include "icefloe/transform/pack.h"
#include "icefloe/transform/tokenizer.h"

namespace icefloe::transform {

/// Reads a model's bytes by location (the table's FileIO on head and nodes).
using ModelReader = std::function<arrow::Result<std::string>(const std::string& location)>;

/// The source columns `spec` reads, in first-use order: what a load with a
/// transform projects when it names no columns. Parses, needs no schema.
arrow::Result<std::vector<std::string>> InputColumns(const TransformSpec& spec);

class Transform {
 public:
  /// Binds `spec` to `input` (the loaded columns). `expected_sha256`, when
  /// not empty, is each model's hash as the head read it: other bytes are
  /// refused (the model changed since the load was planned).
  static arrow::Result<std::shared_ptr<const Transform>> Make(
      const TransformSpec& spec, const std::shared_ptr<arrow::Schema>& input,
      const ModelReader& read_model, const std::vector<std::string>& expected_sha256 = {});

  /// The cached copy's schema.
  const std::shared_ptr<arrow::Schema>& output_schema() const { return output_schema_; }
  /// Each tokenize and chat model's SHA-256 (hex), in column order.
  const std::vector<std::string>& model_sha256() const { return model_sha256_; }
  /// Each tokenize and chat model's kind (Tokenizer::kind()), in column order.
  const std::vector<std::string>& model_kind() const { return model_kind_; }

  /// One scan task's output, batch by batch, as a load streams its rows: no
  /// task is held whole. Not thread-safe; one per task, used while the
  /// Transform lives.
  class TaskStream {
   public:
    virtual ~TaskStream() = default;
    /// The output of the task's next input `batch` that is ready, appended
    /// to `out`: without pack, the same rows transformed; with pack, each
    /// batch of `batch_rows` packed rows completed so far. Errors name the
    /// output column.
    virtual arrow::Status Add(const arrow::RecordBatch& batch,
                              std::vector<std::shared_ptr<arrow::RecordBatch>>* out) = 0;
    /// The rest, after the task's last batch: with pack, the last rows (a
    /// partial row padded or dropped by `tail`).
    virtual arrow::Status Finish(std::vector<std::shared_ptr<arrow::RecordBatch>>* out) = 0;
    /// With pack, what it did so far (all of it after Finish); else zeros.
    virtual PackStats pack_stats() const { return {}; }
    /// Input rows dropped so far: a chat column's rows its template refuses
    /// or left without a trained token (chat.h).
    int64_t rows_dropped() const { return rows_dropped_; }

   protected:
    int64_t rows_dropped_ = 0;
  };
  /// A stream of one task's output in batches of at most `batch_rows` rows
  /// (buffers from `pool`). Packed rows never depend on where the input's
  /// batches are cut.
  std::unique_ptr<TaskStream> Stream(int64_t batch_rows, arrow::MemoryPool* pool) const;

  /// The output of one scan task's batches (in order), cut into batches of
  /// at most `batch_rows` rows: Stream's, all at once. Without pack, row for
  /// row; with pack, the task's documents packed into rows of seq_len
  /// tokens. Buffers come from `pool`. Errors name the output column.
  arrow::Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> ApplyTask(
      const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches, int64_t batch_rows,
      arrow::MemoryPool* pool) const;

 private:
  struct Column {
    std::string name;
    std::string what;                 ///< "column 'label' ('stars - 1')" for errors
    int source = -1;                  ///< keep / tokenize: the input column index
    arrow::compute::Expression expr;  ///< expr: bound to the input schema
    std::shared_ptr<const Tokenizer> tokenizer;
    TokenizeOptions tokenize;
    int32_t pad_to = 0;  ///< tokenize with pad_to: fixed-size rows of ids...
    int32_t pad_id = 0;
    bool mask = false;  ///< ...and the next column is their mask (no source of its own)
    std::shared_ptr<const ChatColumn> chat;  ///< chat: ids, and the next column...
    bool labels = false;                     ///< ...their labels
  };

  /// The batch's rows transformed, less the rows a chat column drops
  /// (counted in `*rows_dropped`).
  arrow::Result<std::shared_ptr<arrow::RecordBatch>> Apply(const arrow::RecordBatch& batch,
                                                           arrow::MemoryPool* pool,
                                                           int64_t* rows_dropped) const;
  class RowStream;
  class PackStream;  // pack.cc
  /// pack.cc: checks the packed columns' types, sets output_schema_.
  arrow::Status BindPack();
  std::unique_ptr<TaskStream> MakePackStream(int64_t batch_rows, arrow::MemoryPool* pool) const;

  TransformSpec spec_;
  std::shared_ptr<arrow::Schema> input_schema_;
  std::shared_ptr<arrow::Schema> columns_schema_;  ///< before pack
  std::shared_ptr<arrow::Schema> output_schema_;
  std::vector<Column> columns_;
  std::vector<std::string> model_sha256_;
  std::vector<std::string> model_kind_;
};

}  // namespace icefloe::transform
