#include "icefloe/head/core/placement.h"

#include <algorithm>
#include <numeric>

#include "icefloe/common/bytes.h"

namespace icefloe {

namespace {

arrow::Status DoesNotFit(int64_t needed, const std::vector<PlacementNode>& nodes,
                         int32_t replication, const std::string& detail) {
  int64_t available = 0, disk = 0;
  for (const auto& n : nodes) {
    available += n.available_bytes;
    disk += n.disk_bytes;
  }
  return arrow::Status::OutOfMemory(
      "dataset does not fit: needs ", FormatBytes(needed), " (", replication,
      " replica(s)) but the cluster has ", FormatBytes(available), " available across ",
      nodes.size(), " node(s) (", FormatBytes(available - disk), " of memory, ", FormatBytes(disk),
      " of disk tier)", detail.empty() ? "" : "; ", detail);
}

}  // namespace

arrow::Result<Placement> PlaceTasks(const std::vector<int64_t>& task_bytes,
                                    const std::vector<PlacementNode>& nodes, int32_t replication) {
  const int32_t k = static_cast<int32_t>(nodes.size());
  if (k == 0) return arrow::Status::Invalid("no live data nodes to place the dataset on");
  if (replication < 1 || replication > k) {
    return arrow::Status::Invalid("replication ", replication, " needs at least that many live ",
                                  "nodes; the cluster has ", k);
  }
  const int64_t total = std::accumulate(task_bytes.begin(), task_bytes.end(), int64_t{0});
  const int64_t needed = total * replication;
  int64_t available = 0;
  for (const auto& n : nodes) available += n.available_bytes;
  if (needed > available) return DoesNotFit(needed, nodes, replication, "");

  // Split the task sequence into k contiguous runs, run r aiming at the share
  // of bytes proportional to what its nodes can take.
  Placement p;
  p.task_nodes.resize(task_bytes.size());
  p.node_bytes.assign(k, 0);
  std::vector<int64_t> capacity(k);
  for (int32_t i = 0; i < k; ++i) capacity[i] = nodes[i].available_bytes;

  // Capacity of run r is min over its replicas' capacity.
  auto run_capacity = [&](int32_t r) {
    int64_t c = capacity[r];
    for (int32_t j = 1; j < replication; ++j) c = std::min(c, capacity[(r + j) % k]);
    return c;
  };
  int64_t capacity_sum = 0;
  for (int32_t r = 0; r < k; ++r) capacity_sum += run_capacity(r);

  size_t t = 0;
  for (int32_t r = 0; r < k && t < task_bytes.size(); ++r) {
    // Ideal cumulative share after run r, proportional to capacity.
    long double share =
        capacity_sum > 0 ? static_cast<long double>(run_capacity(r)) / capacity_sum : 1.0L / k;
    int64_t target = static_cast<int64_t>(share * total);
    int64_t run = 0;
    const bool last = r == k - 1;
    while (t < task_bytes.size()) {
      int64_t b = task_bytes[t];
      bool fits = true;
      for (int32_t j = 0; j < replication; ++j) {
        int32_t n = (r + j) % k;
        if (p.node_bytes[n] + b > capacity[n]) fits = false;
      }
      if (!fits) break;
      // Stop at the target unless this is the last run: take the task if
      // doing so lands closer to the target than leaving it.
      if (!last && run > 0 && run + b > target && (run + b - target) > (target - run)) break;
      for (int32_t j = 0; j < replication; ++j) {
        int32_t n = (r + j) % k;
        p.task_nodes[t].push_back(n);
        p.node_bytes[n] += b;
      }
      run += b;
      ++t;
    }
  }
  // Runs filled up unevenly (tight budgets): place the rest wherever there is
  // most room, giving up contiguity rather than refusing a dataset that fits.
  for (; t < task_bytes.size(); ++t) {
    std::vector<int32_t> order(k);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return capacity[a] - p.node_bytes[a] > capacity[b] - p.node_bytes[b];
    });
    if (capacity[order[replication - 1]] - p.node_bytes[order[replication - 1]] < task_bytes[t]) {
      break;
    }
    for (int32_t j = 0; j < replication; ++j) {
      p.task_nodes[t].push_back(order[j]);
      p.node_bytes[order[j]] += task_bytes[t];
    }
  }
  if (t < task_bytes.size()) {
    return DoesNotFit(needed, nodes, replication,
                      "no node has room for task " + std::to_string(t) + " (" +
                          FormatBytes(task_bytes[t]) + ") in placement order");
  }
  return p;
}

arrow::Result<std::vector<std::vector<int32_t>>> PlaceRepairs(
    const std::vector<RepairTask>& tasks, const std::vector<PlacementNode>& nodes) {
  const int32_t k = static_cast<int32_t>(nodes.size());
  std::vector<int64_t> room(k);
  for (int32_t i = 0; i < k; ++i) room[i] = nodes[i].available_bytes;
  std::vector<std::vector<int32_t>> out(tasks.size());
  std::vector<int32_t> previous;  // where the previous task's copies went
  int64_t needed = 0;
  for (const auto& t : tasks) needed += t.bytes * t.copies;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const RepairTask& t = tasks[i];
    auto usable = [&](int32_t n) {
      return room[n] >= t.bytes &&
             std::find(t.exclude.begin(), t.exclude.end(), n) == t.exclude.end() &&
             std::find(out[i].begin(), out[i].end(), n) == out[i].end();
    };
    for (int32_t c = 0; c < t.copies; ++c) {
      int32_t pick = -1;
      for (int32_t n : previous) {
        if (usable(n)) {
          pick = n;
          break;
        }
      }
      if (pick < 0) {
        for (int32_t n = 0; n < k; ++n) {
          if (usable(n) && (pick < 0 || room[n] > room[pick])) pick = n;
        }
      }
      if (pick < 0) {
        std::string detail = "no node without these rows has " + FormatBytes(t.bytes) +
                             " free for repair task " + std::to_string(i);
        return DoesNotFit(needed, nodes, 1, detail);
      }
      out[i].push_back(pick);
      room[pick] -= t.bytes;
    }
    previous = out[i];
  }
  return out;
}

}  // namespace icefloe
