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
// Thread-safe. Owns the load pool (max_concurrent_loads threads); node calls
// run on the shared `calls` pool, each bounded by its timeout.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <arrow/result.h>
#include <nlohmann/json.hpp>

#include "icefloe/common/log_once.h"
#include "icefloe/common/mutex.h"
#include "icefloe/common/thread_pool.h"
#include "icefloe/head/catalog.h"
#include "icefloe/head/load_job.h"
#include "icefloe/head/node_rpc.h"
#include "icefloe/head/placement.h"
#include "icefloe/head/refresh.h"
#include "icefloe/head/registry.h"
#include "icefloe/iceberg/scan.h"

namespace icefloe {

struct LoadOptions {
  int32_t max_concurrent_loads = 4;  ///< load threads
  int32_t max_queued_loads = 16;     ///< loads waiting for one
  double node_call_timeout_s = 30;   ///< node.load, node.load_status, node.commit
  double load_timeout_s = 3600;      ///< from node.load to every node staged
  double evict_timeout_s = 30;       ///< evicts on all nodes, in parallel
  double poll_wait_s = 1.0;          ///< how long node.load_status waits for a change
  /// Multiplier from Parquet column bytes to in-memory Arrow bytes for
  /// variable-width columns when estimating whether a dataset fits.
  double size_estimate_factor = 3.0;
  /// Heal (heal_run.cc): failed repairs of one copy are retried this many
  /// times, waiting heal_backoff_s, doubling up to heal_backoff_max_s; a
  /// repair that found no room is retried every heal_backoff_s, uncounted.
  int32_t heal_attempts = 5;
  double heal_backoff_s = 1.0;
  double heal_backoff_max_s = 30.0;
  /// A copy a reload replaced is kept this long at most for the consumers
  /// still reading it (an epoch finishes on the generation it started), and
  /// freed sooner once no node has reported a reader of it and the head has
  /// handed out no endpoints for it for retain_idle_s (the head flag sets
  /// min(30 s, retain_s / 4)). 0: freed at once.
  double retain_s = 600;
  double retain_idle_s = 30;
};

/// Plans a load's scan (iceberg::PlanScan in the head; anything in tests).
using ScanPlanner = std::function<arrow::Result<iceberg::ScanPlan>(const LoadRequest&)>;

/// A load's transform checked against the planned columns: the cached
/// copy's schema and each tokenize model's SHA-256 (part of the copy's key)
/// and kind (transform::Tokenizer::kind(), for describe).
struct BoundTransform {
  std::shared_ptr<arrow::Schema> schema;
  std::vector<std::string> model_sha256;
  std::vector<std::string> model_kind;
};
/// Binds `request.transform` to `input` (transform::Transform in the head,
/// which reads the models): Invalid naming the column, expression or model.
using TransformBinder = std::function<arrow::Result<BoundTransform>(
    const LoadRequest& request, const std::shared_ptr<arrow::Schema>& input)>;

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
  struct Run;       // one load's state on its thread (load_phases.cc)
  struct HealTask;  // one heal (heal_run.cc)
  struct HealBackoff {
    int32_t attempts = 0;
    std::chrono::steady_clock::time_point next_try{};
  };

  void RunJob(std::shared_ptr<LoadJob> job) EXCLUDES(mu_);
  /// The copy a load of a newer snapshot can take unchanged rows from: the
  /// name's ready copy of the same table, columns, filter and transform,
  /// with its plan; null when there is none (a full load).
  std::shared_ptr<const DatasetEntry> RefreshBase(const Run& run, const std::string& key,
                                                  const arrow::Schema& schema);
  /// Places a refresh's tasks: reused ones on the nodes holding their rows,
  /// the others (balanced) within the nodes' free memory.
  arrow::Status PlaceRefresh(Run* run, RefreshDiff* diff, const std::vector<int64_t>& task_bytes,
                             const std::vector<PlacementNode>& nodes);
  arrow::Result<std::shared_ptr<const DatasetEntry>> Execute(LoadJob* job);
  // load_phases.cc: the node side of one load.
  arrow::Status LoadOnNodes(Run* run);
  arrow::Status StartOnNodes(Run* run);
  arrow::Status WaitForNodes(Run* run);
  arrow::Status CommitOnNodes(Run* run);
  /// Evicts (storage, generation) on `nodes` in parallel within the evict
  /// timeout; returns the nodes that did not confirm. `how` sets
  /// staged_only or stray (NodeEvict); its dataset and generation are these.
  std::vector<std::string> EvictOnNodes(const std::string& storage, uint64_t generation,
                                        const std::vector<std::string>& nodes, NodeEvict how = {});
  void Publish(Run* run);
  /// Runs the SetAfterPublish callback, if any (never under mu_).
  void AfterPublish() EXCLUDES(mu_);
  // heal_run.cc
  arrow::Result<std::shared_ptr<HealTask>> StartHeal(const std::shared_ptr<const DatasetEntry>& e,
                                                     bool reset_backoff) EXCLUDES(mu_);
  void RunHeal(const std::shared_ptr<HealTask>& task) EXCLUDES(mu_);
  arrow::Result<std::shared_ptr<const DatasetEntry>> ExecuteHeal(HealTask* task);
  arrow::Status RepairOnNodes(Run* run);
  /// A load of a name whose copy lost rows: heals it (joining a running heal).
  arrow::Result<std::shared_ptr<const DatasetEntry>> HealForLoad(
      const std::shared_ptr<const DatasetEntry>& entry) EXCLUDES(mu_);
  /// Applies `change` to every entry of (storage, generation); false when
  /// none is left (evicted or replaced).
  bool UpdateCopies(const std::string& storage, uint64_t generation,
                    const std::function<void(DatasetEntry*)>& change);

  const LoadOptions options_;
  NodeRpc* const rpc_;
  ThreadPool* const calls_;
  NodeRegistry* const registry_;
  Catalog* const catalog_;
  /// A new generation: above every one handed out here and every one a live
  /// node has seen (a head whose clock is behind its predecessor's must not
  /// number loads below that head's, which nodes refuse as stale).
  uint64_t NewGeneration();
  /// The request's transform bound to the planned columns (empty without one).
  arrow::Result<BoundTransform> BindTransform(const LoadRequest& request,
                                              const iceberg::ScanPlan& plan) const;
  const ScanPlanner planner_;
  TransformBinder transform_binder_;  // set before the first load, then read only
  std::atomic<uint64_t> next_generation_;
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<LoadJob>> jobs_ GUARDED_BY(mu_);
  std::function<void()> after_publish_ GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<HealTask>> heals_ GUARDED_BY(mu_);  // by storage name
  std::map<std::string, HealBackoff> heal_backoff_ GUARDED_BY(mu_);         // by storage name
  bool stopping_ GUARDED_BY(mu_) = false;
  LogOnce failures_logged_;  // "load failed", by dataset name and error
  ThreadPool pool_;          // last: its threads stop before the members they use go
};

}  // namespace icefloe
