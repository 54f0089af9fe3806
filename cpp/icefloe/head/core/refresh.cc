#include "icefloe/head/core/refresh.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace icefloe {

RefreshDiff DiffTasks(const DatasetEntry& old, const std::vector<iceberg::ScanTask>& tasks,
                      const CopyHealth& health) {
  RefreshDiff diff;
  diff.reuse.assign(tasks.size(), -1);
  diff.holders.assign(tasks.size(), {});
  const auto& old_tasks = old.plan->tasks;
  std::vector<std::string> old_identities(old_tasks.size());  // each computed once
  std::map<std::string, int64_t> by_identity;
  std::set<std::string> old_files, new_files;
  for (size_t t = 0; t < old_tasks.size(); ++t) {
    old_identities[t] = iceberg::TaskIdentity(old_tasks[t]);
    by_identity.emplace(old_identities[t], static_cast<int64_t>(t));
    old_files.insert(old_tasks[t].data_file.file_path);
  }
  std::map<int64_t, const CopyHealth::Unit*> units;  // old task -> its holders
  for (const auto& u : health.units) {
    if (u.task >= 0) units[u.task] = &u;
  }
  std::vector<bool> matched(old_tasks.size(), false);
  std::set<std::string> new_identities;
  for (size_t t = 0; t < tasks.size(); ++t) {
    new_files.insert(tasks[t].data_file.file_path);
    const std::string identity = iceberg::TaskIdentity(tasks[t]);
    new_identities.insert(identity);
    auto it = by_identity.find(identity);
    if (it == by_identity.end() || matched[it->second]) continue;
    const int64_t o = it->second;
    const int64_t rows = o < static_cast<int64_t>(old.task_rows.size()) ? old.task_rows[o] : -1;
    if (rows < 0) continue;
    if (rows > 0) {
      auto unit = units.find(o);
      if (unit == units.end() ||
          unit->second->holders.size() < static_cast<size_t>(old.request.replication)) {
        continue;  // a replica is lost: read the task again
      }
      diff.holders[t].assign(unit->second->holders.begin(),
                             unit->second->holders.begin() + old.request.replication);
    }
    matched[o] = true;
    diff.reuse[t] = o;
    ++diff.tasks_reused;
    diff.rows_reused += rows;
  }
  diff.tasks_read = static_cast<int64_t>(tasks.size()) - diff.tasks_reused;
  for (size_t o = 0; o < old_tasks.size(); ++o) {
    // (A match not reused, for a lost replica, is still in the new plan.)
    if (new_identities.count(old_identities[o])) continue;
    ++diff.tasks_dropped;
    if (o < old.task_rows.size() && old.task_rows[o] > 0) diff.rows_dropped += old.task_rows[o];
  }
  for (const auto& f : new_files) diff.files_added += old_files.count(f) ? 0 : 1;
  for (const auto& f : old_files) diff.files_removed += new_files.count(f) ? 0 : 1;
  return diff;
}

RefreshSummary SummarizeRefresh(const DatasetEntry& old, const RefreshDiff& diff,
                                int64_t rows_read) {
  return {old.generation,     old.snapshot_id,   diff.tasks_reused, diff.tasks_read,
          diff.tasks_dropped, diff.rows_reused,  rows_read,         diff.rows_dropped,
          diff.files_added,   diff.files_removed};
}

}  // namespace icefloe
