// One load on the head, from the moment its name is reserved until it ends:
// its phase, progress, cancellation and outcome. Shared between the load
// thread running it (LoadCoordinator) and every caller following it (the
// load action's progress stream, a joining identical load).
//
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <arrow/status.h>
#include <nlohmann/json.hpp>

#include "icefloe/common/mutex.h"
#include "icefloe/head/core/catalog.h"
#include "icefloe/protocol/actions.h"

namespace icefloe {

class LoadJob {
 public:
  enum class Phase { kQueued, kPlanning, kLoading, kCommitting, kFinished };

  explicit LoadJob(LoadRequest request) : request_(std::move(request)) {}

  const LoadRequest& request() const { return request_; }

  /// Asks the load to stop; it cleans up on the nodes and ends with `why`.
  void Cancel(arrow::Status why) EXCLUDES(mu_);
  /// OK, or why the load was cancelled.
  arrow::Status cancelled() const EXCLUDES(mu_);
  /// Waits up to `timeout` for a cancellation; true when cancelled.
  bool WaitCancelled(std::chrono::milliseconds timeout) EXCLUDES(mu_);

  /// Waits up to `timeout` for the load to finish; true when it has.
  bool Wait(std::chrono::milliseconds timeout) EXCLUDES(mu_);
  /// The finished load's description (state "ready"), or its error.
  arrow::Result<nlohmann::json> Outcome() const EXCLUDES(mu_);
  /// Where the load is now (state "loading").
  LoadProgressReply Progress() const EXCLUDES(mu_);

  // The load thread's side.
  void SetPhase(Phase phase) EXCLUDES(mu_);
  void SetTotals(int64_t tasks_total, int64_t estimated_bytes) EXCLUDES(mu_);
  void SetTasksDone(int64_t tasks_done) EXCLUDES(mu_);
  void Finish(arrow::Status status, std::shared_ptr<const DatasetEntry> result) EXCLUDES(mu_);

 private:
  const LoadRequest request_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  mutable Mutex mu_;
  CondVar cv_;
  Phase phase_ GUARDED_BY(mu_) = Phase::kQueued;
  int64_t tasks_total_ GUARDED_BY(mu_) = 0;
  int64_t tasks_done_ GUARDED_BY(mu_) = 0;
  int64_t estimated_bytes_ GUARDED_BY(mu_) = 0;
  arrow::Status cancelled_ GUARDED_BY(mu_);
  arrow::Status status_ GUARDED_BY(mu_);
  std::shared_ptr<const DatasetEntry> result_ GUARDED_BY(mu_);
};

}  // namespace icefloe
