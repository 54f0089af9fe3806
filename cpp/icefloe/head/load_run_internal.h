// One load's working state on its load thread. Internal to
// load_coordinator.cc and load_phases.cc.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "icefloe/head/load_coordinator.h"

namespace icefloe {

struct LoadCoordinator::Run {
  LoadJob* job = nullptr;
  iceberg::ScanPlan plan;
  std::shared_ptr<DatasetEntry> entry;           // filled in as the load goes; published at the end
  std::shared_ptr<const DatasetEntry> previous;  // the copy a reload replaces
  Placement placement;
  std::vector<std::string> nodes;                // index -> location, as placed
  std::vector<std::vector<int64_t>> node_tasks;  // per node: plan task indices, in order
  std::vector<NodeLoadState> staged;             // per node: its final load state
  std::vector<int64_t> task_rows;                // per plan task: exact rows
  std::vector<uint64_t> starts;                  // per plan task: global id of its first row
};

}  // namespace icefloe
