// A data node's loads: started by node.load, run in the background on a
// bounded pool, followed by node.load_status, published by node.commit and
// dropped or cancelled by node.evict.
//
// One slot per dataset name holds its latest load: queued, loading, staged
// (the batches, charged to the node's budget, waiting for node.commit) or
// failed (the error, until the head asks). A load of a newer generation
// replaces the slot (cancelling what ran there); a load or evict of an older
// generation than the node has seen for that name is refused as stale, so a
// late message from an abandoned load never undoes a newer one. A failed
// load holds nothing: its memory returns as its batches go.
//
// Every slot has a lease: the head confirms it with each node.load (Start)
// and node.load_status (Wait) of that generation. A slot not confirmed for
// staged_lease_s (the head died or gave up mid-load) is dropped as by Drop:
// a running load is cancelled, staged batches return their memory to the
// budget, and the name is free for the next load (a newer generation).
//
// Thread-safe. Owns the load pool (max_running threads; each load reads its
// files with its own load_threads readers, see loader/task_loader.h) and one
// lease thread that expires unconfirmed slots.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <arrow/result.h>

#include "icefloe/common/background_loop.h"
#include "icefloe/common/mutex.h"
#include "icefloe/common/thread_pool.h"
#include "icefloe/loader/task_loader.h"
#include "icefloe/protocol/messages.h"

namespace icefloe {

struct LoadManagerOptions {
  int32_t max_running = 2;  ///< dataset loads at once
  int32_t max_queued = 16;  ///< loads waiting for one
  /// A load (queued, loading, staged or failed) the head has not asked about
  /// for this long is dropped. The head asks every poll_wait_s (1 s).
  double staged_lease_s = 30;
};

/// Reads a load's tasks (LoadTasks in the node; anything in tests). Must stop
/// early, with any error, once progress->cancelled is set.
using LoadFn =
    std::function<arrow::Result<LoadedTasks>(const NodeLoadRequest&, LoadProgress* progress)>;

class LoadManager {
 public:
  LoadManager(LoadManagerOptions options, LoadFn load);
  /// Shutdown().
  ~LoadManager();

  /// Starts loading (idempotent for a generation already known; a retry
  /// renews the lease). Invalid for a stale generation (an `extend` load may
  /// repeat the newest one, to add rows to it); CapacityError when the queue
  /// is full.
  arrow::Result<NodeLoadState> Start(NodeLoadRequest request) EXCLUDES(mu_);
  /// The load's state, after waiting up to `wait` for it to finish; renews
  /// the lease of that generation.
  NodeLoadState Wait(const std::string& dataset, uint64_t generation,
                     std::chrono::milliseconds wait) EXCLUDES(mu_);
  /// Takes a staged load's batches for publishing; KeyError when there is none
  /// of that generation.
  arrow::Result<LoadedTasks> TakeStaged(const std::string& dataset, uint64_t generation)
      EXCLUDES(mu_);
  /// Drops the slot of `dataset` (any generation when 0, else only that one or
  /// older), cancelling a running load; true when something was dropped.
  /// Remembers `generation` so a late node.load of it is refused (a heal's
  /// extend load too, unless `load_only`: a heal cleaning up its own load).
  bool Drop(const std::string& dataset, uint64_t generation, bool load_only = false) EXCLUDES(mu_);

  /// Drops every slot whose lease ran out (the lease thread calls it);
  /// returns how many.
  size_t ExpireLeases() EXCLUDES(mu_);

  /// Every slot's state (for node.status).
  std::vector<NodeLoadState> States() const EXCLUDES(mu_);
  /// The highest generation this node has seen for any dataset (a load of a
  /// lower one is refused as stale); 0 when none.
  uint64_t NewestGeneration() const EXCLUDES(mu_);
  /// Whether `dataset` is queued or loading.
  bool Loading(const std::string& dataset) const EXCLUDES(mu_);
  /// True when no load is queued, running or staged.
  bool Idle() const EXCLUDES(mu_);
  /// Cancels every load and joins the pool. Idempotent.
  void Shutdown() EXCLUDES(mu_);

 private:
  struct Slot {
    uint64_t generation = 0;
    LoadState state = LoadState::kQueued;  // queued, loading, staged, failed
    std::shared_ptr<LoadProgress> progress;
    std::optional<LoadedTasks> staged;
    NodeLoadState result;  // staged or failed: what node.load_status answers
    std::chrono::steady_clock::time_point confirmed;  // last Start/Wait of this generation
  };

  void Run(const std::string& dataset, uint64_t generation, const NodeLoadRequest& request,
           std::shared_ptr<LoadProgress> progress) EXCLUDES(mu_);
  NodeLoadState StateOf(const std::string& dataset, const Slot& slot) const REQUIRES(mu_);

  const LoadFn load_;
  mutable Mutex mu_;
  CondVar changed_;
  std::map<std::string, Slot> slots_ GUARDED_BY(mu_);
  std::map<std::string, uint64_t> newest_ GUARDED_BY(mu_);   // highest generation seen per name
  std::map<std::string, uint64_t> evicted_ GUARDED_BY(mu_);  // highest generation evicted
  bool stopping_ GUARDED_BY(mu_) = false;
  const std::chrono::steady_clock::duration lease_;
  BackgroundLoop lease_loop_;
  ThreadPool pool_;  // last: stops before what its tasks use
};

}  // namespace icefloe
