// A data node's Prometheus metrics: what it served (bytes, rows, batches,
// streams, gathers, latencies), what it loaded, its memory and its errors.
//
// Counters move where the work happens: every DoGet stream holds a
// StreamMeter and reports each record batch it sends; Put() counts what a
// load published. Gauges (memory, datasets, loads) are set from
// NodeServer::Status() by a scrape hook. Names and meaning: docs/kubernetes.md.
//
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <arrow/status.h>

#include "icefloe/common/metrics.h"
#include "icefloe/common/mutex.h"
#include "icefloe/node/tier/readahead.h"
#include "icefloe/protocol/messages.h"

namespace icefloe {

/// What a DoGet stream serves: a row range (also Kubeflow tickets), an
/// epoch plan or a list of rows. The value of the `ticket` label.
enum class StreamKind { kRange, kPlan, kRows };

/// How a record batch's rows reach the reader: over the socket, or by
/// reference to the node's shared export (same host, --share-memory). The
/// value of the `transport` label.
enum class Transport { kNetwork, kShared };

class NodeMetrics {
 public:
  NodeMetrics();

  /// Sets the gauges from a status (memory, datasets, loads); `gather_bytes`
  /// is what gathers hold now. Call from a scrape hook.
  void SetStatus(const NodeStatus& status, int64_t gather_bytes);
  /// Sets the disk tier's figures from its read-ahead (counters move by what
  /// they moved since the last call). Call from a scrape hook.
  void SetReadahead(const ReadaheadStats& stats);
  /// A dataset published by a load: `rows` and `bytes` now cached.
  void Published(int64_t rows, int64_t bytes);
  /// A failed RPC, by Arrow status code (a small fixed set of label values).
  void Error(const char* rpc, const arrow::Status& status);

  MetricsRegistry& registry() { return registry_; }

 private:
  friend class StreamMeter;
  struct Served {  // by ticket kind and transport
    prometheus::Counter* bytes;
    prometheus::Counter* rows;
    prometheus::Counter* batches;
  };
  struct PerKind {
    Served served[2];  // by Transport
    prometheus::Counter* streams;
    prometheus::Histogram* first_batch;
  };
  PerKind& Of(StreamKind kind) { return kinds_[static_cast<int>(kind)]; }

  MetricsRegistry registry_;
  PerKind kinds_[3];
  prometheus::Gauge* streams_active_;
  prometheus::Histogram* batch_serve_;
  prometheus::Counter* gathers_;
  prometheus::Counter* gathered_rows_;
  prometheus::Counter* loaded_bytes_;
  prometheus::Counter* loaded_rows_;
  prometheus::Counter* published_;
  prometheus::Family<prometheus::Counter>* errors_;
  prometheus::Gauge* memory_used_;
  prometheus::Gauge* memory_limit_;
  prometheus::Gauge* disk_used_;
  prometheus::Gauge* disk_limit_;
  prometheus::Counter* tier_read_[2];  // from RAM, from disk
  prometheus::Counter* disk_waits_;
  prometheus::Counter* prefetched_;
  prometheus::Counter* set_reads_[2];  // hit, miss
  prometheus::Gauge* prefetch_lead_;
  prometheus::Gauge* prefetch_used_;
  prometheus::Gauge* prefetch_limit_;
  Mutex readahead_mu_;
  ReadaheadStats readahead_seen_ GUARDED_BY(readahead_mu_);  // what the counters hold
  int64_t readahead_misses_seen_ GUARDED_BY(readahead_mu_) = 0;
  prometheus::Gauge* memory_staged_;
  prometheus::Gauge* gather_bytes_;
  prometheus::Gauge* datasets_;
  prometheus::Family<prometheus::Gauge>* dataset_bytes_;
  prometheus::Family<prometheus::Gauge>* dataset_rows_;
  prometheus::Family<prometheus::Gauge>* loads_;
  std::vector<std::pair<std::string, prometheus::Gauge*>> dataset_bytes_children_;
  std::vector<std::pair<std::string, prometheus::Gauge*>> dataset_rows_children_;
  std::vector<std::pair<std::string, prometheus::Gauge*>> loads_children_;
};

/// One DoGet stream's view of the node's metrics: active while it lives,
/// then done. Used by one thread at a time (the stream's).
class StreamMeter {
 public:
  StreamMeter(std::shared_ptr<NodeMetrics> metrics, StreamKind kind);
  ~StreamMeter();
  StreamMeter(const StreamMeter&) = delete;
  StreamMeter& operator=(const StreamMeter&) = delete;

  /// A record batch sent: its rows, its bytes (the Arrow IPC body sent, or
  /// for Transport::kShared the Arrow bytes of the rows it names in the
  /// shared export), and how long producing it took. The first one also
  /// records the latency since the DoGet began; `gathered`: its rows were
  /// gathered (one copy).
  void Batch(int64_t rows, int64_t bytes, std::chrono::steady_clock::duration serve, bool gathered,
             Transport transport = Transport::kNetwork);
  /// The stream failed after it started.
  void Failed(const arrow::Status& status);

 private:
  std::shared_ptr<NodeMetrics> metrics_;
  StreamKind kind_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  bool first_ = true;
};

}  // namespace icefloe
