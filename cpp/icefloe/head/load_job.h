// A running load on the head: its plan, placement and outcome. Internal to
// the head library (head_server.cc, load_job.cc).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <arrow/status.h>
#include <nlohmann/json.hpp>

#include "icefloe/head/catalog.h"
#include "icefloe/head/placement.h"
#include "icefloe/iceberg/scan.h"

namespace icefloe {

struct LoadJob {
  std::shared_ptr<DatasetEntry> entry;  // owned by the job until published
  iceberg::ScanPlan plan;
  Placement placement;
  std::vector<std::string> node_locations;       // index -> location, as placed
  std::shared_ptr<const DatasetEntry> previous;  // the generation a reload replaces
  std::atomic<int64_t> tasks_done{0};
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  arrow::Status status;
  std::shared_ptr<const DatasetEntry> result;
};

/// Waits up to `timeout` for the job to finish; true when it has.
bool WaitForLoad(LoadJob& job, std::chrono::milliseconds timeout);
/// The finished job's description, or its error.
arrow::Result<nlohmann::json> LoadOutcome(LoadJob& job);

}  // namespace icefloe
