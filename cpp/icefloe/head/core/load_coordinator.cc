#include "icefloe/head/core/load_coordinator.h"

#include <algorithm>
#include <map>
#include <numeric>

#include <arrow/type.h>

#include "icefloe/common/bytes.h"
#include "icefloe/common/log.h"
#include "icefloe/head/core/heal.h"
#include "icefloe/iceberg/types.h"
#include "icefloe/protocol/transform_spec.h"

namespace icefloe {

namespace {

std::chrono::steady_clock::duration ToDuration(double seconds) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(seconds));
}

// Estimated in-memory Arrow bytes of one task's projected columns.
int64_t EstimateTaskBytes(const iceberg::ScanTask& task, const iceberg::ScanPlan& plan,
                          double factor) {
  const auto& f = task.data_file;
  int64_t total = 0;
  for (int32_t id : plan.projection) {
    const iceberg::NestedField* field = plan.schema.FindById(id);
    if (field == nullptr) continue;
    auto arrow_type = iceberg::ToArrowType(*field->type);
    int width = arrow_type.ok() ? (*arrow_type)->byte_width() : -1;
    if (width > 0) {
      total += f.record_count * width + f.record_count / 8 + 64;
    } else {
      auto it = f.column_sizes.find(id);
      int64_t on_disk = it != f.column_sizes.end()
                            ? it->second
                            : f.file_size_in_bytes / std::max<size_t>(1, plan.projection.size());
      // Offsets (8 bytes per row) plus the expanded values.
      total += f.record_count * 8 + static_cast<int64_t>(static_cast<double>(on_disk) * factor);
    }
  }
  return static_cast<int64_t>(static_cast<double>(total) * iceberg::FileShare(task));
}

// Data files are split at row-group boundaries into parts of at most about
// this many bytes, so that each of `nodes` nodes gets a fair share of a table
// of few or large files (a quarter of a node's share, or coarser for small
// tables). 0 when no file is that large.
int64_t SplitTarget(const iceberg::ScanPlan& plan, size_t nodes) {
  constexpr int64_t kMinSplitBytes = int64_t{1} << 20;
  if (nodes == 0) return 0;
  int64_t total = 0, largest = 0;
  for (const auto& t : plan.tasks) {
    total += t.data_file.file_size_in_bytes;
    largest = std::max(largest, t.data_file.file_size_in_bytes);
  }
  const int64_t target = std::max(kMinSplitBytes, total / (4 * static_cast<int64_t>(nodes)));
  return largest > target ? target : 0;
}

// Invalid naming the first of `r`'s models whose content (`now`) is not
// what the copy `name` was tokenized with (`copy`).
arrow::Status ModelChanged(const std::string& name, const LoadRequest& r,
                           const std::vector<std::string>& copy,
                           const std::vector<std::string>& now) {
  const auto locations = r.transform ? r.transform->ModelLocations() : std::vector<std::string>{};
  for (size_t i = 0; i < copy.size() && i < now.size(); ++i) {
    if (copy[i] == now[i]) continue;
    return arrow::Status::Invalid("re-planning '", name, "': tokenizer model '",
                                  i < locations.size() ? locations[i] : "#" + std::to_string(i),
                                  "' changed since the copy was loaded (SHA-256 ", now[i],
                                  ", the copy's ", copy[i], ")");
  }
  return arrow::Status::Invalid("re-planning '", name, "': its transform reads ", now.size(),
                                " models, the copy was loaded with ", copy.size());
}

}  // namespace

LoadCoordinator::LoadCoordinator(LoadOptions options, NodeRpc* rpc, ThreadPool* calls,
                                 NodeRegistry* registry, Catalog* catalog, ScanPlanner planner,
                                 uint64_t first_generation)
    : options_(options),
      rpc_(rpc),
      calls_(calls),
      registry_(registry),
      catalog_(catalog),
      planner_(std::move(planner)),
      next_generation_(first_generation),
      run_env_{&options_, rpc, calls, registry, catalog, [this] { AfterPublish(); }},
      heals_(
          &run_env_, &pool_, [this](const std::string& name) { return WithPlan(name); },
          [this](const std::string& name) { return Loading(name); }),
      pool_("the load pool", options.max_concurrent_loads,
            static_cast<size_t>(std::max(0, options.max_queued_loads))) {}

LoadCoordinator::~LoadCoordinator() { Shutdown(); }

void LoadCoordinator::Shutdown() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    for (auto& [name, job] : jobs_)
      job->Cancel(arrow::Status::Cancelled("the head is shutting down"));
  }
  heals_.Stop();
  pool_.Shutdown();
}

arrow::Result<std::shared_ptr<LoadJob>> LoadCoordinator::Load(const LoadRequest& request) {
  MutexLock lock(&mu_);
  if (stopping_) return arrow::Status::Cancelled("the head is shutting down");
  auto running = jobs_.find(request.name);
  if (running != jobs_.end()) {
    if (running->second->request() == request) return running->second;  // join it
    return arrow::Status::AlreadyExists(
        "dataset '", request.name,
        "' is already being loaded with other arguments; wait for that load to end, or evict '",
        request.name, "' to cancel it");
  }
  auto job = std::make_shared<LoadJob>(request);
  arrow::Status st = pool_.Submit([this, job] { RunJob(job); });
  if (!st.ok()) {
    return st.WithMessage("cannot start another load: ", st.message(),
                          " (the head runs --max-loads at once and queues --max-queued-loads)");
  }
  jobs_[request.name] = job;
  return job;
}

bool LoadCoordinator::Loading(const std::string& name) const {
  MutexLock lock(&mu_);
  return jobs_.count(name) > 0;
}

std::vector<LoadProgressReply> LoadCoordinator::Loads() const {
  MutexLock lock(&mu_);
  std::vector<LoadProgressReply> out;
  for (const auto& [name, job] : jobs_) out.push_back(job->Progress());
  return out;
}

void LoadCoordinator::RunJob(std::shared_ptr<LoadJob> job) {
  auto result = Execute(job.get());
  // The follower retries a failing refresh every period (and a client may
  // retry a load): each error is said once per dataset, and again once a
  // load of the dataset has succeeded. The caller gets every error.
  const std::string& name = job->request().name;
  if (!result.ok()) {
    const std::string error = result.status().ToString();
    if (failures_logged_.First(name, error)) {
      LogWarn("load failed",
              {{"dataset", name}, {"error", error}, {"logged", "once per dataset and error"}});
    }
  } else {
    failures_logged_.Forget(name);
  }
  {
    MutexLock lock(&mu_);
    auto it = jobs_.find(job->request().name);
    if (it != jobs_.end() && it->second == job) jobs_.erase(it);
  }
  if (result.ok()) {
    job->Finish(arrow::Status::OK(), std::move(*result));
  } else {
    job->Finish(result.status(), nullptr);
  }
}

void LoadCoordinator::SetAfterPublish(std::function<void()> fn) {
  MutexLock lock(&mu_);
  after_publish_ = std::move(fn);
}

void LoadCoordinator::AfterPublish() {
  std::function<void()> after_publish;
  {
    MutexLock lock(&mu_);
    after_publish = after_publish_;
  }
  if (after_publish) after_publish();
}

uint64_t LoadCoordinator::NewGeneration() {
  uint64_t seen = 0;
  for (const auto& n : registry_->Snapshot()) {
    seen = std::max(seen, n.status.newest_generation);
    for (const auto& d : n.status.datasets) seen = std::max(seen, d.generation);
  }
  uint64_t next = next_generation_.load();
  while (true) {
    const uint64_t above = seen < std::numeric_limits<uint64_t>::max() ? seen + 1 : seen;
    const uint64_t generation = std::max(next, above);
    if (next_generation_.compare_exchange_weak(next, generation + 1)) return generation;
  }
}

arrow::Result<BoundTransform> LoadCoordinator::BindTransform(const LoadRequest& request,
                                                             const iceberg::ScanPlan& plan) const {
  if (!request.transform) return BoundTransform{};
  if (!transform_binder_) {
    return arrow::Status::NotImplemented("load '", request.name,
                                         "': this head cannot run transforms");
  }
  auto bound = transform_binder_(request, plan.arrow_schema);
  if (!bound.ok()) {
    return bound.status().WithMessage("load '", request.name, "': ", bound.status().message());
  }
  return bound;
}

arrow::Result<std::shared_ptr<const DatasetEntry>> LoadCoordinator::WithPlan(
    const std::string& name) {
  auto entry = catalog_->Find(name);
  if (!entry) return arrow::Status::KeyError("unknown dataset '", name, "'");
  if (entry->plan || entry->task_rows.empty()) return entry;
  LoadRequest pinned = entry->request;
  pinned.snapshot_id = entry->snapshot_id;
  pinned.ref.reset();
  pinned.as_of_ms.reset();
  auto plan = planner_(pinned);
  if (!plan.ok()) {
    return plan.status().WithMessage("re-planning '", name,
                                     "' at its snapshot: ", plan.status().message());
  }
  ARROW_ASSIGN_OR_RAISE(BoundTransform bound, BindTransform(pinned, *plan));
  if (!entry->model_sha256.empty() && bound.model_sha256 != entry->model_sha256) {
    return ModelChanged(name, pinned, entry->model_sha256, bound.model_sha256);
  }
  plan->tasks = iceberg::SplitTasks(std::move(plan->tasks), entry->split_bytes);
  if (plan->tasks.size() != entry->task_rows.size() ||
      CopyKey::Of(*plan, pinned, bound.model_sha256) != entry->key) {
    return arrow::Status::Invalid("re-planning '", name, "' at its snapshot gives ",
                                  plan->tasks.size(), " scan tasks, not the cached copy's ",
                                  entry->task_rows.size(), " (or another table)");
  }
  auto shared = std::make_shared<const iceberg::ScanPlan>(std::move(*plan));
  catalog_->UpdateCopies(entry->storage_name, entry->generation, [&](DatasetEntry* copy) {
    if (!copy->plan && copy->task_rows == entry->task_rows) {
      copy->plan = shared;
      copy->model_sha256 = bound.model_sha256;
      copy->model_kind = bound.model_kind;
    }
  });
  auto current = catalog_->Find(name);
  if (!current) return arrow::Status::KeyError("unknown dataset '", name, "'");
  return current;
}

arrow::Result<std::shared_ptr<const DatasetEntry>> LoadCoordinator::Execute(LoadJob* job) {
  const LoadRequest& request = job->request();
  ARROW_RETURN_NOT_OK(job->cancelled());
  job->SetPhase(LoadJob::Phase::kPlanning);
  LoadRun run(&run_env_, job);
  auto plan = planner_(request);
  if (!plan.ok()) {
    return plan.status().WithMessage("load '", request.name, "': ", plan.status().message());
  }
  run.plan = std::move(*plan);
  ARROW_ASSIGN_OR_RAISE(BoundTransform bound, BindTransform(request, run.plan));
  const CopyKey key = CopyKey::Of(run.plan, request, bound.model_sha256);
  run.previous = catalog_->Find(request.name);
  if (run.previous && run.previous->key == key && Loaded(run.previous->state)) {
    // Already cached: reuse it, once whole (a copy that lost rows is healed
    // first, never handed out as it is).
    if (AssessCopy(*run.previous, registry_->Snapshot()).replicas_missing == 0 &&
        run.previous->state == CopyState::kReady) {
      return run.previous;
    }
    return heals_.HealForLoad(run.previous);
  }
  if (auto same = catalog_->FindByKey(key)) {
    // Another name holds exactly this copy: share it.
    auto alias = std::make_shared<DatasetEntry>(*same);
    alias->name = request.name;
    alias->request = request;
    catalog_->Put(alias);
    LogInfo("dataset shares a cached copy", {{"dataset", request.name}, {"with", same->name}});
    registry_->PollAll();
    AfterPublish();  // the copy's record names the alias before load() returns
    return alias;
  }

  const auto schema = bound.schema ? bound.schema : run.plan.arrow_schema;
  run.base = RefreshBase(run, key, *schema);

  auto entry = std::make_shared<DatasetEntry>();
  entry->name = request.name;
  entry->key = key;
  entry->generation = NewGeneration();
  // Nodes hold one generation per storage name: while the previous copy (or
  // an alias of it) is stored under this name, the new copy gets a name of
  // its own, so both live side by side until the new one is published (and
  // the alias keeps its rows).
  entry->storage_name = request.name;
  // (Load names have at most 200 bytes, node dataset names 1024.)
  if (catalog_->StorageShared(request.name, request.name, 0) ||
      (run.previous && run.previous->storage_name == request.name)) {
    entry->storage_name = request.name + "@" + std::to_string(entry->generation);
  }
  entry->state = CopyState::kLoading;
  entry->request = request;
  entry->metadata_location = run.plan.metadata_location;
  entry->snapshot_id = run.plan.snapshot_id;
  entry->schema = schema;
  entry->model_sha256 = bound.model_sha256;
  entry->model_kind = bound.model_kind;
  entry->scan = run.plan.metrics;
  run.entry = entry;

  std::vector<PlacementNode> nodes;
  for (const auto& n : registry_->Alive()) {
    nodes.push_back({n.location, n.available_bytes(), n.disk_available_bytes()});
    run.nodes.push_back(n.location);
  }
  // A refresh splits files as the copy it refreshes did, so unchanged files
  // give the same tasks.
  entry->split_bytes = run.base && run.base->split_bytes > 0 ? run.base->split_bytes
                                                             : SplitTarget(run.plan, nodes.size());
  run.plan.tasks = iceberg::SplitTasks(std::move(run.plan.tasks), entry->split_bytes);
  entry->tasks_total = static_cast<int64_t>(run.plan.tasks.size());
  std::vector<int64_t> task_bytes;
  for (const auto& t : run.plan.tasks) {
    task_bytes.push_back(EstimateTaskBytes(t, run.plan, options_.size_estimate_factor));
  }
  entry->estimated_bytes = std::accumulate(task_bytes.begin(), task_bytes.end(), int64_t{0});
  RefreshDiff diff;
  if (run.base) {
    diff = DiffTasks(*run.base, run.plan.tasks, AssessCopy(*run.base, registry_->Snapshot()));
    ARROW_RETURN_NOT_OK(run.PlaceRefresh(&diff, task_bytes, nodes));
  } else {
    auto placement = PlaceTasks(task_bytes, nodes, request.replication);
    if (!placement.ok()) {
      return placement.status().WithMessage("load '", request.name,
                                            "': ", placement.status().message());
    }
    run.placement = std::move(*placement);
  }
  LogInfo(run.base ? "refresh started" : "load started",
          {{"dataset", request.name},
           {"generation", std::to_string(entry->generation)},
           {"tasks", std::to_string(run.plan.tasks.size())},
           {"reused", std::to_string(diff.tasks_reused)},
           {"estimated", FormatBytes(entry->estimated_bytes)},
           {"nodes", std::to_string(nodes.size())}});
  const auto started = std::chrono::steady_clock::now();
  arrow::Status st = run.Load();
  entry->load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!st.ok()) {
    auto unreached = EvictOnNodes(entry->storage_name, entry->generation, run.nodes);
    if (!unreached.empty()) {
      LogWarn("a failed load could not be cleaned up on every node",
              {{"dataset", request.name}, {"nodes", std::to_string(unreached.size())}});
    }
    registry_->PollAll();
    return st.WithMessage("load '", request.name, "': ", st.message());
  }
  if (run.base) {
    entry->refresh = SummarizeRefresh(*run.base, diff, entry->num_rows - diff.rows_reused);
  }
  run.Publish();
  return std::shared_ptr<const DatasetEntry>(entry);
}

std::shared_ptr<const DatasetEntry> LoadCoordinator::RefreshBase(const LoadRun& run,
                                                                 const CopyKey& key,
                                                                 const arrow::Schema& schema) {
  const auto& previous = run.previous;
  if (!previous || previous->state != CopyState::kReady || previous->task_rows.empty() ||
      previous->task_starts.size() != previous->task_rows.size() || !previous->schema ||
      !previous->schema->Equals(schema, /*check_metadata=*/false) ||
      !previous->key.SameButSnapshot(key)) {
    return nullptr;
  }
  auto planned = WithPlan(previous->name);  // an adopted copy re-plans its snapshot once
  if (!planned.ok()) {
    LogWarn("refresh reads every file: the cached copy's plan is unknown",
            {{"dataset", previous->name}, {"error", planned.status().ToString()}});
    return nullptr;
  }
  const auto& base = *planned;
  if (base->generation != previous->generation || !base->plan ||
      base->plan->name_mapping != run.plan.name_mapping) {
    return nullptr;
  }
  return base;
}

arrow::Result<EvictReply> LoadCoordinator::Evict(const std::string& name) {
  bool cancelled = false;
  {
    MutexLock lock(&mu_);
    auto it = jobs_.find(name);
    if (it != jobs_.end()) {
      it->second->Cancel(arrow::Status::Cancelled("load of '", name, "' cancelled by evict"));
      cancelled = true;
    }
  }
  auto [entry, unused] = catalog_->Remove(name);
  if (!entry) {
    if (cancelled) return EvictReply{name, 0, true, {}};
    return arrow::Status::KeyError("unknown dataset '", name, "'");
  }
  std::vector<std::string> unreached;
  if (unused) {
    heals_.Cancel(entry->storage_name, entry->generation,
                  arrow::Status::Cancelled("heal of '", name, "' cancelled by evict"));
    for (auto& n : EvictOnNodes(entry->storage_name, entry->generation, entry->nodes)) {
      unreached.push_back(std::move(n));
    }
  }
  for (const auto& r : catalog_->TakeRetired(name, 0)) {  // replaced copies still kept
    for (auto& n : EvictOnNodes(r.entry->storage_name, r.entry->generation, r.entry->nodes)) {
      unreached.push_back(std::move(n));
    }
  }
  registry_->PollAll();         // so status shows the freed memory at once
  if (!unused) AfterPublish();  // the shared copy's record loses this name
  LogInfo("evicted", {{"dataset", name}, {"bytes", FormatBytes(entry->nbytes)}});
  return EvictReply{name, unused ? entry->nbytes : 0, cancelled, std::move(unreached)};
}

void LoadCoordinator::CheckHealth() {
  const auto nodes = registry_->Snapshot();
  if (heals_.Check(nodes)) ReleaseRetired(nodes);
}

arrow::Result<std::shared_ptr<LoadJob>> LoadCoordinator::Heal(
    const std::shared_ptr<const DatasetEntry>& entry) {
  return heals_.Heal(entry);
}

void LoadCoordinator::ReleaseRetired(const std::vector<NodeInfo>& nodes) {
  const auto now = std::chrono::steady_clock::now();
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
    const bool expired = now - r.retired_at >= ToDuration(options_.retain_s);
    const bool idle = readers == 0 && now - last_used >= ToDuration(options_.retain_idle_s);
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

std::vector<std::string> LoadCoordinator::EvictOnNodes(const std::string& storage,
                                                       uint64_t generation,
                                                       const std::vector<std::string>& nodes) {
  return icefloe::EvictOnNodes(rpc_, calls_, options_.evict_timeout_s, storage, generation, nodes);
}

}  // namespace icefloe
