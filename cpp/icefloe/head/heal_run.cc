// Heal: the head reloads the rows of a copy that lost replicas (a dead node,
// a node back empty) onto live nodes with room, from the same scan tasks of
// the same snapshot, under the same storage name and generation (so global
// row ids, contents and tickets stay as they were; docs/protocol.md).
//
// One heal per storage name at a time, on the load pool; a load of the name
// with the same arguments joins it (or runs it, when it is still queued).
#include <algorithm>
#include <map>
#include <set>

#include "icefloe/common/bytes.h"
#include "icefloe/common/log.h"
#include "icefloe/head/heal.h"
#include "icefloe/head/load_run_internal.h"

namespace icefloe {

using Clock = std::chrono::steady_clock;

namespace {

Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// The entry of `name` after a heal, or why there is none (evicted meanwhile).
arrow::Result<std::shared_ptr<const DatasetEntry>> Current(const Catalog& catalog,
                                                           const std::string& name) {
  auto entry = catalog.Find(name);
  if (!entry) return arrow::Status::Cancelled("dataset '", name, "' was evicted during its heal");
  return entry;
}

// Where each task `health` finds short of replicas is copied: on live nodes
// holding none of its rows, within their room (PlaceRepairs). Fills the
// target nodes and, per target, its plan task indices in order.
arrow::Status PlaceLostTasks(const DatasetEntry& entry, const CopyHealth& health,
                             const std::vector<NodeInfo>& nodes, std::vector<std::string>* targets,
                             std::vector<std::vector<int64_t>>* node_tasks) {
  std::vector<PlacementNode> alive;
  for (const auto& n : nodes) {
    if (n.state == NodeState::kAlive)
      alive.push_back({n.location, n.available_bytes(), n.disk_available_bytes()});
  }
  auto index_of = [&](const std::string& location) {
    for (size_t i = 0; i < alive.size(); ++i) {
      if (alive[i].location == location) return static_cast<int32_t>(i);
    }
    return int32_t{-1};
  };
  const int64_t replicas = std::max<int64_t>(1, entry.request.replication);
  // Bytes per row of one replica, as the nodes measured them at load.
  const double row_bytes =
      entry.num_rows > 0 ? double(entry.nbytes) / double(entry.num_rows * replicas) : 0;
  std::vector<RepairTask> repairs;
  std::vector<int64_t> repair_task;  // repair -> plan task
  for (const auto& u : health.units) {
    const int64_t lacking = replicas - static_cast<int64_t>(u.holders.size());
    if (lacking <= 0 || u.task < 0) continue;
    RepairTask r;
    r.bytes = static_cast<int64_t>(row_bytes * double(u.stop - u.start));
    r.copies = static_cast<int32_t>(lacking);
    for (const auto& list : {u.holders, u.partial}) {
      for (const auto& n : list) r.exclude.push_back(index_of(n));
    }
    repairs.push_back(std::move(r));
    repair_task.push_back(u.task);
  }
  ARROW_ASSIGN_OR_RAISE(auto placement, PlaceRepairs(repairs, alive));
  std::map<int32_t, size_t> slot;  // alive index -> target index
  for (size_t i = 0; i < repairs.size(); ++i) {
    for (int32_t n : placement[i]) {
      auto [it, added] = slot.emplace(n, targets->size());
      if (added) {
        targets->push_back(alive[n].location);
        node_tasks->emplace_back();
      }
      (*node_tasks)[it->second].push_back(repair_task[i]);
    }
  }
  return arrow::Status::OK();
}

// The state a copy is in when no heal runs.
const char* StateOf(const CopyHealth& h) { return h.slices_missing > 0 ? "degraded" : "ready"; }

}  // namespace

bool LoadCoordinator::UpdateCopies(const std::string& storage, uint64_t generation,
                                   const std::function<void(DatasetEntry*)>& change) {
  bool any = false;
  for (const auto& e : catalog_->All()) {
    if (e->storage_name != storage || e->generation != generation) continue;
    // A concurrent Put (a reload) wins: Replace then fails and the new entry stays.
    auto copy = std::make_shared<DatasetEntry>(*e);
    change(copy.get());
    if (catalog_->Replace(e, copy)) any = true;
  }
  return any;
}

void LoadCoordinator::CheckHealth() {
  const auto nodes = registry_->Snapshot();
  std::set<std::string> seen;
  for (const auto& e : catalog_->All()) {
    if (e->state != "ready" && e->state != "degraded" && e->state != "healing") continue;
    if (!seen.insert(e->storage_name).second || Loading(e->name)) continue;
    const CopyHealth h = AssessCopy(*e, nodes);
    bool healing = false, due = false;
    {
      MutexLock lock(&mu_);
      if (stopping_) return;
      healing = heals_.count(e->storage_name) > 0;
      const HealBackoff& b = heal_backoff_[e->storage_name];
      due = b.attempts < options_.heal_attempts && Clock::now() >= b.next_try;
    }
    if (!healing && (e->state != StateOf(h) || e->slices_missing != h.slices_missing ||
                     e->replicas_missing != h.replicas_missing)) {
      if (h.slices_missing > 0 && e->state == "ready") {
        LogWarn("dataset degraded", {{"dataset", e->storage_name},
                                     {"slices_missing", std::to_string(h.slices_missing)}});
      }
      UpdateCopies(e->storage_name, e->generation, [&h](DatasetEntry* c) {
        c->state = StateOf(h);
        c->slices_missing = h.slices_missing;
        c->replicas_missing = h.replicas_missing;
        if (h.replicas_missing == 0) c->heal_error.clear();
      });
    }
    if (!healing && h.slices_missing == 0) {
      // Rows of this copy on a node the slice map no longer names (it came
      // back after a heal placed them elsewhere): nothing reads them.
      const std::vector<std::string> strays = StrayHolders(*e, nodes);
      if (!strays.empty()) {
        LogInfo("dropping rows a healed copy no longer uses",
                {{"dataset", e->storage_name},
                 {"generation", std::to_string(e->generation)},
                 {"nodes", std::to_string(strays.size())}});
        NodeEvict stray;
        stray.stray = true;
        EvictOnNodes(e->storage_name, e->generation, strays, stray);
      }
    }
    if (h.replicas_missing > 0 && !healing && due) {
      auto started = StartHeal(e, /*reset_backoff=*/false);
      if (!started.ok()) {
        LogWarn("heal not started",
                {{"dataset", e->storage_name}, {"error", started.status().ToString()}});
      }
    }
  }
  ReleaseRetired(nodes);
}

void LoadCoordinator::ReleaseRetired(const std::vector<NodeInfo>& nodes) {
  const auto now = Clock::now();
  for (const auto& r : catalog_->Retired()) {
    const DatasetEntry& e = *r.entry;
    int64_t readers = 0;
    for (const auto& n : nodes) {
      if (n.state != NodeState::kAlive) continue;
      for (const auto& d : n.status.datasets) {
        if (d.name == e.storage_name && d.generation == e.generation) readers += d.readers;
      }
    }
    auto last_used = r.last_used;
    if (readers > 0) {
      catalog_->TouchRetired(e.storage_name, e.generation, now);
      last_used = now;
    }
    const bool expired = now - r.retired_at >= Seconds(options_.retain_s);
    const bool idle = readers == 0 && now - last_used >= Seconds(options_.retain_idle_s);
    if (!expired && !idle) continue;
    for (const auto& gone : catalog_->TakeRetired(e.name, e.generation)) {
      LogInfo("freed a replaced copy",
              {{"dataset", e.name},
               {"generation", std::to_string(e.generation)},
               {"replaced_by", std::to_string(gone.replaced_by)},
               {"reason", expired ? "kept for --retain-s" : "no reader left"}});
      EvictOnNodes(e.storage_name, e.generation, e.nodes);
    }
  }
}

arrow::Result<std::shared_ptr<LoadJob>> LoadCoordinator::Heal(
    const std::shared_ptr<const DatasetEntry>& entry) {
  ARROW_ASSIGN_OR_RAISE(auto task, StartHeal(entry, /*reset_backoff=*/true));
  return task->job;
}

arrow::Result<std::shared_ptr<LoadCoordinator::HealTask>> LoadCoordinator::StartHeal(
    const std::shared_ptr<const DatasetEntry>& entry, bool reset_backoff) {
  MutexLock lock(&mu_);
  if (stopping_) return arrow::Status::Cancelled("the head is shutting down");
  if (reset_backoff) heal_backoff_.erase(entry->storage_name);
  auto running = heals_.find(entry->storage_name);
  if (running != heals_.end()) return running->second;
  auto task = std::make_shared<HealTask>();
  task->storage = entry->storage_name;
  task->generation = entry->generation;
  task->name = entry->name;
  task->job = std::make_shared<LoadJob>(entry->request);
  arrow::Status st = pool_.Submit([this, task] {
    if (!task->claimed.exchange(true)) RunHeal(task);
  });
  if (!st.ok()) return st.WithMessage("cannot start a heal: ", st.message());
  heals_[task->storage] = task;
  return task;
}

void LoadCoordinator::RunHeal(const std::shared_ptr<HealTask>& task) {
  const auto started = Clock::now();
  auto result = ExecuteHeal(task.get());
  const bool no_room = !result.ok() && result.status().IsOutOfMemory();
  {
    MutexLock lock(&mu_);
    auto it = heals_.find(task->storage);
    if (it != heals_.end() && it->second == task) heals_.erase(it);
    HealBackoff& b = heal_backoff_[task->storage];
    if (result.ok()) {
      heal_backoff_.erase(task->storage);
    } else if (no_room) {
      b.next_try = Clock::now() + Seconds(options_.heal_backoff_s);  // cheap to check again
    } else {
      const double wait_s =
          std::min(options_.heal_backoff_max_s,
                   options_.heal_backoff_s * double(int64_t{1} << std::min(b.attempts, 20)));
      ++b.attempts;
      b.next_try = Clock::now() + Seconds(wait_s);
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  if (result.ok()) {
    LogInfo("heal finished", {{"dataset", task->storage}, {"seconds", std::to_string(seconds)}});
    task->job->Finish(arrow::Status::OK(), std::move(*result));
  } else {
    LogWarn("heal failed", {{"dataset", task->storage}, {"error", result.status().ToString()}});
    task->job->Finish(result.status(), nullptr);
  }
}

arrow::Result<std::shared_ptr<const DatasetEntry>> LoadCoordinator::HealForLoad(
    const std::shared_ptr<const DatasetEntry>& entry) {
  ARROW_ASSIGN_OR_RAISE(auto task, StartHeal(entry, /*reset_backoff=*/true));
  // Still queued behind this load: run it here rather than wait for a thread.
  if (!task->claimed.exchange(true)) {
    RunHeal(task);
  } else if (!task->job->Wait(
                 std::chrono::milliseconds(static_cast<int64_t>(options_.load_timeout_s * 1000)))) {
    return arrow::Status::IOError("the heal of '", entry->name, "' did not finish within ",
                                  options_.load_timeout_s, "s");
  }
  auto now = catalog_->Find(entry->name);
  if (now && now->generation == entry->generation && now->state == "ready") return now;
  ARROW_RETURN_NOT_OK(task->job->Outcome().status());
  return arrow::Status::IOError("dataset '", entry->name, "' is ", now ? now->state : "gone",
                                now && !now->heal_error.empty() ? ": " + now->heal_error : "");
}

arrow::Result<std::shared_ptr<const DatasetEntry>> LoadCoordinator::ExecuteHeal(HealTask* task) {
  LoadJob* job = task->job.get();
  job->SetPhase(LoadJob::Phase::kPlanning);
  const auto started = Clock::now();
  auto entry = catalog_->Find(task->name);
  if (!entry || entry->storage_name != task->storage || entry->generation != task->generation) {
    return arrow::Status::Cancelled("dataset '", task->name, "' was replaced or evicted");
  }
  std::string why = "this head has no task map of the copy; evict and load it again";
  if (!entry->plan) {  // adopted after a head restart: re-plan its snapshot
    auto planned = WithPlan(task->name);
    if (planned.ok()) {
      entry = *planned;
    } else {
      why = planned.status().message() + "; evict and load it again";
    }
  }
  if (!entry->plan || entry->task_starts.size() != entry->plan->tasks.size()) {
    UpdateCopies(task->storage, task->generation, [&](DatasetEntry* c) { c->heal_error = why; });
    return arrow::Status::Invalid("cannot heal '", task->name, "': ", why);
  }
  registry_->PollAll();  // judge on fresh reports
  const auto nodes = registry_->Snapshot();
  const CopyHealth health = AssessCopy(*entry, nodes);
  if (health.replicas_missing == 0) {
    UpdateCopies(task->storage, task->generation, [&](DatasetEntry* c) {
      c->state = "ready";
      c->slices_missing = c->replicas_missing = 0;
      c->heal_error.clear();
    });
    return Current(*catalog_, task->name);
  }
  UpdateCopies(task->storage, task->generation, [&](DatasetEntry* c) {
    c->state = "healing";
    c->slices_missing = health.slices_missing;
    c->replicas_missing = health.replicas_missing;
  });
  LogInfo("heal started", {{"dataset", task->storage},
                           {"generation", std::to_string(task->generation)},
                           {"slices_missing", std::to_string(health.slices_missing)},
                           {"replicas_missing", std::to_string(health.replicas_missing)}});

  Run run;
  run.job = job;
  run.plan = *entry->plan;
  run.entry = std::make_shared<DatasetEntry>(*entry);
  run.extend = true;
  arrow::Status placed = PlaceLostTasks(*entry, health, nodes, &run.nodes, &run.node_tasks);
  if (!placed.ok()) {
    const std::string why = "no node has room: " + placed.message();
    UpdateCopies(task->storage, task->generation, [&](DatasetEntry* c) {
      c->state = StateOf(health);
      c->heal_error = why;
    });
    return arrow::Status::OutOfMemory("cannot heal '", task->name, "': ", why);
  }
  arrow::Status st = RepairOnNodes(&run);
  if (!st.ok()) {
    NodeEvict staged_only;
    staged_only.staged_only = true;
    EvictOnNodes(task->storage, task->generation, run.nodes, staged_only);
  }

  // The slice map from what the nodes now report (a partly failed commit
  // still counts where it landed).
  registry_->PollAll();
  const auto after_nodes = registry_->Snapshot();
  auto fresh = std::make_shared<DatasetEntry>(*entry);
  fresh->placed_at = Clock::time_point{};  // judge on the reports alone
  const CopyHealth after = AssessCopy(*fresh, after_nodes);
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  const bool kept = UpdateCopies(task->storage, task->generation, [&](DatasetEntry* c) {
    RebuildSlices(after, c);
    c->nbytes = HeldBytes(*c, after_nodes);
    c->state = StateOf(after);
    c->slices_missing = after.slices_missing;
    c->replicas_missing = after.replicas_missing;
    c->placed_at = Clock::now();
    c->heal_seconds = seconds;
    c->heal_error = st.ok() ? "" : "last heal failed: " + st.ToString();
  });
  if (!kept) {
    // Evicted or replaced meanwhile: what this heal added must not stay.
    EvictOnNodes(task->storage, task->generation, run.nodes);
    return arrow::Status::Cancelled("dataset '", task->name, "' was evicted during its heal");
  }
  if (!st.ok()) return st.WithMessage("heal of '", task->name, "': ", st.message());
  return Current(*catalog_, task->name);
}

arrow::Status LoadCoordinator::RepairOnNodes(Run* run) {
  int64_t placed = 0;
  for (const auto& tasks : run->node_tasks) placed += static_cast<int64_t>(tasks.size());
  run->job->SetTotals(placed, 0);
  run->job->SetPhase(LoadJob::Phase::kLoading);
  ARROW_RETURN_NOT_OK(StartOnNodes(run));
  ARROW_RETURN_NOT_OK(WaitForNodes(run));
  // The same snapshot's tasks must give the same rows as when loaded.
  const auto& entry = *run->entry;
  for (size_t n = 0; n < run->nodes.size(); ++n) {
    const auto& rows = run->staged[n].task_rows;
    if (rows.size() != run->node_tasks[n].size()) {
      return arrow::Status::IOError("node ", run->nodes[n], " reported ", rows.size(),
                                    " task row counts for ", run->node_tasks[n].size(), " tasks");
    }
    for (size_t i = 0; i < rows.size(); ++i) {
      const int64_t t = run->node_tasks[n][i];
      if (rows[i] != entry.task_rows[t]) {
        return arrow::Status::IOError("task ", t, " (", run->plan.tasks[t].data_file.file_path,
                                      ") now has ", rows[i], " rows, not ", entry.task_rows[t],
                                      ": the table's files changed; evict and load");
      }
    }
  }
  ARROW_RETURN_NOT_OK(run->job->cancelled());
  run->job->SetPhase(LoadJob::Phase::kCommitting);
  run->starts = entry.task_starts;
  return CommitOnNodes(run);
}

}  // namespace icefloe
