// Placement: which data nodes hold which scan tasks. Pure functions.
//
// Tasks keep their global order; each node gets contiguous runs of tasks so
// a contiguous row range touches few nodes. Runs are balanced by estimated
// bytes (within one task's size of the ideal share) and never exceed a node's
// available bytes. With replication r, run i is also placed on the next r-1
// nodes (in node order), so every task lives on r distinct nodes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <arrow/result.h>

namespace icefloe {

struct PlacementNode {
  std::string location;
  int64_t available_bytes = 0;  ///< RAM and disk together
  int64_t disk_bytes = 0;       ///< of which on the node's disk tier
};

struct Placement {
  /// For each task, the indices (into the node list) of the nodes holding it;
  /// the first is the primary.
  std::vector<std::vector<int32_t>> task_nodes;
  /// Estimated bytes placed on each node.
  std::vector<int64_t> node_bytes;
};

/// Places tasks with estimated sizes `task_bytes` on `nodes`. OutOfMemory when
/// the dataset cannot fit, stating needed vs available bytes; Invalid when
/// replication exceeds the number of nodes or there are no nodes.
arrow::Result<Placement> PlaceTasks(const std::vector<int64_t>& task_bytes,
                                    const std::vector<PlacementNode>& nodes, int32_t replication);

/// A task a heal must copy again: `copies` more replicas, on none of the
/// `exclude` nodes (those already holding, or partly holding, its rows).
struct RepairTask {
  int64_t bytes = 0;
  int32_t copies = 1;
  std::vector<int32_t> exclude;
};

/// Places heal copies: for each task, `copies` distinct nodes (indices into
/// `nodes`) within their available bytes. Keeps runs together: a task goes
/// where the previous one went when that node has room, else to the node
/// with most room. OutOfMemory stating the bytes needed and what the nodes
/// can take.
arrow::Result<std::vector<std::vector<int32_t>>> PlaceRepairs(
    const std::vector<RepairTask>& tasks, const std::vector<PlacementNode>& nodes);

}  // namespace icefloe
