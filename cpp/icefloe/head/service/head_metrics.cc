#include "icefloe/head/service/head_metrics.h"

#include <algorithm>

namespace icefloe {

using json = nlohmann::json;

namespace {

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// A number from a load's description (absent or not a number: 0).
double Number(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

// Load durations run from a second to hours.
const prometheus::Histogram::BucketBoundaries& LoadBuckets() {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {0.1, 0.3, 1,    3,    10,   30,
                                                                   100, 300, 1000, 3000, 10000};
  return kBuckets;
}

}  // namespace

HeadMetrics::HeadMetrics() {
  auto& r = registry_;
  flight_info_ = &r.Counter("icefloe_head_flight_info_total",
                            "GetFlightInfo calls answered, by descriptor kind and outcome.");
  flight_info_seconds_ = &r.Histogram("icefloe_head_flight_info_seconds",
                                      "Time to answer GetFlightInfo, by descriptor kind.");
  errors_ =
      &r.Counter("icefloe_head_errors_total", "Failed head RPCs, by RPC and Arrow status code.");
  loads_done_ =
      &r.Counter("icefloe_head_loads_done_total", "Loads that published a dataset.").Add({});
  loads_failed_ = &r.Counter("icefloe_head_loads_failed_total",
                             "Loads that failed, were cancelled or were refused, by code.");
  for (auto code : CommonErrorCodes()) {
    errors_->Add({{"rpc", "GetFlightInfo"}, {"code", StatusCodeLabel(code)}});
    loads_failed_->Add({{"code", StatusCodeLabel(code)}});
  }
  load_seconds_ =
      &r.Histogram("icefloe_head_load_seconds", "Duration of loads that published a dataset.")
           .Add({}, LoadBuckets());
  planning_seconds_ =
      &r.Histogram("icefloe_head_planning_seconds", "Iceberg scan planning time of finished loads.")
           .Add({}, LatencyBuckets());
  manifests_pruned_ =
      &r.Counter("icefloe_head_manifests_pruned_total", "Manifests skipped by partition summaries.")
           .Add({});
  auto& files_pruned = r.Counter("icefloe_head_data_files_pruned_total",
                                 "Data files skipped by scan planning, by reason.");
  files_pruned_partition_ = &files_pruned.Add({{"by", "partition"}});
  files_pruned_bounds_ = &files_pruned.Add({{"by", "bounds"}});
  auto& row_groups = r.Counter("icefloe_head_row_groups_total",
                               "Parquet row groups of finished loads, read or pruned.");
  row_groups_total_ = &row_groups.Add({{"outcome", "planned"}});
  row_groups_read_ = &row_groups.Add({{"outcome", "read"}});
  job_reports_ = &r.Counter("icefloe_head_job_reports_total",
                            "job.report actions, by outcome (accepted, dropped, invalid).");
  for (const char* outcome : {"accepted", "dropped", "invalid"}) {
    job_reports_->Add({{"outcome", outcome}});
  }
  slice_maps_ = &r.Counter("icefloe_head_slice_maps_total",
                           "slice_map actions: clients learning where a dataset's rows live.")
                     .Add({});
  loads_running_ = &r.Gauge("icefloe_head_loads_running", "Loads queued or running now.").Add({});
  ready_ = &r.Gauge("icefloe_head_ready", "1 when the head is ready (see /ready).").Add({});
  nodes_ = &r.Gauge("icefloe_head_nodes", "Data nodes known.").Add({});
  nodes_alive_ = &r.Gauge("icefloe_head_nodes_alive", "Data nodes alive.").Add({});
  datasets_ = &r.Gauge("icefloe_head_datasets", "Datasets in the catalog, by state.");
  datasets_degraded_ = &r.Gauge("icefloe_head_datasets_degraded",
                                "Datasets with slices lost and not healed (state degraded).")
                            .Add({});
  datasets_healing_ =
      &r.Gauge("icefloe_head_datasets_healing", "Datasets being healed (state healing).").Add({});
  slices_missing_ =
      &r.Gauge("icefloe_head_slices_missing", "Slices with no live replica, over all datasets.")
           .Add({});
  replicas_missing_ = &r.Gauge("icefloe_head_replicas_missing",
                               "Slice replicas lost (replication > 1), over all datasets.")
                           .Add({});
  dataset_rows_ = &r.Gauge("icefloe_head_dataset_rows", "Rows of each dataset.");
  dataset_bytes_ = &r.Gauge("icefloe_head_dataset_bytes", "Cached bytes of each dataset.");
  node_up_ = &r.Gauge("icefloe_head_node_up", "1 when the node is alive, by node.");
  node_heartbeat_age_ = &r.Gauge("icefloe_head_node_heartbeat_age_seconds",
                                 "Seconds since the node was last heard from.");
  node_memory_used_ = &r.Gauge("icefloe_head_node_memory_used_bytes",
                               "Memory the node last reported in use, by node.");
  node_memory_limit_ = &r.Gauge("icefloe_head_node_memory_limit_bytes",
                                "The node's memory budget (0: unlimited), by node.");
  job_rows_ = &r.Counter("icefloe_job_rows_total", "Rows the job's consumers received.");
  job_batches_ = &r.Counter("icefloe_job_batches_total", "Batches the job's consumers received.");
  job_wait_ = &r.Counter("icefloe_job_stall_seconds_total",
                         "Time the job's training loops waited for data (summed over consumers).");
  job_elapsed_ = &r.Counter("icefloe_job_read_seconds_total",
                            "Time the job's consumers spent in epochs (summed over consumers).");
  job_stall_ = &r.Gauge("icefloe_job_stall_ratio",
                        "Share of the job's time spent waiting for data, last 30 s (0..1).");
  job_rows_per_s_ =
      &r.Gauge("icefloe_job_rows_per_second", "Rows per second the job reads, last 30 s.");
  job_consumers_ =
      &r.Gauge("icefloe_job_consumers", "Consumers (rank, worker) that reported, last 30 s.");
  follow_refreshes_ =
      &r.Counter("icefloe_head_follow_refreshes_total",
                 "Reloads of a followed dataset to its table's new snapshot (--follow).");
  follow_errors_ = &r.Counter("icefloe_head_follow_errors_total",
                              "Failed checks or refreshes of a followed dataset.");
  follow_lag_ = &r.Gauge("icefloe_head_follow_lag_seconds",
                         "Last refresh of a followed dataset: its publish time minus the new "
                         "snapshot's commit time.");
  follow_last_check_ = &r.Gauge("icefloe_head_follow_last_check_timestamp_seconds",
                                "When the follower last read a followed dataset's table (Unix).");
  follow_last_refresh_ =
      &r.Gauge("icefloe_head_follow_last_refresh_timestamp_seconds",
               "When the follower last published a refresh of a followed dataset (Unix).");
}

void HeadMetrics::FlightInfo(const char* descriptor, std::chrono::steady_clock::duration elapsed,
                             const arrow::Status& status) {
  flight_info_->Add({{"descriptor", descriptor}, {"outcome", status.ok() ? "ok" : "error"}})
      .Increment();
  flight_info_seconds_->Add({{"descriptor", descriptor}}, LatencyBuckets())
      .Observe(Seconds(elapsed));
  if (!status.ok()) {
    errors_->Add({{"rpc", "GetFlightInfo"}, {"code", StatusCodeLabel(status.code())}}).Increment();
  }
}

void HeadMetrics::Track(std::shared_ptr<LoadJob> job) {
  MutexLock lock(&mu_);
  if (std::find(tracked_.begin(), tracked_.end(), job) != tracked_.end()) return;  // joined
  if (tracked_.size() >= kMaxTracked) return;  // cannot happen: the coordinator bounds loads
  tracked_.push_back(std::move(job));
}

void HeadMetrics::LoadRefused(const arrow::Status& status) {
  loads_failed_->Add({{"code", StatusCodeLabel(status.code())}}).Increment();
}

void HeadMetrics::JobReported(const char* outcome) {
  job_reports_->Add({{"outcome", outcome}}).Increment();
}

void HeadMetrics::PollLoads() {
  MutexLock lock(&mu_);
  for (auto it = tracked_.begin(); it != tracked_.end();) {
    if (!(*it)->Wait(std::chrono::milliseconds(0))) {
      ++it;
      continue;
    }
    Finished(**it);
    it = tracked_.erase(it);
  }
}

void HeadMetrics::Finished(const LoadJob& job) {
  // The outcome is the head's own description (DatasetDescription::ToJson).
  auto outcome = job.Outcome();
  arrow::Result<DatasetDescription> d = outcome.ok()
                                            ? DatasetDescription::FromJson(*outcome, "load outcome")
                                            : arrow::Result<DatasetDescription>(outcome.status());
  RecentLoad recent;
  recent.name = job.request().name;
  recent.state = CopyStateName(CopyState::kFailed);
  if (d.ok()) {
    loads_done_->Increment();
    load_seconds_->Observe(d->load_seconds);
    const iceberg::ScanMetrics& scan = d->scan;
    planning_seconds_->Observe(scan.planning_ms / 1000.0);
    manifests_pruned_->Increment(static_cast<double>(scan.manifests_pruned));
    files_pruned_partition_->Increment(static_cast<double>(scan.data_files_pruned_by_partition));
    files_pruned_bounds_->Increment(static_cast<double>(scan.data_files_pruned_by_bounds));
    row_groups_total_->Increment(static_cast<double>(scan.row_groups_total));
    row_groups_read_->Increment(static_cast<double>(scan.row_groups_read));
    recent = {d->name, d->state, d->rows, d->bytes, d->load_seconds, d->error.value_or(""), 0};
  } else {
    loads_failed_->Add({{"code", StatusCodeLabel(d.status().code())}}).Increment();
    recent.error = d.status().ToString();
  }
  recent_.push_front({std::move(recent), std::chrono::steady_clock::now()});
  if (recent_.size() > kRecentLoads) recent_.pop_back();
}

std::vector<RecentLoad> HeadMetrics::RecentLoads() const {
  MutexLock lock(&mu_);
  const auto now = std::chrono::steady_clock::now();
  std::vector<RecentLoad> out;
  for (const auto& r : recent_) {
    out.push_back(r.load);
    out.back().finished_s_ago = std::max(0.0, Seconds(now - r.finished));
  }
  return out;
}

void HeadMetrics::SetState(const std::vector<NodeInfo>& nodes,
                           const std::vector<std::shared_ptr<const DatasetEntry>>& datasets,
                           size_t loads_running, bool ready, const std::vector<JobStatus>& jobs) {
  MutexLock lock(&mu_);
  loads_running_->Set(static_cast<double>(loads_running));
  ready_->Set(ready ? 1 : 0);
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::pair<std::string, double>> up, age, used, limit;
  double alive = 0;
  for (const auto& n : nodes) {
    const bool is_alive = n.state == NodeState::kAlive;
    alive += is_alive ? 1 : 0;
    up.emplace_back(n.location, is_alive ? 1 : 0);
    // A node never heard from has no heartbeat age: leave it out.
    if (n.last_seen != std::chrono::steady_clock::time_point{}) {
      age.emplace_back(n.location, Seconds(now - n.last_seen));
    }
    used.emplace_back(n.location, static_cast<double>(n.status.memory_used_bytes));
    limit.emplace_back(n.location, static_cast<double>(n.status.memory_limit_bytes));
  }
  nodes_->Set(static_cast<double>(nodes.size()));
  nodes_alive_->Set(alive);
  SetGaugesByLabel(node_up_, "node", up, &children_["node_up"]);
  SetGaugesByLabel(node_heartbeat_age_, "node", age, &children_["heartbeat"]);
  SetGaugesByLabel(node_memory_used_, "node", used, &children_["memory_used"]);
  SetGaugesByLabel(node_memory_limit_, "node", limit, &children_["memory_limit"]);
  // States come from the catalog as they are (new ones appear by themselves);
  // the usual ones are always there, at 0 when empty.
  std::map<std::string, double> by_state;
  for (CopyState usual : {CopyState::kLoading, CopyState::kReady, CopyState::kFailed}) {
    by_state[std::string(CopyStateName(usual))] = 0;
  }
  std::vector<std::pair<std::string, double>> rows, bytes;
  double slices_missing = 0, replicas_missing = 0;
  for (const auto& d : datasets) {
    by_state[std::string(CopyStateName(d->state))] += 1;
    rows.emplace_back(d->name, static_cast<double>(d->num_rows));
    bytes.emplace_back(d->name, static_cast<double>(d->nbytes));
    // Lost slices and replicas (heal), as the description counts them.
    const json description = d->ToJson(false);
    slices_missing += Number(description, "slices_missing");
    replicas_missing += Number(description, "replicas_missing");
  }
  datasets_degraded_->Set(by_state[std::string(CopyStateName(CopyState::kDegraded))]);
  datasets_healing_->Set(by_state[std::string(CopyStateName(CopyState::kHealing))]);
  slices_missing_->Set(slices_missing);
  replicas_missing_->Set(replicas_missing);
  SetGaugesByLabel(datasets_, "state", {by_state.begin(), by_state.end()}, &children_["datasets"]);
  SetGaugesByLabel(dataset_rows_, "dataset", rows, &children_["dataset_rows"]);
  SetGaugesByLabel(dataset_bytes_, "dataset", bytes, &children_["dataset_bytes"]);
  SetJobs(jobs);
}

void HeadMetrics::SetJobs(const std::vector<JobStatus>& jobs) {
  std::map<std::string, const JobStatus*> current;
  for (const auto& j : jobs) current[j.job] = &j;
  for (auto it = jobs_.begin(); it != jobs_.end();) {  // expired jobs leave the scrape
    if (current.count(it->first)) {
      ++it;
      continue;
    }
    JobChildren& c = it->second;
    job_rows_->Remove(c.rows);
    job_batches_->Remove(c.batches);
    job_wait_->Remove(c.wait);
    job_elapsed_->Remove(c.elapsed);
    job_stall_->Remove(c.stall);
    job_rows_per_s_->Remove(c.rows_per_s);
    job_consumers_->Remove(c.consumers);
    it = jobs_.erase(it);
  }
  for (const auto& [name, s] : current) {
    auto it = jobs_.find(name);
    if (it == jobs_.end()) {
      const prometheus::Labels labels = {{"job", name}};
      it = jobs_
               .emplace(name, JobChildren{&job_rows_->Add(labels), &job_batches_->Add(labels),
                                          &job_wait_->Add(labels), &job_elapsed_->Add(labels),
                                          &job_stall_->Add(labels), &job_rows_per_s_->Add(labels),
                                          &job_consumers_->Add(labels), JobStatus{}})
               .first;
    }
    JobChildren& c = it->second;
    if (s->rows_total < c.seen.rows_total || s->batches_total < c.seen.batches_total ||
        s->elapsed_s_total < c.seen.elapsed_s_total) {
      c.seen = JobStatus{};  // forgotten and heard from again between two scrapes
    }
    // Totals only grow while a job is known: add what is new since last time.
    c.rows->Increment(static_cast<double>(s->rows_total - c.seen.rows_total));
    c.batches->Increment(static_cast<double>(s->batches_total - c.seen.batches_total));
    c.wait->Increment(std::max(0.0, s->wait_s_total - c.seen.wait_s_total));
    c.elapsed->Increment(std::max(0.0, s->elapsed_s_total - c.seen.elapsed_s_total));
    c.seen = *s;
    c.stall->Set(s->stall_ratio);
    c.rows_per_s->Set(s->rows_per_s);
    c.consumers->Set(static_cast<double>(s->consumers));
  }
}

void HeadMetrics::SetFollow(const std::vector<FollowRecord>& records) {
  MutexLock lock(&mu_);
  std::map<std::string, const FollowRecord*> current;
  for (const auto& r : records) {
    if (r.followed) current[r.name] = &r;
  }
  for (auto it = follow_.begin(); it != follow_.end();) {  // evicted or no longer followed
    if (current.count(it->first)) {
      ++it;
      continue;
    }
    follow_refreshes_->Remove(it->second.refreshes);
    follow_errors_->Remove(it->second.errors);
    it = follow_.erase(it);
  }
  std::vector<std::pair<std::string, double>> lag, checked, refreshed;
  for (const auto& [name, r] : current) {
    auto it = follow_.find(name);
    if (it == follow_.end()) {
      const prometheus::Labels labels = {{"dataset", name}};
      it = follow_
               .emplace(name, FollowChildren{&follow_refreshes_->Add(labels),
                                             &follow_errors_->Add(labels)})
               .first;
    }
    FollowChildren& c = it->second;
    if (r->refreshes < c.seen_refreshes || r->errors < c.seen_errors) {
      c.seen_refreshes = c.seen_errors = 0;  // followed afresh (reloaded with other arguments)
    }
    c.refreshes->Increment(static_cast<double>(r->refreshes - c.seen_refreshes));
    c.errors->Increment(static_cast<double>(r->errors - c.seen_errors));
    c.seen_refreshes = r->refreshes;
    c.seen_errors = r->errors;
    if (r->lag_s) lag.emplace_back(name, *r->lag_s);
    if (r->last_check_unix_s > 0) checked.emplace_back(name, r->last_check_unix_s);
    if (r->last_refresh_unix_s > 0) refreshed.emplace_back(name, r->last_refresh_unix_s);
  }
  SetGaugesByLabel(follow_lag_, "dataset", lag, &children_["follow_lag"]);
  SetGaugesByLabel(follow_last_check_, "dataset", checked, &children_["follow_check"]);
  SetGaugesByLabel(follow_last_refresh_, "dataset", refreshed, &children_["follow_refresh"]);
}

}  // namespace icefloe
