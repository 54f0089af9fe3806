// The "load" and "refresh" actions' answer: a load's progress every 0.5 s
// until it ends, then its description (or its error). The load runs whatever
// the client does; each Next() waits at most 0.5 s.
#pragma once

#include <memory>

#include <arrow/flight/server.h>

#include "icefloe/head/core/load_job.h"

namespace icefloe {

class LoadProgressStream : public arrow::flight::ResultStream {
 public:
  explicit LoadProgressStream(std::shared_ptr<LoadJob> job) : job_(std::move(job)) {}

  /// The load's progress (at once the first time, then after up to 0.5 s),
  /// and its outcome once it has ended; then the end of the stream.
  arrow::Result<std::unique_ptr<arrow::flight::Result>> Next() override;

 private:
  std::shared_ptr<LoadJob> job_;
  bool first_ = true;
  bool done_ = false;
};

}  // namespace icefloe
