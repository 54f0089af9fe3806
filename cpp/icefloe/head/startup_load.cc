// Kubeflow mode: the head loads its table at start-up, retrying with backoff
// while nodes come up or storage is flaky, until a deadline.
#include <algorithm>
#include <chrono>

#include "icefloe/common/log.h"
#include "icefloe/head/head_server.h"

namespace icefloe {

arrow::Status HeadServer::RunStartupLoad() {
  if (!options_.startup_load) return arrow::Status::OK();
  const LoadRequest& request = *options_.startup_load;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(options_.startup_timeout_s);
  // Records progress for /ready; true when the server is shutting down.
  auto set_state = [this](std::string state) {
    MutexLock lock(&startup_mu_);
    startup_state_ = std::move(state);
    return stopping_;
  };
  // Waits up to `seconds` unless shutdown begins; true when it did.
  auto pause = [this](double seconds) {
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                           std::chrono::duration<double>(seconds));
    MutexLock lock(&startup_mu_);
    while (!stopping_ && std::chrono::steady_clock::now() < until) {
      startup_cv_.WaitUntil(&startup_mu_, until);
    }
    return stopping_;
  };
  double backoff_s = 0.5;
  arrow::Status last;
  while (true) {
    bool all_nodes = !registry_.Alive().empty();
    for (const auto& n : registry_.Snapshot()) {
      if (n.is_static && n.state != NodeState::kAlive) all_nodes = false;
    }
    // After a restart the dataset may be adopted from the nodes: no reload.
    if (adopter_.recovering()) all_nodes = false;
    if (all_nodes) {
      if (set_state("loading")) return arrow::Status::Cancelled("shutting down");
      auto job = Load(request);
      if (job.ok()) {
        while (!(*job)->Wait(std::chrono::milliseconds(500))) {
        }
        auto outcome = (*job)->Outcome();
        if (outcome.ok()) {
          set_state("ready");
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
        set_state("failed: " + last.ToString());
        return last;
      }
      if (set_state("retrying after: " + last.ToString())) {
        return arrow::Status::Cancelled("shutting down");
      }
    } else {
      // Ready() says why (a node refusing this head's node actions, by name).
      last = arrow::Status::IOError("waiting for every data node to answer: ", Ready().second);
      if (set_state("waiting for every data node to answer")) {
        return arrow::Status::Cancelled("shutting down");
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      set_state("failed: " + last.ToString());
      return last.WithMessage("start-up load of '", request.name, "' did not succeed within ",
                              options_.startup_timeout_s, "s: ", last.message());
    }
    if (pause(backoff_s)) return arrow::Status::Cancelled("shutting down");
    backoff_s = std::min(backoff_s * 2, 10.0);
  }
}

}  // namespace icefloe
