// What the head's loads work with: their bounds and timeouts, and the two
// strategies a load plans and checks its transform with (the head passes the
// Iceberg planner and transform binder; tests pass anything).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <arrow/result.h>
#include <arrow/type_fwd.h>

#include "icefloe/iceberg/scan.h"
#include "icefloe/protocol/actions.h"

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
  /// Heal (heal_runner.h): failed repairs of one copy are retried this many
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

}  // namespace icefloe
