#include "icefloe/head/service/load_progress_stream.h"

#include <chrono>

#include "icefloe/common/wire_status.h"
#include "icefloe/protocol/fields.h"

namespace icefloe {

arrow::Result<std::unique_ptr<arrow::flight::Result>> LoadProgressStream::Next() {
  if (done_) return nullptr;
  const bool finished = job_->Wait(std::chrono::milliseconds(first_ ? 0 : 500));
  first_ = false;
  nlohmann::json body;
  if (finished) {
    done_ = true;
    auto outcome = job_->Outcome();
    if (!outcome.ok()) return ToWireStatus(outcome.status());
    body = std::move(*outcome);
  } else {
    body = job_->Progress().ToJson();
  }
  auto r = std::make_unique<arrow::flight::Result>();
  r->body = arrow::Buffer::FromString(Dump(body));
  return r;
}

}  // namespace icefloe
