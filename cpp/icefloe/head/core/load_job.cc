#include "icefloe/head/core/load_job.h"

namespace icefloe {

using json = nlohmann::json;

namespace {

const char* PhaseName(LoadJob::Phase phase) {
  switch (phase) {
    case LoadJob::Phase::kQueued:
      return "queued";
    case LoadJob::Phase::kPlanning:
      return "planning";
    case LoadJob::Phase::kLoading:
      return "loading";
    case LoadJob::Phase::kCommitting:
      return "committing";
    case LoadJob::Phase::kFinished:
      return "finished";
  }
  return "unknown";
}

}  // namespace

void LoadJob::Cancel(arrow::Status why) {
  MutexLock lock(&mu_);
  if (cancelled_.ok() && phase_ != Phase::kFinished) cancelled_ = std::move(why);
  cv_.NotifyAll();
}

arrow::Status LoadJob::cancelled() const {
  MutexLock lock(&mu_);
  return cancelled_;
}

bool LoadJob::WaitCancelled(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock lock(&mu_);
  while (cancelled_.ok()) {
    if (!cv_.WaitUntil(&mu_, deadline) && std::chrono::steady_clock::now() >= deadline) break;
  }
  return !cancelled_.ok();
}

bool LoadJob::Wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock lock(&mu_);
  while (phase_ != Phase::kFinished) {
    if (!cv_.WaitUntil(&mu_, deadline) && std::chrono::steady_clock::now() >= deadline) break;
  }
  return phase_ == Phase::kFinished;
}

arrow::Result<json> LoadJob::Outcome() const {
  MutexLock lock(&mu_);
  if (phase_ != Phase::kFinished) return arrow::Status::Invalid("load still running");
  ARROW_RETURN_NOT_OK(status_);
  return result_->ToJson(true);
}

LoadProgressReply LoadJob::Progress() const {
  MutexLock lock(&mu_);
  LoadProgressReply p;
  p.phase = PhaseName(phase_);
  p.name = request_.name;
  p.tasks_done = tasks_done_;
  p.tasks_total = tasks_total_;
  p.estimated_bytes = estimated_bytes_;
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  return p;
}

void LoadJob::SetPhase(Phase phase) {
  MutexLock lock(&mu_);
  phase_ = phase;
}

void LoadJob::SetTotals(int64_t tasks_total, int64_t estimated_bytes) {
  MutexLock lock(&mu_);
  tasks_total_ = tasks_total;
  estimated_bytes_ = estimated_bytes;
}

void LoadJob::SetTasksDone(int64_t tasks_done) {
  MutexLock lock(&mu_);
  tasks_done_ = tasks_done;
}

void LoadJob::Finish(arrow::Status status, std::shared_ptr<const DatasetEntry> result) {
  MutexLock lock(&mu_);
  status_ = std::move(status);
  result_ = std::move(result);
  phase_ = Phase::kFinished;
  cv_.NotifyAll();
}

}  // namespace icefloe
