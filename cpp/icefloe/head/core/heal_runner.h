// HealRunner: the head reloads the rows of a copy that lost replicas (a dead
// node, a node back empty) onto live nodes with room, from the same scan
// tasks of the same snapshot, under the same storage name and generation (so
// global row ids, contents and tickets stay as they were; docs/protocol.md).
//
// Check judges every ready, degraded or healing copy against the node
// reports (heal.h), marks it, drops stray rows and starts a heal where
// replicas are lost and one is due. One heal per storage name at a time, on
// the load pool it is given (so heals and loads share one bound); a load of
// the name with the same arguments joins it (or runs it, when it is still
// queued: HealForLoad). Failed heals of one copy are retried with backoff
// (LoadOptions::heal_*).
//
// Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <arrow/result.h>

#include "icefloe/common/mutex.h"
#include "icefloe/common/thread_pool.h"
#include "icefloe/head/core/catalog.h"
#include "icefloe/head/core/load_job.h"
#include "icefloe/head/core/load_run.h"
#include "icefloe/head/core/registry.h"

namespace icefloe {

class HealRunner {
 public:
  /// The entry of a name with its scan plan (LoadCoordinator::WithPlan: an
  /// adopted copy re-plans its snapshot).
  using WithPlanFn =
      std::function<arrow::Result<std::shared_ptr<const DatasetEntry>>(const std::string& name)>;
  /// Whether a load of the name is queued or running (its copy is not judged).
  using LoadingFn = std::function<bool(const std::string& name)>;

  /// `env` and `pool` outlive the runner; heals run on `pool`.
  HealRunner(const LoadRunEnv* env, ThreadPool* pool, WithPlanFn with_plan, LoadingFn loading);

  /// Judges every ready, degraded or healing copy against `nodes` (a
  /// registry snapshot): marks it degraded (or ready again), evicts rows no
  /// slice map names, and starts a heal where replicas are lost and one is
  /// due. No node calls but those evicts. False when it stopped early
  /// because the runner is stopping.
  bool Check(const std::vector<NodeInfo>& nodes) EXCLUDES(mu_);
  /// Starts the heal of `entry`'s copy (resetting its backoff), or returns
  /// the one running; Status when none can start (the pool's queue is full,
  /// the runner is stopping).
  arrow::Result<std::shared_ptr<LoadJob>> Heal(const std::shared_ptr<const DatasetEntry>& entry)
      EXCLUDES(mu_);
  /// For a load of a name whose copy lost rows: heals it (joining a running
  /// heal, or running a queued one on this thread) and returns the ready
  /// copy, or why it is not ready.
  arrow::Result<std::shared_ptr<const DatasetEntry>> HealForLoad(
      const std::shared_ptr<const DatasetEntry>& entry) EXCLUDES(mu_);
  /// Cancels the heal of (storage, generation), if one runs, with `why`.
  void Cancel(const std::string& storage, uint64_t generation, arrow::Status why) EXCLUDES(mu_);
  /// Cancels every heal and refuses new ones. Idempotent; the pool's owner
  /// waits for the threads.
  void Stop() EXCLUDES(mu_);

 private:
  struct Task {
    std::string storage;
    uint64_t generation = 0;
    std::string name;                  // the entry it started from
    std::shared_ptr<LoadJob> job;      // progress, cancellation, outcome
    std::atomic<bool> claimed{false};  // run by the pool or by a load waiting on it
  };
  struct Backoff {
    int32_t attempts = 0;
    std::chrono::steady_clock::time_point next_try{};
  };

  arrow::Result<std::shared_ptr<Task>> Start(const std::shared_ptr<const DatasetEntry>& entry,
                                             bool reset_backoff) EXCLUDES(mu_);
  void Run(const std::shared_ptr<Task>& task) EXCLUDES(mu_);
  arrow::Result<std::shared_ptr<const DatasetEntry>> Execute(Task* task);
  std::vector<std::string> EvictOnNodes(const std::string& storage, uint64_t generation,
                                        const std::vector<std::string>& nodes, NodeEvict how = {});

  const LoadRunEnv* const env_;
  ThreadPool* const pool_;
  const WithPlanFn with_plan_;
  const LoadingFn loading_;
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<Task>> heals_ GUARDED_BY(mu_);  // by storage name
  std::map<std::string, Backoff> backoff_ GUARDED_BY(mu_);              // by storage name
  bool stopping_ GUARDED_BY(mu_) = false;
};

}  // namespace icefloe
