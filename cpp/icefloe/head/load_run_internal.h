// One load's working state on its load thread. Internal to
// load_coordinator.cc and load_phases.cc.
#pragma once

#include <atomic>
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
  bool extend = false;                           // a heal: node.load adds rows to the copy
  // A refresh (refresh.h): the copy reused tasks take their rows from, and
  // per plan task the old task index it reuses (-1: read).
  std::shared_ptr<const DatasetEntry> base;
  std::vector<int64_t> reuse;
};

struct LoadCoordinator::HealTask {
  std::string storage;
  uint64_t generation = 0;
  std::string name;                  // the entry it started from
  std::shared_ptr<LoadJob> job;      // progress, cancellation, outcome
  std::atomic<bool> claimed{false};  // run by the pool or by a load waiting on it
};

}  // namespace icefloe
