// LoadCoordinator: the head's loads and evictions, decided here and carried
// out on the data nodes through NodeRpc (so tests drive it with a fake).
//
// A load of dataset `name`:
//   1. Reserve: the name is taken before anything else. A second identical
//      request joins the running load (same job); a request with other
//      arguments is AlreadyExists. A full queue is CapacityError.
//   2. On a load thread (a bounded pool): plan the Iceberg scan; reuse the
//      cached copy when the same table, snapshot, columns and filter are
//      already ready under this name or another; else place the tasks on
//      live nodes within their memory.
//   3. node.load on every placed node (they load in the background), then
//      node.load_status until all are staged, one fails, the load deadline
//      passes or the load is cancelled (evict, shutdown).
//   4. Global row ids from the exact row counts; node.commit everywhere.
//   5. Publish in the catalog; evict the generation it replaces.
// Any failure after step 3 began evicts this generation on every placed node
// (in parallel, bounded by evict_timeout_s), so nothing stays reserved on a
// node and the name is free for the next load.
//
// The node side of a load is a LoadRun (load_run.h); heals of copies that
// lost replicas are a HealRunner's (heal_runner.h), on the same load pool.
//
// Thread-safe. Owns the load pool (max_concurrent_loads threads); node calls
// run on the shared `calls` pool, each bounded by its timeout.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <arrow/result.h>

#include "icefloe/common/log_once.h"
#include "icefloe/common/mutex.h"
#include "icefloe/common/thread_pool.h"
#include "icefloe/head/core/catalog.h"
#include "icefloe/head/core/heal_runner.h"
#include "icefloe/head/core/load_job.h"
#include "icefloe/head/core/load_options.h"
#include "icefloe/head/core/load_run.h"
#include "icefloe/head/core/node_rpc.h"
#include "icefloe/head/core/placement.h"
#include "icefloe/head/core/registry.h"
#include "icefloe/iceberg/scan.h"

namespace icefloe {

class LoadCoordinator {
 public:
  /// Every pointer outlives the coordinator. Generations start at `first_generation`.
  LoadCoordinator(LoadOptions options, NodeRpc* rpc, ThreadPool* calls, NodeRegistry* registry,
                  Catalog* catalog, ScanPlanner planner, uint64_t first_generation);
  /// Shutdown().
  ~LoadCoordinator();

  /// How loads with a transform are checked; without one they are refused
  /// (NotImplemented). Call before the first Load.
  void SetTransformBinder(TransformBinder binder) { transform_binder_ = std::move(binder); }
  /// Starts (or joins) a load; the job reports progress and the outcome.
  arrow::Result<std::shared_ptr<LoadJob>> Load(const LoadRequest& request) EXCLUDES(mu_);
  /// Drops a dataset from the catalog and its nodes (a running load of the
  /// name is cancelled). KeyError when there is neither.
  arrow::Result<EvictReply> Evict(const std::string& name) EXCLUDES(mu_);
  /// Whether a load of `name` is queued or running.
  bool Loading(const std::string& name) const EXCLUDES(mu_);
  /// Judges every ready, degraded or healing copy against the registry:
  /// marks it degraded (or ready again) and starts a heal where replicas are
  /// lost and one is due. Cheap (no node calls); run after each poll.
  void CheckHealth() EXCLUDES(mu_);
  /// Frees retired copies (Catalog::Retire) whose time is up or whose
  /// readers are gone (CheckHealth runs it).
  void ReleaseRetired(const std::vector<NodeInfo>& nodes) EXCLUDES(mu_);
  /// Starts the heal of `entry`'s copy, or returns the one running; Status
  /// when none can start (the load queue is full, the head is stopping).
  arrow::Result<std::shared_ptr<LoadJob>> Heal(const std::shared_ptr<const DatasetEntry>& entry)
      EXCLUDES(mu_);
  /// The entry of `name` with its scan plan: a copy adopted after a head
  /// restart has only its tasks' row counts, so this re-plans the pinned
  /// snapshot once (same request, same task order) and keeps the plan if its
  /// tasks and key match the copy; Invalid when the table no longer plans
  /// to it (e.g. its metadata is gone). KeyError for an unknown name.
  arrow::Result<std::shared_ptr<const DatasetEntry>> WithPlan(const std::string& name);
  /// Runs after each load publishes, before the load reports its end (the
  /// head pushes the copy's catalog record to its nodes then, so a load that
  /// returned survives a head restart).
  void SetAfterPublish(std::function<void()> fn) EXCLUDES(mu_);
  /// Progress of every queued or running load.
  std::vector<LoadProgressReply> Loads() const EXCLUDES(mu_);
  /// Cancels every load and waits for the load threads (bounded by the
  /// cleanup's evict timeout). Idempotent.
  void Shutdown() EXCLUDES(mu_);

 private:
  void RunJob(std::shared_ptr<LoadJob> job) EXCLUDES(mu_);
  arrow::Result<std::shared_ptr<const DatasetEntry>> Execute(LoadJob* job);
  /// The copy a load of a newer snapshot can take unchanged rows from: the
  /// name's ready copy of the same table, columns, filter and transform,
  /// with its plan; null when there is none (a full load).
  std::shared_ptr<const DatasetEntry> RefreshBase(const LoadRun& run, const CopyKey& key,
                                                  const arrow::Schema& schema);
  /// Evicts (storage, generation) on `nodes` within the evict timeout;
  /// returns the nodes that did not confirm.
  std::vector<std::string> EvictOnNodes(const std::string& storage, uint64_t generation,
                                        const std::vector<std::string>& nodes);
  /// Runs the SetAfterPublish callback, if any (never under mu_).
  void AfterPublish() EXCLUDES(mu_);
  /// A new generation: above every one handed out here and every one a live
  /// node has seen (a head whose clock is behind its predecessor's must not
  /// number loads below that head's, which nodes refuse as stale).
  uint64_t NewGeneration();
  /// The request's transform bound to the planned columns (empty without one).
  arrow::Result<BoundTransform> BindTransform(const LoadRequest& request,
                                              const iceberg::ScanPlan& plan) const;

  const LoadOptions options_;
  NodeRpc* const rpc_;
  ThreadPool* const calls_;
  NodeRegistry* const registry_;
  Catalog* const catalog_;
  const ScanPlanner planner_;
  TransformBinder transform_binder_;  // set before the first load, then read only
  std::atomic<uint64_t> next_generation_;
  const LoadRunEnv run_env_;  // what every LoadRun works with
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<LoadJob>> jobs_ GUARDED_BY(mu_);
  std::function<void()> after_publish_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  LogOnce failures_logged_;  // "load failed", by dataset name and error
  HealRunner heals_;         // heals on pool_
  ThreadPool pool_;          // last: its threads stop before the members they use go
};

}  // namespace icefloe
