#include "icefloe/node/tier/tier_sink.h"

#include <arrow/util/byte_size.h>

namespace icefloe {

arrow::Status TierSink::Add(std::shared_ptr<arrow::RecordBatch> batch) {
  if (file_ == nullptr) {
    ARROW_ASSIGN_OR_RAISE(const int64_t bytes, arrow::util::ReferencedBufferSize(*batch));
    if (keep_(bytes)) {
      in_memory_.push_back(std::move(batch));
      return arrow::Status::OK();
    }
    ARROW_ASSIGN_OR_RAISE(file_, open_(batch->schema()));
  }
  return file_->Append(batch);  // its memory returns to the budget as `batch` goes
}

arrow::Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> TierSink::Finish() {
  std::vector<std::shared_ptr<arrow::RecordBatch>> out = std::move(in_memory_);
  if (file_ == nullptr) return out;
  ARROW_ASSIGN_OR_RAISE(std::shared_ptr<TierFile> file, file_->Finish());
  file_.reset();
  out.insert(out.end(), file->batches().begin(), file->batches().end());
  hold_(std::move(file));
  return out;
}

}  // namespace icefloe
