// The data node's Flight service.
//
// DoGet is stateless: everything needed to serve a request is in the ticket.
// Datasets are published as immutable CachedDataset snapshots; a DoGet keeps
// streaming the copy it started with even if the dataset is evicted or
// replaced meanwhile (the stream holds the snapshot, and so its memory pool).
// Gathers (sample shuffle, random access) allocate from a pool charged to the
// node's memory budget: a gather that does not fit fails with OutOfMemory.
//
// Node actions (node.status, node.load, node.load_status, node.commit,
// node.evict, node.record; node_actions.h) come from the head and are
// accepted only with its signature (HMAC with the cluster secret), or, on a
// Kubeflow worker started without a secret, only from its leader's address.
// Loads run in the background (LoadManager): node.load answers at once,
// node.load_status follows it, node.commit gives each task its first global
// row id and publishes. A staged load the head stops following (no
// node.load_status for loads.staged_lease_s) is dropped. node.record hands
// the node the head's catalog record of a copy, which node.status reports
// back, so a restarted head can adopt what the nodes hold
// (head/core/adopt.h).
//
// Threads it owns: the load pool (LoadManager); gRPC's own serve the calls.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include <arrow/flight/server.h>

#include "icefloe/common/memory.h"
#include "icefloe/common/mutex.h"
#include "icefloe/common/security.h"
#include "icefloe/iceberg/file_io.h"
#include "icefloe/node/copy/dataset.h"
#include "icefloe/node/copy/load_manager.h"
#include "icefloe/node/serve/node_actions.h"
#include "icefloe/node/serve/node_metrics.h"
#include "icefloe/node/tier/readahead.h"
#include "icefloe/node/tier/tier_manifest.h"
#include "icefloe/protocol/messages.h"

namespace icefloe {

struct NodeOptions {
  std::string advertised_location;  ///< what clients dial (set once the port is known)
  SecurityOptions security;
  int64_t memory_limit_bytes = 0;  ///< 0 = unlimited
  int32_t load_threads = 2;        ///< files read in parallel by one load
  LoadManagerOptions loads;        ///< dataset loads at once, and queued
  iceberg::FileIOOptions io;
  /// Dataset that Kubeflow-format tickets read; when set, /ready waits for it.
  std::string default_dataset;
  /// Without a cluster secret: accept node actions from this host's addresses
  /// only (a Kubeflow worker's leader). Empty: refuse them all.
  std::string trusted_head_host;
  /// Lay each published copy out in a sealed memfd that same-host readers
  /// map (shared_export.h), and serve plan streams by reference to readers
  /// that ask (header kSharedHeader).
  bool share_memory = false;
  /// The disk tier (tier_file.h): a directory of this node's own (emptied at
  /// start) and its budget. With both and a memory limit, a load whose rows
  /// would leave too little memory for the reads in flight writes each
  /// further task to a tier file and serves it mapped. 0: no tier.
  std::string disk_dir;
  int64_t disk_limit_bytes = 0;
  /// The tier's RAM working set (readahead.h), kept free of loaded rows
  /// within the memory limit; -1: an eighth of the memory limit; 0: none.
  int64_t readahead_limit_bytes = -1;
  /// Which units the working set keeps: Belady (with read-ahead) or the LRU
  /// baseline it is measured against (no read-ahead).
  WorkingSet::Policy readahead_policy = WorkingSet::Policy::kBelady;
};

/// DoGet call header by which a same-host reader asks for a plan stream by
/// reference; the stream's schema tells whether it got one (SharedSchema).
inline constexpr const char* kSharedHeader = "icefloe-shared";

class NodeServer : public arrow::flight::FlightServerBase {
 public:
  explicit NodeServer(NodeOptions options);
  ~NodeServer() override;

  void set_advertised_location(std::string location) EXCLUDES(mu_);

  /// Publishes (or replaces) a dataset.
  void Put(std::shared_ptr<const CachedDataset> dataset) EXCLUDES(mu_);
  /// Looks a dataset up; KeyError naming it when absent.
  arrow::Result<std::shared_ptr<const CachedDataset>> Get(const std::string& name) const
      EXCLUDES(mu_);
  /// A new pool charging this node's memory budget.
  std::shared_ptr<TrackingPool> NewPool(const std::string& label);

  /// Location, memory, datasets and loads (node.status, /status, /metrics).
  NodeStatus Status() const EXCLUDES(mu_);
  /// True when no load is queued, running or staged.
  bool Idle() const;
  /// Ready to serve: holds the default dataset when one is configured.
  std::pair<bool, std::string> Ready() const EXCLUDES(mu_);
  /// Prometheus text for /metrics (node_metrics.h).
  std::string Metrics() const;
  /// Publishes the copies an earlier run left on the disk tier, their files
  /// proven intact, and removes the rest there (tier_manifest.h). Call once,
  /// before serving; nothing without a --disk-dir.
  arrow::Result<TierAdoption> AdoptTier() EXCLUDES(mu_);
  /// The disk tier's read-ahead (null without a tier).
  const std::shared_ptr<TierReadahead>& readahead() const { return readahead_; }
  /// Cancels loads, joins the load pool and the read-ahead. Idempotent.
  void StopBackground();

  arrow::Status ListFlights(const arrow::flight::ServerCallContext& context,
                            const arrow::flight::Criteria* criteria,
                            std::unique_ptr<arrow::flight::FlightListing>* listings) override;
  arrow::Status DoGet(const arrow::flight::ServerCallContext& context,
                      const arrow::flight::Ticket& request,
                      std::unique_ptr<arrow::flight::FlightDataStream>* stream) override;
  arrow::Status DoAction(const arrow::flight::ServerCallContext& context,
                         const arrow::flight::Action& action,
                         std::unique_ptr<arrow::flight::ResultStream>* result) override;
  arrow::Status ListActions(const arrow::flight::ServerCallContext& context,
                            std::vector<arrow::flight::ActionType>* actions) override;

 private:
  /// `shared`: the reader's kSharedHeader version (0: it did not ask).
  arrow::Status ServeTicket(const arrow::flight::Ticket& request, int shared,
                            std::unique_ptr<arrow::flight::FlightDataStream>* stream);
  std::unique_ptr<StreamMeter> Meter(StreamKind kind) const;
  /// The copy Kubeflow tickets read: the default dataset's current copy.
  std::shared_ptr<const CachedDataset> DefaultDataset() const EXCLUDES(mu_);
  // The node's actions' view of the copies published (NodeActions::Parts).
  NodeActions::Parts ActionParts();
  // Puts `copy` in the place of `base` if that is still published under its
  // name; false when it is not.
  bool Replace(const std::shared_ptr<const CachedDataset>& base,
               std::shared_ptr<const CachedDataset> copy) EXCLUDES(mu_);
  // Unpublishes the copy of `name` (of `generation`; 0: any) with its record.
  std::shared_ptr<const CachedDataset> Drop(const std::string& name, uint64_t generation)
      EXCLUDES(mu_);
  // Keeps the head's record of the copy of `name` and `generation`; false
  // when that copy is not published.
  bool KeepRecord(const std::string& name, uint64_t generation, nlohmann::json record)
      EXCLUDES(mu_);
  // The memory files of the copies published now that have one.
  std::vector<std::shared_ptr<const SharedExport>> SharedExports() const EXCLUDES(mu_);
  arrow::Result<LoadedTasks> LoadForManager(const NodeLoadRequest& request, LoadProgress* progress);
  // One load on this node: the room its reads are admitted by, and the tier
  // files its tasks' sinks wrote (on its loader threads).
  struct LoadSpill {
    ReadRoom room;
    Mutex mu;
    std::vector<std::shared_ptr<const MappedRegion>> files GUARDED_BY(mu);
  };
  // How a load into `pool` reads on this node (LoadTasks' plan). With a
  // memory limit, reads are admitted by the room the budget leaves besides
  // TierReserve, what the rest of the node holds and the rows the load
  // keeps, and row groups too large to hold whole stream their columns.
  // With a disk tier, each task's rows stay in memory while room for two
  // reads at their peak is left besides; the rest of the task streams to a
  // tier file.
  LoadPlan PlanLoad(LoadSpill* spill, const TrackingPool* pool);
  // The node's one rule for rows in memory: of its memory budget, the most a
  // load fills with rows before it writes them to the tier (less the room
  // its reads take, PlanLoad): the budget less a quarter for serving and the
  // read-ahead's working set; the whole budget without a tier. node.status
  // reports it (row_memory_bytes) and the head's placement counts it as is.
  int64_t RowMemory() const;
  // Memory a load leaves free besides its reads: the budget less
  // RowMemory() (0 without a tier).
  int64_t TierReserve() const;
  // Writes (or removes) the tier manifest of the copy published as `name`,
  // from what is published now; a failure is logged (only a restart loses).
  void SyncTierManifest(const std::string& name) EXCLUDES(mu_, manifest_mu_);
  // A disk tier and a memory limit: rows may go to the tier.
  bool TierEnabled() const;
  // The read-ahead's working set (options' readahead_limit_bytes resolved).
  int64_t ReadaheadLimit() const;

  const NodeOptions options_;
  const std::string ticket_key_;
  std::shared_ptr<MemoryBudget> budget_;
  std::shared_ptr<MemoryBudget> disk_budget_;  // the disk tier's; limit 0: no tier
  std::atomic<uint64_t> tier_files_{0};        // names of tier files, one each
  const std::string tier_prefix_;              // ... after this run's own prefix
  Mutex manifest_mu_;                          // one manifest write at a time
  arrow::MemoryPool* base_pool_;  // jemalloc when built in: returns freed memory to the OS
  std::shared_ptr<TrackingPool> gather_pool_;  // every gather, charged to the budget
  iceberg::FileIO io_;
  std::shared_ptr<NodeMetrics> metrics_;      // shared with the streams it meters
  std::shared_ptr<TierReadahead> readahead_;  // null without a tier; shared with the streams
  mutable Mutex mu_;
  std::string advertised_location_ GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<const CachedDataset>> datasets_ GUARDED_BY(mu_);
  /// The head's catalog record per dataset in datasets_ (same generation);
  /// dropped with the copy it describes.
  std::map<std::string, nlohmann::json> records_ GUARDED_BY(mu_);
  NodeActions actions_;  // points at loads_, declared after it (its address only)
  LoadManager loads_;    // last: its threads stop before the members they use go
};

}  // namespace icefloe
