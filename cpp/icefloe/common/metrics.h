// Prometheus metrics for the servers, through prometheus-cpp (core): one
// registry per server, rendered as text on the HTTP side port's /metrics.
//
// Counters and histograms are updated where things happen (a DoGet, a load);
// gauges that describe state owned elsewhere (memory, datasets by state, node
// liveness) are set by refresh hooks that run right before each scrape, so a
// scrape always shows the state at that moment.
//
// Naming (docs/kubernetes.md lists every metric): `icefloe_<role>_...`, base
// units last (`_bytes`, `_seconds`), counters end in `_total`. Labels take
// values from bounded sets only (status codes, dataset states, node locations,
// jobs after JobTable's cap), never from request data.
//
// Thread-safe: prometheus-cpp's counters, gauges and histograms are atomic;
// families are locked by the library; hooks run under this class's mutex, one
// scrape at a time.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <arrow/status.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "icefloe/common/mutex.h"

namespace icefloe {

class MetricsRegistry {
 public:
  MetricsRegistry();

  /// Families are created once, at server construction, with fixed names;
  /// an invalid or duplicate name is a programming error (it aborts, and
  /// metrics_test registers every family a server makes).
  prometheus::Family<prometheus::Counter>& Counter(const std::string& name,
                                                   const std::string& help);
  prometheus::Family<prometheus::Gauge>& Gauge(const std::string& name, const std::string& help);
  prometheus::Family<prometheus::Histogram>& Histogram(const std::string& name,
                                                       const std::string& help);

  /// Runs before every scrape (under the scrape lock): sets gauges from the
  /// state they describe. Register at construction.
  void OnScrape(std::function<void()> hook) EXCLUDES(mu_);

  /// Runs the hooks, then the registry in Prometheus text format 0.0.4.
  std::string Scrape() EXCLUDES(mu_);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  Mutex mu_;
  std::vector<std::function<void()>> hooks_ GUARDED_BY(mu_);
};

/// An Arrow status code as a label value: "invalid", "key_error",
/// "out_of_memory", "ioerror", "cancelled", "already_exists", ...
std::string StatusCodeLabel(arrow::StatusCode code);
/// The codes whose series exist (at 0) from the start, so dashboards and
/// rate() see them before the first error.
const std::vector<arrow::StatusCode>& CommonErrorCodes();

/// Bucket bounds for latencies from 100 us to ~100 s (x~3 steps).
const prometheus::Histogram::BucketBoundaries& LatencyBuckets();

/// Sets `family`'s children to `values` (label value of `label` -> value):
/// adds missing ones, updates present ones and removes those not in `values`,
/// so a label set that disappears (an evicted dataset, a removed node) goes
/// from the scrape. `children` remembers what was added; guard it with the
/// scrape (call from an OnScrape hook).
void SetGaugesByLabel(prometheus::Family<prometheus::Gauge>* family, const std::string& label,
                      const std::vector<std::pair<std::string, double>>& values,
                      std::vector<std::pair<std::string, prometheus::Gauge*>>* children);

}  // namespace icefloe
