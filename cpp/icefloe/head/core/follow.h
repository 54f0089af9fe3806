// Follower: the head keeps datasets on their table's newest snapshot
// (`--follow SECONDS`, ICEFLOE_FOLLOW_S in Kubeflow mode).
//
// Every period it looks at each ready dataset whose load request follows the
// table (no snapshot_id or as_of_ms; a `ref` follows when it is a branch),
// reads the snapshot the table's current metadata.json names (a TableProbe:
// one metadata file, no manifests) and, when it differs from the cached one,
// refreshes it through the head (HeadServer::Refresh plans the newest
// snapshot and replaces the copy when it is published). It skips a dataset
// whose load is running or that is not ready. A source that is a metadata
// file outside its table's metadata/ directory (or a ref that is a tag)
// cannot move: it is said once, in the log and in Status(), and never read
// again.
//
// Bounds: one check per dataset per period, at most one refresh running per
// dataset (the next check waits for it); a failure (unreadable metadata, a
// failed load) is counted, logged once per distinct error and tried again at
// the next period, not sooner. The lag of a refresh is the time it was
// published (seen within poll_s) minus the new snapshot's commit time
// (`timestamp-ms`).
//
// Thread-safe. Owns one thread between Start() and Stop(); probes and loads
// run on it (a load's work runs on the coordinator's pool).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <arrow/result.h>
#include <nlohmann/json.hpp>

#include "icefloe/common/background_loop.h"
#include "icefloe/common/log_once.h"
#include "icefloe/common/mutex.h"
#include "icefloe/head/core/catalog.h"
#include "icefloe/head/core/load_job.h"
#include "icefloe/protocol/actions.h"
#include "icefloe/protocol/replies.h"

namespace icefloe {

struct FollowOptions {
  double period_s = 0;  ///< between checks of one dataset; 0: the follower is off
  double poll_s = 0.1;  ///< how often a running refresh is looked at (its lag's precision)
};

/// What a table's current metadata says about the snapshot a request follows.
struct TableHead {
  /// The source is a loose metadata.json file (or the ref a tag): it never moves.
  bool fixed = false;
  std::string why_fixed;
  std::string metadata_location;
  std::optional<int64_t> snapshot_id;  ///< none: the table (or branch) has no snapshot
  int64_t timestamp_ms = 0;            ///< the snapshot's commit time
};

/// Reads the followed snapshot of `request.source` (its branch `request.ref`,
/// if any) without reading manifests. Errors name the location.
using TableProbe = std::function<arrow::Result<TableHead>(const LoadRequest& request)>;
/// Starts (or joins) a load (HeadServer::Load).
using FollowLoadFn =
    std::function<arrow::Result<std::shared_ptr<LoadJob>>(const LoadRequest& request)>;
/// Whether a load of the name is queued or running (LoadCoordinator::Loading),
/// or the head cannot reload it now (recovering its catalog): checked next period.
using FollowLoadingFn = std::function<bool(const std::string& name)>;

/// Why a request is not followed ("" when it is): a pinned snapshot_id or
/// as_of_ms. (Whether a source or ref can move is the probe's to say.)
std::string PinnedReason(const LoadRequest& request);

/// One dataset as the follower sees it (Status(), metrics).
struct FollowRecord {
  std::string name;
  LoadRequest request;
  bool followed = true;
  std::string why_not;                        ///< when not followed
  std::string state;                          ///< "following", "refreshing", "not followed"
  std::optional<int64_t> cached_snapshot_id;  ///< the snapshot the copy holds
  std::optional<int64_t> table_snapshot_id;   ///< the table's, at the last check
  std::string metadata_location;              ///< read at the last check
  double last_check_unix_s = 0;               ///< 0: never
  double last_refresh_unix_s = 0;             ///< 0: never
  std::optional<double> lag_s;                ///< of the last refresh
  std::optional<int64_t> refreshed_to;        ///< the snapshot the last refresh loaded
  int64_t checks = 0;
  int64_t refreshes = 0;
  int64_t errors = 0;
  std::string last_error;
  double last_error_unix_s = 0;

  FollowedDataset Status(double now_unix_s) const;
};

class Follower {
 public:
  /// `catalog` outlives the follower.
  Follower(FollowOptions options, Catalog* catalog, TableProbe probe, FollowLoadFn load,
           FollowLoadingFn loading);
  /// Stop().
  ~Follower();

  bool enabled() const { return options_.period_s > 0; }
  /// Starts the thread (nothing when the follower is off).
  void Start() EXCLUDES(mu_);
  /// Stops and joins the thread. A refresh it started goes on (the
  /// coordinator's Shutdown cancels it). Idempotent.
  void Stop() EXCLUDES(mu_);
  /// One round now (the thread runs them; tests call it directly): notes
  /// refreshes that ended, checks every dataset whose check is due.
  void RunOnce() EXCLUDES(mu_, round_mu_);
  /// {"period_s", "datasets": [record...]}.
  FollowStatus Status() const EXCLUDES(mu_);
  std::vector<FollowRecord> Records() const EXCLUDES(mu_);

 private:
  struct State {
    FollowRecord record;
    std::chrono::steady_clock::time_point next_check{};
    std::shared_ptr<LoadJob> job;  // the refresh running, if any
    TableHead target;              // what it loads
  };
  /// Looks at `name`'s running refresh; true while it still runs.
  bool FollowJob(State* state) REQUIRES(mu_);
  /// Counts and shows an error; logs it once per distinct text.
  void Failed(State* state, const std::string& what, const arrow::Status& status) REQUIRES(mu_);
  void Check(const std::shared_ptr<const DatasetEntry>& entry) EXCLUDES(mu_);
  bool AnyRefreshing() const EXCLUDES(mu_);

  const FollowOptions options_;
  Catalog* const catalog_;
  const TableProbe probe_;
  const FollowLoadFn load_;
  const FollowLoadingFn loading_;
  LogOnce log_once_;
  Mutex round_mu_;  // one round at a time
  mutable Mutex mu_;
  std::map<std::string, State> states_ GUARDED_BY(mu_);
  BackgroundLoop loop_;  // last: stops before what its rounds use
};

}  // namespace icefloe
