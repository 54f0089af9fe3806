// Kubeflow mode's start-up load: the head loads one dataset once every data
// node answers, retrying with backoff (0.5 s doubling to 10 s) while nodes
// come up or storage is flaky, until a deadline. An error in the table or the
// request (Invalid, KeyError, NotImplemented, OutOfMemory) is final at once.
//
// Thread-safe: Run() on one thread (the head's main), Stop() and state()
// from any. The registry and adopter outlive it.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <arrow/result.h>

#include "icefloe/common/mutex.h"
#include "icefloe/head/core/adopter.h"
#include "icefloe/head/core/load_job.h"
#include "icefloe/head/core/registry.h"
#include "icefloe/protocol/actions.h"

namespace icefloe {

class StartupLoad {
 public:
  /// Starts (or joins) a load (HeadServer::Load).
  using LoadFn = std::function<arrow::Result<std::shared_ptr<LoadJob>>(const LoadRequest&)>;
  /// Why the head is not ready (HeadServer::Ready's reason), said while
  /// waiting for the nodes.
  using WhyWaitingFn = std::function<std::string()>;

  /// Without `request` there is nothing to load: Run() returns OK at once.
  StartupLoad(std::optional<LoadRequest> request, double timeout_s, const NodeRegistry* registry,
              const CatalogAdopter* adopter, LoadFn load, WhyWaitingFn why_waiting);

  /// Loads the request, retrying with backoff until its deadline. Returns
  /// the final error when it never succeeds, Cancelled after Stop().
  arrow::Status Run() EXCLUDES(mu_);
  /// Wakes Run()'s backoff and makes it return. Idempotent.
  void Stop() EXCLUDES(mu_);
  /// "not started", "loading", "ready", "retrying after: ...", "failed: ...".
  std::string state() const EXCLUDES(mu_);

 private:
  // Records progress for state(); true when Stop() was called.
  bool SetState(std::string state) EXCLUDES(mu_);
  // Waits up to `seconds` unless Stop() is called; true when it was.
  bool Pause(double seconds) EXCLUDES(mu_);
  // Whether every data node answers and the catalog is recovered.
  bool NodesReady() const;

  const std::optional<LoadRequest> request_;
  const double timeout_s_;
  const NodeRegistry* const registry_;
  const CatalogAdopter* const adopter_;
  const LoadFn load_;
  const WhyWaitingFn why_waiting_;
  mutable Mutex mu_;
  std::string state_ GUARDED_BY(mu_) = "not started";
  bool stopping_ GUARDED_BY(mu_) = false;
  CondVar cv_;  // Stop() wakes the backoff
};

}  // namespace icefloe
