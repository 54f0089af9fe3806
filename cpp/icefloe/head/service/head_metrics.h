// The head's Prometheus metrics: GetFlightInfo rate and latency, loads
// (running, done, failed, duration, planning time, pruning), datasets by
// state, node liveness and heartbeats, and the per-job stall and rows/s of
// JobTable, and what the follower did per followed dataset (refreshes,
// errors, lag, last check and refresh). Names and meaning: docs/kubernetes.md.
//
// Loads are followed without hooks in the coordinator: every load the head
// starts or joins is Track()ed, and PollLoads() (each scrape and status)
// counts the ones that finished since, once, and keeps the last few for the
// status page.
//
// Thread-safe.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <arrow/status.h>
#include <nlohmann/json.hpp>

#include "icefloe/common/metrics.h"
#include "icefloe/common/mutex.h"
#include "icefloe/head/core/catalog.h"
#include "icefloe/head/core/follow.h"
#include "icefloe/head/core/jobs.h"
#include "icefloe/head/core/load_job.h"
#include "icefloe/head/core/registry.h"

namespace icefloe {

class HeadMetrics {
 public:
  /// Finished loads kept for the status page.
  static constexpr size_t kRecentLoads = 16;
  /// Loads followed at once (more than the coordinator ever runs and queues).
  static constexpr size_t kMaxTracked = 256;

  HeadMetrics();

  /// A GetFlightInfo answered (`descriptor`: range, epoch, rows, path,
  /// kubeflow or invalid) in `elapsed`, with `status`.
  void FlightInfo(const char* descriptor, std::chrono::steady_clock::duration elapsed,
                  const arrow::Status& status);
  /// A slice_map action answered (a client learning where rows live).
  void SliceMapServed() { slice_maps_->Increment(); }
  /// A load started or joined.
  void Track(std::shared_ptr<LoadJob> job) EXCLUDES(mu_);
  /// A load refused before it started (busy, name taken, no room).
  void LoadRefused(const arrow::Status& status);
  /// A job.report handled: accepted, dropped (a bound) or invalid.
  void JobReported(const char* outcome);
  /// Counts the tracked loads that finished; keeps them as recent loads.
  void PollLoads() EXCLUDES(mu_);
  /// The last finished loads, newest first: {name, state, rows, bytes,
  /// load_seconds, error, finished_s_ago}.
  std::vector<RecentLoad> RecentLoads() const EXCLUDES(mu_);

  /// Sets the gauges from the head's state. Call from a scrape hook.
  void SetState(const std::vector<NodeInfo>& nodes,
                const std::vector<std::shared_ptr<const DatasetEntry>>& datasets,
                size_t loads_running, bool ready, const std::vector<JobStatus>& jobs) EXCLUDES(mu_);

  /// Sets the follower's series from its records (followed datasets only;
  /// those gone leave the scrape). Call from a scrape hook.
  void SetFollow(const std::vector<FollowRecord>& records) EXCLUDES(mu_);

  MetricsRegistry& registry() { return registry_; }

 private:
  void Finished(const LoadJob& job) REQUIRES(mu_);

  struct JobChildren {
    prometheus::Counter* rows;
    prometheus::Counter* batches;
    prometheus::Counter* wait;
    prometheus::Counter* elapsed;
    prometheus::Gauge* stall;
    prometheus::Gauge* rows_per_s;
    prometheus::Gauge* consumers;
    JobStatus seen;  // totals already added to the counters
  };
  void SetJobs(const std::vector<JobStatus>& jobs) REQUIRES(mu_);

  struct FollowChildren {
    prometheus::Counter* refreshes;
    prometheus::Counter* errors;
    int64_t seen_refreshes = 0;  // totals already added to the counters
    int64_t seen_errors = 0;
  };

  MetricsRegistry registry_;
  prometheus::Family<prometheus::Counter>* flight_info_;
  prometheus::Family<prometheus::Histogram>* flight_info_seconds_;
  prometheus::Family<prometheus::Counter>* errors_;
  prometheus::Counter* loads_done_;
  prometheus::Family<prometheus::Counter>* loads_failed_;
  prometheus::Histogram* load_seconds_;
  prometheus::Histogram* planning_seconds_;
  prometheus::Counter* manifests_pruned_;
  prometheus::Counter* files_pruned_partition_;
  prometheus::Counter* files_pruned_bounds_;
  prometheus::Counter* row_groups_total_;
  prometheus::Counter* row_groups_read_;
  prometheus::Family<prometheus::Counter>* job_reports_;
  prometheus::Counter* slice_maps_;
  prometheus::Gauge* loads_running_;
  prometheus::Gauge* ready_;
  prometheus::Gauge* nodes_;
  prometheus::Gauge* nodes_alive_;
  prometheus::Family<prometheus::Gauge>* datasets_;
  prometheus::Gauge* datasets_degraded_;
  prometheus::Gauge* datasets_healing_;
  prometheus::Gauge* slices_missing_;
  prometheus::Gauge* replicas_missing_;
  prometheus::Family<prometheus::Gauge>* dataset_rows_;
  prometheus::Family<prometheus::Gauge>* dataset_bytes_;
  prometheus::Family<prometheus::Gauge>* node_up_;
  prometheus::Family<prometheus::Gauge>* node_heartbeat_age_;
  prometheus::Family<prometheus::Gauge>* node_memory_used_;
  prometheus::Family<prometheus::Gauge>* node_memory_limit_;
  prometheus::Family<prometheus::Counter>* job_rows_;
  prometheus::Family<prometheus::Counter>* job_batches_;
  prometheus::Family<prometheus::Counter>* job_wait_;
  prometheus::Family<prometheus::Counter>* job_elapsed_;
  prometheus::Family<prometheus::Gauge>* job_stall_;
  prometheus::Family<prometheus::Gauge>* job_rows_per_s_;
  prometheus::Family<prometheus::Gauge>* job_consumers_;
  prometheus::Family<prometheus::Counter>* follow_refreshes_;
  prometheus::Family<prometheus::Counter>* follow_errors_;
  prometheus::Family<prometheus::Gauge>* follow_lag_;
  prometheus::Family<prometheus::Gauge>* follow_last_check_;
  prometheus::Family<prometheus::Gauge>* follow_last_refresh_;

  mutable Mutex mu_;
  std::vector<std::shared_ptr<LoadJob>> tracked_ GUARDED_BY(mu_);
  struct Recent {
    RecentLoad load;
    std::chrono::steady_clock::time_point finished;
  };
  std::deque<Recent> recent_ GUARDED_BY(mu_);
  using Children = std::vector<std::pair<std::string, prometheus::Gauge*>>;
  std::map<std::string, Children> children_ GUARDED_BY(mu_);
  std::map<std::string, JobChildren> jobs_ GUARDED_BY(mu_);
  std::map<std::string, FollowChildren> follow_ GUARDED_BY(mu_);  // by dataset
};

}  // namespace icefloe
