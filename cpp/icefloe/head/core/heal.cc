#include "icefloe/head/core/heal.h"

#include <algorithm>
#include <set>

namespace icefloe {

namespace {

const NodeDatasetInfo* FindCopy(const NodeInfo& node, const DatasetEntry& entry) {
  for (const auto& d : node.status.datasets) {
    if (d.name == entry.storage_name && d.generation == entry.generation) return &d;
  }
  return nullptr;
}

bool Covers(const NodeDatasetInfo& d, uint64_t start, uint64_t stop) {
  for (const auto& r : d.ranges) {
    if (r.start <= start && r.stop >= stop) return true;
  }
  return false;
}

bool Touches(const NodeDatasetInfo& d, uint64_t start, uint64_t stop) {
  for (const auto& r : d.ranges) {
    if (r.start < stop && r.stop > start) return true;
  }
  return false;
}

// The catalog slice holding row `row` (slices are sorted and disjoint).
size_t SliceOf(const DatasetEntry& entry, uint64_t row) {
  auto it = std::upper_bound(entry.slices.begin(), entry.slices.end(), row,
                             [](uint64_t r, const SliceLocation& s) { return r < s.stop; });
  return static_cast<size_t>(it - entry.slices.begin());
}

std::vector<CopyHealth::Unit> UnitsOf(const DatasetEntry& entry) {
  std::vector<CopyHealth::Unit> units;
  const bool by_task =
      !entry.task_starts.empty() && entry.task_starts.size() == entry.task_rows.size();
  if (by_task) {
    for (size_t t = 0; t < entry.task_starts.size(); ++t) {
      if (entry.task_rows[t] <= 0) continue;
      CopyHealth::Unit u;
      u.start = entry.task_starts[t];
      u.stop = u.start + static_cast<uint64_t>(entry.task_rows[t]);
      u.task = static_cast<int64_t>(t);
      u.slice = SliceOf(entry, u.start);
      units.push_back(std::move(u));
    }
  } else {
    for (size_t s = 0; s < entry.slices.size(); ++s) {
      CopyHealth::Unit u;
      u.start = entry.slices[s].start;
      u.stop = entry.slices[s].stop;
      u.slice = s;
      units.push_back(std::move(u));
    }
  }
  return units;
}

}  // namespace

std::vector<std::string> StrayHolders(const DatasetEntry& entry,
                                      const std::vector<NodeInfo>& nodes) {
  std::vector<std::string> strays;
  for (const auto& n : nodes) {
    if (n.state != NodeState::kAlive || n.status_requested_at <= entry.placed_at) continue;
    const NodeDatasetInfo* copy = FindCopy(n, entry);
    if (copy == nullptr || copy->ranges.empty()) continue;
    const bool listed = std::any_of(entry.slices.begin(), entry.slices.end(), [&](const auto& s) {
      return std::find(s.nodes.begin(), s.nodes.end(), n.location) != s.nodes.end();
    });
    if (!listed) strays.push_back(n.location);
  }
  return strays;
}

CopyHealth AssessCopy(const DatasetEntry& entry, const std::vector<NodeInfo>& nodes) {
  CopyHealth health;
  health.units = UnitsOf(entry);
  for (auto& u : health.units) {
    const std::vector<std::string>* listed =
        u.slice < entry.slices.size() ? &entry.slices[u.slice].nodes : nullptr;
    for (const auto& n : nodes) {
      if (n.state != NodeState::kAlive) continue;
      const bool fresh = n.status_requested_at.time_since_epoch().count() != 0 &&
                         n.status_requested_at > entry.placed_at;
      const NodeDatasetInfo* copy = FindCopy(n, entry);
      const bool is_listed =
          listed && std::find(listed->begin(), listed->end(), n.location) != listed->end();
      if (copy && Covers(*copy, u.start, u.stop)) {
        u.holders.push_back(n.location);
      } else if (!fresh && is_listed) {
        u.holders.push_back(n.location);  // its report predates the slice map
      } else if (copy && Touches(*copy, u.start, u.stop)) {
        u.partial.push_back(n.location);
      }
    }
    // Listed nodes first, in the catalog's order (the primary stays primary).
    if (listed) {
      std::stable_sort(u.holders.begin(), u.holders.end(),
                       [&](const std::string& a, const std::string& b) {
                         auto pa = std::find(listed->begin(), listed->end(), a) - listed->begin();
                         auto pb = std::find(listed->begin(), listed->end(), b) - listed->begin();
                         return pa < pb;
                       });
    }
  }
  // Per slice: missing when any of its units has no holder; replicas short
  // by the worst unit.
  const int64_t want = std::max<int32_t>(1, entry.request.replication);
  std::vector<int64_t> short_by(entry.slices.size(), 0);
  for (const auto& u : health.units) {
    if (u.slice >= short_by.size()) continue;
    const int64_t lacking = want - static_cast<int64_t>(u.holders.size());
    short_by[u.slice] = std::max(short_by[u.slice], lacking);
  }
  for (int64_t s : short_by) {
    if (s >= want) ++health.slices_missing;
    if (s > 0) health.replicas_missing += s;
  }
  return health;
}

void RebuildSlices(const CopyHealth& health, DatasetEntry* entry) {
  std::vector<SliceLocation> slices;
  std::set<std::string> all;
  for (const auto& u : health.units) {
    std::vector<std::string> nodes = u.holders;
    if (nodes.empty() && u.slice < entry->slices.size()) nodes = entry->slices[u.slice].nodes;
    all.insert(nodes.begin(), nodes.end());
    if (!slices.empty() && slices.back().nodes == nodes && slices.back().stop == u.start) {
      slices.back().stop = u.stop;
    } else {
      slices.push_back({u.start, u.stop, std::move(nodes)});
    }
  }
  entry->slices = std::move(slices);
  entry->nodes.assign(all.begin(), all.end());
}

int64_t HeldBytes(const DatasetEntry& entry, const std::vector<NodeInfo>& nodes) {
  int64_t bytes = 0;
  for (const auto& n : nodes) {
    if (n.state != NodeState::kAlive) continue;
    if (const NodeDatasetInfo* copy = FindCopy(n, entry)) bytes += copy->bytes;
  }
  return bytes;
}

}  // namespace icefloe
