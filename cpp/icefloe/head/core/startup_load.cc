#include "icefloe/head/core/startup_load.h"

#include <algorithm>
#include <chrono>

#include "icefloe/common/log.h"

namespace icefloe {

StartupLoad::StartupLoad(std::optional<LoadRequest> request, double timeout_s,
                         const NodeRegistry* registry, const CatalogAdopter* adopter, LoadFn load,
                         WhyWaitingFn why_waiting)
    : request_(std::move(request)),
      timeout_s_(timeout_s),
      registry_(registry),
      adopter_(adopter),
      load_(std::move(load)),
      why_waiting_(std::move(why_waiting)) {}

void StartupLoad::Stop() {
  MutexLock lock(&mu_);
  stopping_ = true;
  cv_.NotifyAll();
}

std::string StartupLoad::state() const {
  MutexLock lock(&mu_);
  return state_;
}

bool StartupLoad::SetState(std::string state) {
  MutexLock lock(&mu_);
  state_ = std::move(state);
  return stopping_;
}

bool StartupLoad::Pause(double seconds) {
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(seconds));
  MutexLock lock(&mu_);
  while (!stopping_ && std::chrono::steady_clock::now() < until) {
    cv_.WaitUntil(&mu_, until);
  }
  return stopping_;
}

bool StartupLoad::NodesReady() const {
  bool all_nodes = !registry_->Alive().empty();
  for (const auto& n : registry_->Snapshot()) {
    if (n.is_static && n.state != NodeState::kAlive) all_nodes = false;
  }
  // After a restart the dataset may be adopted from the nodes: no reload.
  if (adopter_->recovering()) all_nodes = false;
  return all_nodes;
}

arrow::Status StartupLoad::Run() {
  if (!request_) return arrow::Status::OK();
  const LoadRequest& request = *request_;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
  double backoff_s = 0.5;
  arrow::Status last;
  while (true) {
    if (NodesReady()) {
      if (SetState("loading")) return arrow::Status::Cancelled("shutting down");
      auto job = load_(request);
      if (job.ok()) {
        while (!(*job)->Wait(std::chrono::milliseconds(500))) {
        }
        auto outcome = (*job)->Outcome();
        if (outcome.ok()) {
          SetState("ready");
          LogInfo("start-up dataset loaded", {{"dataset", request.name}});
          return arrow::Status::OK();
        }
        last = outcome.status();
      } else {
        last = job.status();
      }
      LogWarn("start-up load failed", {{"dataset", request.name}, {"error", last.ToString()}});
      if (last.IsCancelled()) return last;
      // Errors in the table or the request will not heal by retrying.
      if (last.IsInvalid() || last.IsKeyError() || last.IsNotImplemented() ||
          last.IsOutOfMemory()) {
        SetState("failed: " + last.ToString());
        return last;
      }
      if (SetState("retrying after: " + last.ToString())) {
        return arrow::Status::Cancelled("shutting down");
      }
    } else {
      // The head says why (a node refusing its node actions, by name).
      last = arrow::Status::IOError("waiting for every data node to answer: ", why_waiting_());
      if (SetState("waiting for every data node to answer")) {
        return arrow::Status::Cancelled("shutting down");
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      SetState("failed: " + last.ToString());
      return last.WithMessage("start-up load of '", request.name, "' did not succeed within ",
                              timeout_s_, "s: ", last.message());
    }
    if (Pause(backoff_s)) return arrow::Status::Cancelled("shutting down");
    backoff_s = std::min(backoff_s * 2, 10.0);
  }
}

}  // namespace icefloe
