#include "icefloe/head/core/heal_runner.h"

#include <algorithm>
#include <map>
#include <set>

#include "icefloe/common/bytes.h"
#include "icefloe/common/log.h"
#include "icefloe/head/core/heal.h"

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
CopyState StateOf(const CopyHealth& h) {
  return h.slices_missing > 0 ? CopyState::kDegraded : CopyState::kReady;
}

}  // namespace

HealRunner::HealRunner(const LoadRunEnv* env, ThreadPool* pool, WithPlanFn with_plan,
                       LoadingFn loading)
    : env_(env), pool_(pool), with_plan_(std::move(with_plan)), loading_(std::move(loading)) {}

void HealRunner::Stop() {
  MutexLock lock(&mu_);
  stopping_ = true;
  for (auto& [storage, heal] : heals_)
    heal->job->Cancel(arrow::Status::Cancelled("the head is shutting down"));
}

void HealRunner::Cancel(const std::string& storage, uint64_t generation, arrow::Status why) {
  MutexLock lock(&mu_);
  auto heal = heals_.find(storage);
  if (heal != heals_.end() && heal->second->generation == generation) {
    heal->second->job->Cancel(std::move(why));
  }
}

arrow::Result<std::shared_ptr<LoadJob>> HealRunner::Heal(
    const std::shared_ptr<const DatasetEntry>& entry) {
  ARROW_ASSIGN_OR_RAISE(auto task, Start(entry, /*reset_backoff=*/true));
  return task->job;
}

std::vector<std::string> HealRunner::EvictOnNodes(const std::string& storage, uint64_t generation,
                                                  const std::vector<std::string>& nodes,
                                                  NodeEvict how) {
  return icefloe::EvictOnNodes(env_->rpc, env_->calls, env_->options->evict_timeout_s, storage,
                               generation, nodes, std::move(how));
}

bool HealRunner::Check(const std::vector<NodeInfo>& nodes) {
  std::set<std::string> seen;
  for (const auto& e : env_->catalog->All()) {
    if (!Loaded(e->state)) continue;
    if (!seen.insert(e->storage_name).second || loading_(e->name)) continue;
    const CopyHealth h = AssessCopy(*e, nodes);
    bool healing = false, due = false;
    {
      MutexLock lock(&mu_);
      if (stopping_) return false;
      healing = heals_.count(e->storage_name) > 0;
      const Backoff& b = backoff_[e->storage_name];
      due = b.attempts < env_->options->heal_attempts && Clock::now() >= b.next_try;
    }
    if (!healing && (e->state != StateOf(h) || e->slices_missing != h.slices_missing ||
                     e->replicas_missing != h.replicas_missing)) {
      if (h.slices_missing > 0 && e->state == CopyState::kReady) {
        LogWarn("dataset degraded", {{"dataset", e->storage_name},
                                     {"slices_missing", std::to_string(h.slices_missing)}});
      }
      env_->catalog->UpdateCopies(e->storage_name, e->generation, [&h](DatasetEntry* c) {
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
      auto started = Start(e, /*reset_backoff=*/false);
      if (!started.ok()) {
        LogWarn("heal not started",
                {{"dataset", e->storage_name}, {"error", started.status().ToString()}});
      }
    }
  }
  return true;
}

arrow::Result<std::shared_ptr<HealRunner::Task>> HealRunner::Start(
    const std::shared_ptr<const DatasetEntry>& entry, bool reset_backoff) {
  MutexLock lock(&mu_);
  if (stopping_) return arrow::Status::Cancelled("the head is shutting down");
  if (reset_backoff) backoff_.erase(entry->storage_name);
  auto running = heals_.find(entry->storage_name);
  if (running != heals_.end()) return running->second;
  auto task = std::make_shared<Task>();
  task->storage = entry->storage_name;
  task->generation = entry->generation;
  task->name = entry->name;
  task->job = std::make_shared<LoadJob>(entry->request);
  arrow::Status st = pool_->Submit([this, task] {
    if (!task->claimed.exchange(true)) Run(task);
  });
  if (!st.ok()) return st.WithMessage("cannot start a heal: ", st.message());
  heals_[task->storage] = task;
  return task;
}

void HealRunner::Run(const std::shared_ptr<Task>& task) {
  const auto started = Clock::now();
  auto result = Execute(task.get());
  const bool no_room = !result.ok() && result.status().IsOutOfMemory();
  {
    MutexLock lock(&mu_);
    auto it = heals_.find(task->storage);
    if (it != heals_.end() && it->second == task) heals_.erase(it);
    Backoff& b = backoff_[task->storage];
    if (result.ok()) {
      backoff_.erase(task->storage);
    } else if (no_room) {
      b.next_try = Clock::now() + Seconds(env_->options->heal_backoff_s);  // cheap to check again
    } else {
      const double wait_s =
          std::min(env_->options->heal_backoff_max_s,
                   env_->options->heal_backoff_s * double(int64_t{1} << std::min(b.attempts, 20)));
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

arrow::Result<std::shared_ptr<const DatasetEntry>> HealRunner::HealForLoad(
    const std::shared_ptr<const DatasetEntry>& entry) {
  ARROW_ASSIGN_OR_RAISE(auto task, Start(entry, /*reset_backoff=*/true));
  // Still queued behind this load: run it here rather than wait for a thread.
  if (!task->claimed.exchange(true)) {
    Run(task);
  } else if (!task->job->Wait(std::chrono::milliseconds(
                 static_cast<int64_t>(env_->options->load_timeout_s * 1000)))) {
    return arrow::Status::IOError("the heal of '", entry->name, "' did not finish within ",
                                  env_->options->load_timeout_s, "s");
  }
  auto now = env_->catalog->Find(entry->name);
  if (now && now->generation == entry->generation && now->state == CopyState::kReady) return now;
  ARROW_RETURN_NOT_OK(task->job->Outcome().status());
  return arrow::Status::IOError("dataset '", entry->name, "' is ",
                                now ? CopyStateName(now->state) : "gone",
                                now && !now->heal_error.empty() ? ": " + now->heal_error : "");
}

arrow::Result<std::shared_ptr<const DatasetEntry>> HealRunner::Execute(Task* task) {
  LoadJob* job = task->job.get();
  job->SetPhase(LoadJob::Phase::kPlanning);
  const auto started = Clock::now();
  auto entry = env_->catalog->Find(task->name);
  if (!entry || entry->storage_name != task->storage || entry->generation != task->generation) {
    return arrow::Status::Cancelled("dataset '", task->name, "' was replaced or evicted");
  }
  std::string why = "this head has no task map of the copy; evict and load it again";
  if (!entry->plan) {  // adopted after a head restart: re-plan its snapshot
    auto planned = with_plan_(task->name);
    if (planned.ok()) {
      entry = *planned;
    } else {
      why = planned.status().message() + "; evict and load it again";
    }
  }
  if (!entry->plan || entry->task_starts.size() != entry->plan->tasks.size()) {
    env_->catalog->UpdateCopies(task->storage, task->generation,
                                [&](DatasetEntry* c) { c->heal_error = why; });
    return arrow::Status::Invalid("cannot heal '", task->name, "': ", why);
  }
  env_->registry->PollAll();  // judge on fresh reports
  const auto nodes = env_->registry->Snapshot();
  const CopyHealth health = AssessCopy(*entry, nodes);
  if (health.replicas_missing == 0) {
    env_->catalog->UpdateCopies(task->storage, task->generation, [&](DatasetEntry* c) {
      c->state = CopyState::kReady;
      c->slices_missing = c->replicas_missing = 0;
      c->heal_error.clear();
    });
    return Current(*env_->catalog, task->name);
  }
  env_->catalog->UpdateCopies(task->storage, task->generation, [&](DatasetEntry* c) {
    c->state = CopyState::kHealing;
    c->slices_missing = health.slices_missing;
    c->replicas_missing = health.replicas_missing;
  });
  LogInfo("heal started", {{"dataset", task->storage},
                           {"generation", std::to_string(task->generation)},
                           {"slices_missing", std::to_string(health.slices_missing)},
                           {"replicas_missing", std::to_string(health.replicas_missing)}});

  LoadRun run(env_, job);
  run.plan = *entry->plan;
  run.entry = std::make_shared<DatasetEntry>(*entry);
  run.extend = true;
  arrow::Status placed = PlaceLostTasks(*entry, health, nodes, &run.nodes, &run.node_tasks);
  if (!placed.ok()) {
    const std::string why = "no node has room: " + placed.message();
    env_->catalog->UpdateCopies(task->storage, task->generation, [&](DatasetEntry* c) {
      c->state = StateOf(health);
      c->heal_error = why;
    });
    return arrow::Status::OutOfMemory("cannot heal '", task->name, "': ", why);
  }
  arrow::Status st = run.Repair();
  if (!st.ok()) {
    NodeEvict staged_only;
    staged_only.staged_only = true;
    EvictOnNodes(task->storage, task->generation, run.nodes, staged_only);
  }

  // The slice map from what the nodes now report (a partly failed commit
  // still counts where it landed).
  env_->registry->PollAll();
  const auto after_nodes = env_->registry->Snapshot();
  auto fresh = std::make_shared<DatasetEntry>(*entry);
  fresh->placed_at = Clock::time_point{};  // judge on the reports alone
  const CopyHealth after = AssessCopy(*fresh, after_nodes);
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  const bool kept =
      env_->catalog->UpdateCopies(task->storage, task->generation, [&](DatasetEntry* c) {
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
  return Current(*env_->catalog, task->name);
}

}  // namespace icefloe
