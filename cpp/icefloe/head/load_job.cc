// Loading a dataset: plan, place, load on nodes (phase 1), assign global row
// ids and commit (phase 2).
#include <chrono>
#include <future>
#include <numeric>
#include <set>

#include <arrow/type.h>

#include "icefloe/common/bytes.h"
#include "icefloe/common/log.h"
#include "icefloe/common/wire_status.h"
#include "icefloe/head/load_job.h"

#include "icefloe/head/head_server.h"
#include "icefloe/head/placement.h"
#include "icefloe/iceberg/types.h"

namespace icefloe {

using json = nlohmann::json;

namespace {

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
      total += f.record_count * 8 + static_cast<int64_t>(on_disk * factor);
    }
  }
  return total;
}

std::string DatasetKey(const iceberg::ScanPlan& plan, const LoadRequest& r) {
  json j = {{"table", plan.table_uuid.empty() ? plan.metadata_location : plan.table_uuid},
            {"snapshot", plan.snapshot_id ? *plan.snapshot_id : -1},
            {"projection", plan.projection},
            {"filter", r.filter},
            {"batch_rows", r.batch_rows},
            {"replication", r.replication}};
  return j.dump();
}

}  // namespace

arrow::Result<std::shared_ptr<LoadJob>> HeadServer::StartLoad(const LoadRequest& request) {
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    auto running = jobs_.find(request.name);
    if (running != jobs_.end()) return running->second;  // follow the running load
    if (static_cast<int32_t>(jobs_.size()) >= options_.max_concurrent_loads) {
      return arrow::Status::Invalid("too many loads in progress (", jobs_.size(),
                                    "); retry when one finishes");
    }
  }
  iceberg::ScanOptions scan;
  scan.snapshot_id = request.snapshot_id;
  scan.ref = request.ref;
  scan.as_of_ms = request.as_of_ms;
  scan.columns = request.columns;
  scan.filter = request.filter;
  auto plan = iceberg::PlanScan(io_, request.source, scan);
  if (!plan.ok()) {
    return plan.status().WithMessage("load '", request.name, "': ", plan.status().message());
  }

  auto job = std::make_shared<LoadJob>();
  job->plan = std::move(*plan);
  const std::string key = DatasetKey(job->plan, request);
  job->previous = catalog_.Find(request.name);
  if (job->previous && job->previous->key == key && job->previous->state == "ready") {
    job->finished = true;
    job->result = job->previous;
    return job;  // already cached: reuse
  }
  if (auto same = catalog_.FindByKey(key)) {
    // Another name holds exactly this copy: share it.
    auto alias = std::make_shared<DatasetEntry>(*same);
    alias->name = request.name;
    alias->request = request;
    catalog_.Put(alias);
    job->finished = true;
    job->result = alias;
    LogInfo("dataset shares a cached copy", {{"dataset", request.name}, {"with", same->name}});
    return job;
  }

  auto entry = std::make_shared<DatasetEntry>();
  entry->name = request.name;
  entry->storage_name = request.name;
  entry->key = key;
  entry->generation = next_generation_++;
  entry->state = "loading";
  entry->request = request;
  entry->metadata_location = job->plan.metadata_location;
  entry->snapshot_id = job->plan.snapshot_id;
  entry->schema = job->plan.arrow_schema;
  entry->scan = job->plan.metrics;
  entry->tasks_total = static_cast<int64_t>(job->plan.tasks.size());

  std::vector<int64_t> task_bytes;
  for (const auto& t : job->plan.tasks) {
    task_bytes.push_back(EstimateTaskBytes(t, job->plan, options_.size_estimate_factor));
  }
  entry->estimated_bytes = std::accumulate(task_bytes.begin(), task_bytes.end(), int64_t{0});
  std::vector<PlacementNode> nodes;
  for (const auto& n : registry_.Alive()) {
    int64_t available = n.memory_limit_bytes > 0
                            ? std::max<int64_t>(0, n.memory_limit_bytes - n.memory_used_bytes)
                            : (int64_t{1} << 60);
    nodes.push_back({n.location, available});
    job->node_locations.push_back(n.location);
  }
  auto placement = PlaceTasks(task_bytes, nodes, request.replication);
  if (!placement.ok()) {
    return placement.status().WithMessage("load '", request.name,
                                          "': ", placement.status().message());
  }
  job->placement = std::move(*placement);
  job->entry = entry;
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    jobs_[request.name] = job;
    threads_.emplace_back([this, job] { RunLoad(job); });
  }
  LogInfo("load started", {{"dataset", request.name},
                           {"tasks", std::to_string(job->plan.tasks.size())},
                           {"estimated", FormatBytes(entry->estimated_bytes)},
                           {"nodes", std::to_string(nodes.size())}});
  return job;
}

void HeadServer::RunLoad(std::shared_ptr<LoadJob> job) {
  arrow::Status st = ExecuteLoad(job.get());
  const auto& entry = job->entry;
  entry->load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - job->started).count();
  if (st.ok()) {
    entry->state = "ready";
    catalog_.Put(entry);
    if (job->previous && job->previous->generation != entry->generation &&
        !catalog_.StorageShared(entry->name, job->previous->storage_name,
                                job->previous->generation)) {
      std::vector<std::string> old_nodes;
      for (const auto& s : job->previous->slices) {
        old_nodes.insert(old_nodes.end(), s.nodes.begin(), s.nodes.end());
      }
      EvictStorage(job->previous->storage_name, job->previous->generation, old_nodes);
    }
    LogInfo("load finished", {{"dataset", entry->name},
                              {"rows", std::to_string(entry->num_rows)},
                              {"bytes", FormatBytes(entry->nbytes)},
                              {"seconds", std::to_string(entry->load_seconds)}});
  } else {
    entry->state = "failed";
    entry->error = st.ToString();
    EvictStorage(entry->storage_name, entry->generation, job->node_locations);
    LogWarn("load failed", {{"dataset", entry->name}, {"error", st.ToString()}});
  }
  registry_.PollAll();  // memory figures reflect the load at once
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    jobs_.erase(entry->name);
  }
  std::lock_guard<std::mutex> lock(job->mu);
  job->finished = true;
  job->status = st;
  job->result = entry;
  job->cv.notify_all();
}

arrow::Status HeadServer::ExecuteLoad(LoadJob* job) {
  auto& entry = *job->entry;
  const auto& plan = job->plan;
  const size_t num_nodes = job->node_locations.size();

  // Phase 1: every node loads its tasks, in parallel. Nodes without tasks
  // still take part: they then hold the dataset, empty (Kubeflow readiness).
  std::vector<std::vector<int64_t>> node_tasks(num_nodes);
  for (size_t t = 0; t < plan.tasks.size(); ++t) {
    for (int32_t n : job->placement.task_nodes[t]) node_tasks[n].push_back(static_cast<int64_t>(t));
  }
  std::vector<std::future<arrow::Result<json>>> loads(num_nodes);
  for (size_t n = 0; n < num_nodes; ++n) {
    NodeLoadRequest req;
    req.dataset = entry.storage_name;
    req.generation = entry.generation;
    req.schema = iceberg::SchemaToJson(plan.schema);
    req.name_mapping = plan.name_mapping;
    req.projection = plan.projection;
    req.filter = plan.filter;
    req.batch_rows = entry.request.batch_rows;
    for (int64_t t : node_tasks[n]) req.tasks.push_back({t, plan.tasks[t]});
    loads[n] = std::async(std::launch::async, [this, job, n, body = req.ToJson()] {
      auto r = clients_->Call(job->node_locations[n], "node.load", body, options_.load_timeout_s);
      if (r.ok()) job->tasks_done += static_cast<int64_t>((*r)["task_rows"].size());
      return r;
    });
  }
  std::vector<int64_t> task_rows(plan.tasks.size(), -1);
  arrow::Status first_error;
  for (size_t n = 0; n < num_nodes; ++n) {
    auto r = loads[n].get();
    if (!r.ok()) {
      if (IsPeerUnavailable(r.status()))
        registry_.MarkDead(job->node_locations[n], r.status().message());
      if (first_error.ok()) first_error = r.status();
      continue;
    }
    auto rows = (*r)["task_rows"].get<std::vector<int64_t>>();
    const json stats = (*r).value("stats", json::object());
    // Replicas read the same files: count each file once.
    entry.scan.row_groups_total +=
        stats.value("row_groups_total", int64_t{0}) / entry.request.replication;
    entry.scan.row_groups_read +=
        stats.value("row_groups_read", int64_t{0}) / entry.request.replication;
    if (rows.size() != node_tasks[n].size()) {
      first_error = arrow::Status::IOError("node ", job->node_locations[n], " reported ",
                                           rows.size(), " task counts for ", node_tasks[n].size());
      continue;
    }
    for (size_t i = 0; i < rows.size(); ++i) {
      int64_t& slot = task_rows[node_tasks[n][i]];
      if (slot >= 0 && slot != rows[i]) {
        first_error = arrow::Status::IOError("replicas disagree on task ", node_tasks[n][i], ": ",
                                             slot, " vs ", rows[i], " rows");
      }
      slot = rows[i];
    }
  }
  ARROW_RETURN_NOT_OK(first_error);

  // Global row ids: tasks in plan order, each a contiguous run.
  std::vector<uint64_t> starts(plan.tasks.size());
  uint64_t row = 0;
  for (size_t t = 0; t < plan.tasks.size(); ++t) {
    starts[t] = row;
    row += static_cast<uint64_t>(task_rows[t]);
  }
  entry.num_rows = static_cast<int64_t>(row);

  // Phase 2: commit on every node, in parallel.
  std::vector<std::future<arrow::Result<json>>> commits(num_nodes);
  for (size_t n = 0; n < num_nodes; ++n) {
    json task_starts = json::array();
    for (int64_t t : node_tasks[n]) task_starts.push_back(starts[t]);
    json body = {{"v", kProtocolVersion},
                 {"dataset", entry.storage_name},
                 {"generation", entry.generation},
                 {"task_starts", task_starts}};
    commits[n] = std::async(std::launch::async, [this, job, n, body] {
      return clients_->Call(job->node_locations[n], "node.commit", body, 60.0);
    });
  }
  int64_t bytes = 0;
  for (size_t n = 0; n < num_nodes; ++n) {
    auto r = commits[n].get();
    if (!r.ok()) {
      if (first_error.ok()) first_error = r.status();
      continue;
    }
    bytes += (*r).value("bytes", int64_t{0});
  }
  ARROW_RETURN_NOT_OK(first_error);
  entry.nbytes = bytes;

  // The slice map: merge neighbouring tasks held by the same nodes.
  for (size_t t = 0; t < plan.tasks.size(); ++t) {
    if (task_rows[t] == 0) continue;
    std::vector<std::string> nodes;
    for (int32_t n : job->placement.task_nodes[t]) nodes.push_back(job->node_locations[n]);
    uint64_t stop = starts[t] + static_cast<uint64_t>(task_rows[t]);
    if (!entry.slices.empty() && entry.slices.back().nodes == nodes &&
        entry.slices.back().stop == starts[t]) {
      entry.slices.back().stop = stop;
    } else {
      entry.slices.push_back({starts[t], stop, std::move(nodes)});
    }
  }
  return arrow::Status::OK();
}

json HeadServer::Progress(const LoadJob& job) const {
  int64_t done = job.tasks_done.load();
  // Tasks finished on nodes whose node.load is still running, from their status.
  for (const auto& n : registry_.Alive()) {
    for (const auto& l : n.status.value("loads", json::array())) {
      if (job.entry && l.value("dataset", "") == job.entry->storage_name) {
        done += l.value("tasks_done", int64_t{0});
      }
    }
  }
  json j = {{"state", "loading"}, {"tasks_done", done}};
  if (job.entry) {
    j["name"] = job.entry->name;
    j["tasks_total"] = job.entry->tasks_total;
    j["estimated_bytes"] = job.entry->estimated_bytes;
  }
  return j;
}

void HeadServer::EvictStorage(const std::string& storage_name, uint64_t generation,
                              const std::vector<std::string>& nodes) {
  json body = {{"v", kProtocolVersion}, {"dataset", storage_name}, {"generation", generation}};
  std::set<std::string> unique(nodes.begin(), nodes.end());
  for (const auto& loc : unique) {
    auto r = clients_->Call(loc, "node.evict", body, 30.0);
    if (!r.ok()) LogWarn("evict failed", {{"node", loc}, {"error", r.status().ToString()}});
  }
}

arrow::Result<json> HeadServer::Evict(const std::string& name) {
  auto [entry, unused] = catalog_.Remove(name);
  if (!entry) return arrow::Status::KeyError("unknown dataset '", name, "'");
  if (unused) {
    std::vector<std::string> nodes;
    for (const auto& s : entry->slices) nodes.insert(nodes.end(), s.nodes.begin(), s.nodes.end());
    EvictStorage(entry->storage_name, entry->generation, nodes);
  }
  registry_.PollAll();  // so status reflects the freed memory at once
  LogInfo("evicted", {{"dataset", name}, {"bytes", FormatBytes(entry->nbytes)}});
  return json{{"name", name}, {"bytes", unused ? entry->nbytes : 0}};
}

}  // namespace icefloe

namespace icefloe {

bool WaitForLoad(LoadJob& job, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(job.mu);
  return job.cv.wait_for(lock, timeout, [&] { return job.finished; });
}

arrow::Result<nlohmann::json> LoadOutcome(LoadJob& job) {
  std::lock_guard<std::mutex> lock(job.mu);
  ARROW_RETURN_NOT_OK(job.status);
  auto j = job.result->ToJson(true);
  j["state"] = job.result->state;
  return j;
}

}  // namespace icefloe
