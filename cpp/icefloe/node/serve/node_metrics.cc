#include "icefloe/node/serve/node_metrics.h"

#include <algorithm>
#include <map>

namespace icefloe {

namespace {

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

const char* KindName(int kind) {
  static const char* kNames[] = {"range", "plan", "rows"};
  return kNames[kind];
}

}  // namespace

NodeMetrics::NodeMetrics() {
  auto& r = registry_;
  auto& bytes = r.Counter("icefloe_node_served_bytes_total",
                          "Bytes of rows served by DoGet: the Arrow IPC bodies sent "
                          "(transport=network), or the Arrow bytes of the rows named by "
                          "reference in the shared export (transport=shared).");
  auto& rows = r.Counter("icefloe_node_served_rows_total", "Rows served by DoGet, by transport.");
  auto& batches = r.Counter("icefloe_node_served_batches_total",
                            "Record batches (pieces) sent by DoGet, by transport.");
  auto& streams = r.Counter("icefloe_node_doget_streams_total", "DoGet streams started.");
  auto& first = r.Histogram("icefloe_node_doget_first_batch_seconds",
                            "From a DoGet's start to its first record batch being ready.");
  for (int k = 0; k < 3; ++k) {
    const prometheus::Labels labels = {{"ticket", KindName(k)}};
    kinds_[k].streams = &streams.Add(labels);
    kinds_[k].first_batch = &first.Add(labels, LatencyBuckets());
    for (int t = 0; t < 2; ++t) {
      const prometheus::Labels by = {{"ticket", KindName(k)},
                                     {"transport", t == 0 ? "network" : "shared"}};
      kinds_[k].served[t] = {&bytes.Add(by), &rows.Add(by), &batches.Add(by)};
    }
  }
  streams_active_ =
      &r.Gauge("icefloe_node_doget_streams_active", "DoGet streams being served now.").Add({});
  batch_serve_ = &r.Histogram("icefloe_node_batch_serve_seconds",
                              "Time to produce one record batch of a DoGet (slice or gather).")
                      .Add({}, LatencyBuckets());
  gathers_ = &r.Counter("icefloe_node_gathers_total",
                        "Record batches gathered from scattered rows (one copy each).")
                  .Add({});
  gathered_rows_ =
      &r.Counter("icefloe_node_gathered_rows_total", "Rows copied by gathers.").Add({});
  loaded_bytes_ = &r.Counter("icefloe_node_loaded_bytes_total",
                             "Bytes of datasets published here by loads (load throughput).")
                       .Add({});
  loaded_rows_ =
      &r.Counter("icefloe_node_loaded_rows_total", "Rows of datasets published by loads.").Add({});
  published_ = &r.Counter("icefloe_node_datasets_published_total",
                          "Datasets (generations) published by loads.")
                    .Add({});
  errors_ = &r.Counter("icefloe_node_errors_total",
                       "Failed RPCs and streams, by RPC and Arrow status code.");
  for (auto code : CommonErrorCodes())
    errors_->Add({{"rpc", "DoGet"}, {"code", StatusCodeLabel(code)}});
  memory_used_ =
      &r.Gauge("icefloe_node_memory_used_bytes", "Bytes charged to the memory budget.").Add({});
  memory_limit_ =
      &r.Gauge("icefloe_node_memory_limit_bytes", "The memory budget (0: unlimited).").Add({});
  disk_used_ =
      &r.Gauge("icefloe_node_disk_used_bytes", "Bytes the disk tier's files hold.").Add({});
  disk_limit_ =
      &r.Gauge("icefloe_node_disk_limit_bytes", "The disk tier's budget (0: no tier).").Add({});
  auto& tier_read = r.Counter("icefloe_node_tier_read_bytes_total",
                              "Bytes of disk-tier batches that plan streams read, by where "
                              "they were: in RAM (read ahead, or still cached) or on disk (the "
                              "stream waited for the read).");
  tier_read_[0] = &tier_read.Add({{"from", "ram"}});
  tier_read_[1] = &tier_read.Add({{"from", "disk"}});
  disk_waits_ = &r.Counter("icefloe_node_tier_disk_waits_total",
                           "Reads of a disk-tier batch by a plan stream that waited for the disk.")
                     .Add({});
  prefetched_ = &r.Counter("icefloe_node_prefetched_bytes_total",
                           "Bytes the node read from the disk tier ahead of the streams.")
                     .Add({});
  auto& set_reads = r.Counter("icefloe_node_prefetch_reads_total",
                              "Reads of a disk-tier batch by a tracked plan stream, by whether "
                              "the read-ahead's working set held it (result=hit) or not.");
  set_reads_[0] = &set_reads.Add({{"result", "hit"}});
  set_reads_[1] = &set_reads.Add({{"result", "miss"}});
  prefetch_lead_ = &r.Gauge("icefloe_node_prefetch_lead_batches",
                            "Of the plan streams the read-ahead tracks, the fewest upcoming "
                            "batches already in RAM (0: none tracked).")
                        .Add({});
  prefetch_used_ = &r.Gauge("icefloe_node_prefetch_bytes",
                            "Bytes of disk-tier batches the read-ahead holds in RAM.")
                        .Add({});
  prefetch_limit_ =
      &r.Gauge("icefloe_node_prefetch_limit_bytes", "The read-ahead's RAM working set (0: none).")
           .Add({});
  memory_staged_ = &r.Gauge("icefloe_node_memory_staged_bytes",
                            "Bytes of loads staged here, waiting for node.commit.")
                        .Add({});
  gather_bytes_ = &r.Gauge("icefloe_node_gather_bytes", "Bytes held by gathers in flight.").Add({});
  datasets_ = &r.Gauge("icefloe_node_datasets", "Datasets cached here.").Add({});
  dataset_bytes_ = &r.Gauge("icefloe_node_dataset_bytes", "Bytes cached here, by dataset.");
  dataset_rows_ = &r.Gauge("icefloe_node_dataset_rows", "Rows cached here, by dataset.");
  loads_ = &r.Gauge("icefloe_node_loads", "Loads known here, by state.");
}

void NodeMetrics::SetReadahead(const ReadaheadStats& stats) {
  MutexLock lock(&readahead_mu_);
  auto add = [](prometheus::Counter* c, int64_t now, int64_t* seen) {
    if (now > *seen) c->Increment(static_cast<double>(now - *seen));
    *seen = std::max(*seen, now);
  };
  add(tier_read_[0], stats.ram_bytes, &readahead_seen_.ram_bytes);
  add(tier_read_[1], stats.disk_bytes, &readahead_seen_.disk_bytes);
  add(disk_waits_, stats.disk_waits, &readahead_seen_.disk_waits);
  add(prefetched_, stats.read_ahead_bytes, &readahead_seen_.read_ahead_bytes);
  add(set_reads_[0], stats.set_hits, &readahead_seen_.set_hits);
  add(set_reads_[1], stats.set_reads - stats.set_hits, &readahead_misses_seen_);
  prefetch_lead_->Set(static_cast<double>(stats.lead_batches));
  prefetch_used_->Set(static_cast<double>(stats.used_bytes));
  prefetch_limit_->Set(static_cast<double>(stats.capacity_bytes));
}

void NodeMetrics::SetStatus(const NodeStatus& status, int64_t gather_bytes) {
  memory_used_->Set(static_cast<double>(status.memory_used_bytes));
  memory_limit_->Set(static_cast<double>(status.memory_limit_bytes));
  disk_used_->Set(static_cast<double>(status.disk_used_bytes));
  disk_limit_->Set(static_cast<double>(status.disk_limit_bytes));
  gather_bytes_->Set(static_cast<double>(gather_bytes));
  datasets_->Set(static_cast<double>(status.datasets.size()));
  std::vector<std::pair<std::string, double>> bytes, rows;
  for (const auto& d : status.datasets) {
    bytes.emplace_back(d.name, static_cast<double>(d.bytes));
    rows.emplace_back(d.name, static_cast<double>(d.rows));
  }
  SetGaugesByLabel(dataset_bytes_, "dataset", bytes, &dataset_bytes_children_);
  SetGaugesByLabel(dataset_rows_, "dataset", rows, &dataset_rows_children_);
  std::map<std::string, double> by_state;  // the usual ones always there, at 0 when empty
  for (LoadState usual : {LoadState::kQueued, LoadState::kLoading, LoadState::kStaged}) {
    by_state[std::string(LoadStateName(usual))] = 0;
  }
  int64_t staged_bytes = 0;
  for (const auto& l : status.loads) {
    by_state[std::string(LoadStateName(l.state))] += 1;
    if (l.state == LoadState::kStaged) staged_bytes += l.bytes;
  }
  memory_staged_->Set(static_cast<double>(staged_bytes));
  SetGaugesByLabel(loads_, "state", {by_state.begin(), by_state.end()}, &loads_children_);
}

void NodeMetrics::Published(int64_t rows, int64_t bytes) {
  loaded_rows_->Increment(static_cast<double>(rows));
  loaded_bytes_->Increment(static_cast<double>(bytes));
  published_->Increment();
}

void NodeMetrics::Error(const char* rpc, const arrow::Status& status) {
  errors_->Add({{"rpc", rpc}, {"code", StatusCodeLabel(status.code())}}).Increment();
}

StreamMeter::StreamMeter(std::shared_ptr<NodeMetrics> metrics, StreamKind kind)
    : metrics_(std::move(metrics)), kind_(kind) {
  metrics_->Of(kind_).streams->Increment();
  metrics_->streams_active_->Increment();
}

StreamMeter::~StreamMeter() { metrics_->streams_active_->Decrement(); }

void StreamMeter::Batch(int64_t rows, int64_t bytes, std::chrono::steady_clock::duration serve,
                        bool gathered, Transport transport) {
  auto& k = metrics_->Of(kind_);
  if (first_) {
    first_ = false;
    k.first_batch->Observe(Seconds(std::chrono::steady_clock::now() - started_));
  }
  auto& served = k.served[transport == Transport::kShared ? 1 : 0];
  served.bytes->Increment(static_cast<double>(bytes));
  served.rows->Increment(static_cast<double>(rows));
  served.batches->Increment();
  metrics_->batch_serve_->Observe(Seconds(serve));
  if (gathered) {
    metrics_->gathers_->Increment();
    metrics_->gathered_rows_->Increment(static_cast<double>(rows));
  }
}

void StreamMeter::Failed(const arrow::Status& status) { metrics_->Error("DoGet", status); }

}  // namespace icefloe
