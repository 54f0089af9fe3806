#include "icefloe/head/core/load_run.h"

#include <map>

#include <arrow/flight/types.h>

#include "icefloe/common/bytes.h"
#include "icefloe/common/log.h"
#include "icefloe/common/wire_status.h"
#include "icefloe/iceberg/types.h"

namespace icefloe {

using Clock = std::chrono::steady_clock;

namespace {

Clock::time_point After(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// A call that did not answer within its deadline.
arrow::Status NoAnswer(const std::string& node, const char* action) {
  return PeerError(arrow::flight::MakeFlightError(arrow::flight::FlightStatusCode::TimedOut,
                                                  std::string("no answer to ") + action),
                   node);
}

}  // namespace

arrow::Status LoadRun::Load() {
  const size_t num_nodes = nodes.size();
  node_tasks.assign(num_nodes, {});
  for (size_t t = 0; t < plan.tasks.size(); ++t) {
    for (int32_t n : placement.task_nodes[t]) {
      node_tasks[n].push_back(static_cast<int64_t>(t));
    }
  }
  int64_t placed = 0;
  for (const auto& tasks : node_tasks) placed += static_cast<int64_t>(tasks.size());
  job_->SetTotals(placed, entry->estimated_bytes);
  job_->SetPhase(LoadJob::Phase::kLoading);
  ARROW_RETURN_NOT_OK(StartOnNodes());
  ARROW_RETURN_NOT_OK(WaitForNodes());

  // Exact rows per task; replicas must agree.
  task_rows.assign(plan.tasks.size(), -1);
  // Every replica's counters: each task is on `replication` nodes, and a
  // node holds any share of them, so sum before dividing.
  iceberg::LoadCounters counted;
  for (size_t n = 0; n < num_nodes; ++n) {
    const NodeLoadState& s = staged[n];
    if (s.task_rows.size() != node_tasks[n].size()) {
      return arrow::Status::IOError("node ", nodes[n], " reported ", s.task_rows.size(),
                                    " task row counts for ", node_tasks[n].size(), " tasks");
    }
    for (size_t i = 0; i < s.task_rows.size(); ++i) {
      int64_t& slot = task_rows[node_tasks[n][i]];
      if (slot >= 0 && slot != s.task_rows[i]) {
        return arrow::Status::IOError("replicas disagree on task ", node_tasks[n][i], ": ", slot,
                                      " vs ", s.task_rows[i], " rows");
      }
      slot = s.task_rows[i];
    }
    counted += s.counters();
  }
  entry->scan.counters() += counted.DividedBy(entry->request.replication);
  for (size_t t = 0; t < task_rows.size(); ++t) {
    if (task_rows[t] >= 0) continue;
    // A reused task of no rows is placed on no node.
    if (t < reuse.size() && reuse[t] >= 0) {
      task_rows[t] = 0;
      continue;
    }
    return arrow::Status::IOError("no node reported rows for task ", t);
  }
  // Global row ids: tasks in plan order, each a contiguous run.
  starts.assign(plan.tasks.size(), 0);
  uint64_t row = 0;
  for (size_t t = 0; t < plan.tasks.size(); ++t) {
    starts[t] = row;
    row += static_cast<uint64_t>(task_rows[t]);  // each <= 2^62 (checked on parse)
    if (row > kMaxRows) {
      return arrow::Status::Invalid("the dataset has more than ", kMaxRows, " rows");
    }
  }
  entry->num_rows = static_cast<int64_t>(row);
  ARROW_RETURN_NOT_OK(job_->cancelled());
  job_->SetPhase(LoadJob::Phase::kCommitting);
  return CommitOnNodes();
}

arrow::Status LoadRun::StartOnNodes() {
  const DatasetEntry& copy = *entry;
  auto requests = std::make_shared<std::vector<NodeLoadRequest>>(nodes.size());
  for (size_t n = 0; n < nodes.size(); ++n) {
    NodeLoadRequest& req = (*requests)[n];
    req.dataset = copy.storage_name;
    req.generation = copy.generation;
    req.schema = iceberg::SchemaToJson(plan.schema);
    req.projection = plan.projection;
    req.name_mapping = plan.name_mapping;
    req.filter = plan.filter;
    req.batch_rows = copy.request.batch_rows;
    req.extend = extend;
    req.transform = copy.request.transform;
    req.model_sha256 = copy.model_sha256;
    for (int64_t t : node_tasks[n]) {
      TaskSpec spec{t, plan.tasks[t]};
      const int64_t old = t < static_cast<int64_t>(reuse.size()) ? reuse[t] : -1;
      if (old >= 0) {  // a refresh: take the rows from the copy this node holds
        spec.reuse_start = base->task_starts[old];
        spec.reuse_rows = base->task_rows[old];
        req.reuse_dataset = base->storage_name;
        req.reuse_generation = base->generation;
      }
      req.tasks.push_back(std::move(spec));
    }
  }
  NodeRpc* rpc = env_->rpc;
  const auto locations = nodes;
  const double timeout_s = env_->options->node_call_timeout_s;
  auto results = FanOut<NodeLoadState>(
      env_->calls, locations.size(),
      [rpc, locations, requests, timeout_s](size_t n) {
        return rpc->StartLoad(locations[n], (*requests)[n], timeout_s);
      },
      After(timeout_s + 1));
  for (size_t n = 0; n < locations.size(); ++n) {
    arrow::Status st = !results[n]         ? NoAnswer(locations[n], "node.load")
                       : !results[n]->ok() ? results[n]->status()
                                           : arrow::Status::OK();
    if (st.ok() && (**results[n]).state == LoadState::kFailed) {
      st = (**results[n]).ErrorStatus("node " + locations[n] + ": ");
    }
    if (!st.ok()) {
      if (IsPeerUnavailable(st)) env_->registry->MarkDead(locations[n], st);
      return st;
    }
  }
  return arrow::Status::OK();
}

arrow::Status LoadRun::WaitForNodes() {
  const DatasetEntry& copy = *entry;
  const auto deadline = After(env_->options->load_timeout_s);
  const uint64_t wait_ms = static_cast<uint64_t>(env_->options->poll_wait_s * 1000);
  staged.assign(nodes.size(), NodeLoadState{});
  std::vector<size_t> pending(nodes.size());
  for (size_t n = 0; n < pending.size(); ++n) pending[n] = n;
  std::vector<int64_t> done(nodes.size(), 0);
  NodeRpc* rpc = env_->rpc;
  while (!pending.empty()) {
    ARROW_RETURN_NOT_OK(job_->cancelled());
    if (Clock::now() > deadline) {
      return arrow::Status::IOError("nodes did not finish loading within ",
                                    env_->options->load_timeout_s, "s");
    }
    const auto round_start = Clock::now();
    // Staged nodes are asked again too: each node.load_status renews the
    // staged load's lease there (node/load_manager.h).
    std::vector<size_t> polled = pending;
    for (size_t n = 0; n < nodes.size(); ++n) {
      if (staged[n].state == LoadState::kStaged) polled.push_back(n);
    }
    std::vector<std::string> asked;
    for (size_t n : polled) asked.push_back(nodes[n]);
    NodeLoadStatusRequest req{copy.storage_name, copy.generation, wait_ms};
    const double timeout_s = env_->options->node_call_timeout_s + env_->options->poll_wait_s;
    auto results = FanOut<NodeLoadState>(
        env_->calls, asked.size(),
        [rpc, asked, req, timeout_s](size_t i) {
          return rpc->LoadStatus(asked[i], req, timeout_s);
        },
        After(timeout_s + 1));
    std::vector<size_t> still;
    for (size_t i = 0; i < asked.size(); ++i) {
      const size_t n = polled[i];
      if (!results[i]) return NoAnswer(asked[i], "node.load_status");
      if (!results[i]->ok()) {
        if (IsPeerUnavailable(results[i]->status())) {
          env_->registry->MarkDead(asked[i], results[i]->status());
        }
        return results[i]->status();
      }
      const NodeLoadState& s = **results[i];
      if (s.state == LoadState::kFailed) return s.ErrorStatus("node " + asked[i] + ": ");
      if (s.state == LoadState::kAbsent) {
        return arrow::Status::IOError("node ", asked[i], " no longer has this load (restarted?)");
      }
      done[n] = std::min<int64_t>(s.tasks_done, static_cast<int64_t>(node_tasks[n].size()));
      if (s.state == LoadState::kStaged) {
        staged[n] = s;
        done[n] = static_cast<int64_t>(node_tasks[n].size());
      } else {
        still.push_back(n);
      }
    }
    int64_t total_done = 0;
    for (int64_t d : done) total_done += d;
    job_->SetTasksDone(total_done);
    pending = std::move(still);
    // Nodes answer at once when their state changes; do not spin on one that
    // answers early without news.
    const auto min_round = std::chrono::milliseconds(20);
    if (!pending.empty() && Clock::now() - round_start < min_round) {
      job_->WaitCancelled(min_round);
    }
  }
  return arrow::Status::OK();
}

arrow::Status LoadRun::CommitOnNodes() {
  const DatasetEntry& copy = *entry;
  auto commits = std::make_shared<std::vector<NodeCommit>>(nodes.size());
  for (size_t n = 0; n < nodes.size(); ++n) {
    NodeCommit& c = (*commits)[n];
    c.dataset = copy.storage_name;
    c.generation = copy.generation;
    for (int64_t t : node_tasks[n]) c.task_starts.push_back(starts[t]);
  }
  NodeRpc* rpc = env_->rpc;
  const auto locations = nodes;
  const double timeout_s = env_->options->node_call_timeout_s;
  auto results = FanOut<NodeCommitResult>(
      env_->calls, locations.size(),
      [rpc, locations, commits, timeout_s](size_t n) {
        return rpc->Commit(locations[n], (*commits)[n], timeout_s);
      },
      After(timeout_s + 1));
  int64_t bytes = 0;
  for (size_t n = 0; n < locations.size(); ++n) {
    if (!results[n]) return NoAnswer(locations[n], "node.commit");
    ARROW_RETURN_NOT_OK(results[n]->status());
    bytes += (**results[n]).bytes;
  }
  entry->nbytes = bytes;
  return arrow::Status::OK();
}

void LoadRun::Publish() {
  DatasetEntry& copy = *entry;
  // The slice map: neighbouring tasks held by the same nodes merge.
  for (size_t t = 0; t < plan.tasks.size(); ++t) {
    if (task_rows[t] == 0) continue;
    std::vector<std::string> holders;
    for (int32_t n : placement.task_nodes[t]) holders.push_back(nodes[n]);
    uint64_t stop = starts[t] + static_cast<uint64_t>(task_rows[t]);
    if (!copy.slices.empty() && copy.slices.back().nodes == holders &&
        copy.slices.back().stop == starts[t]) {
      copy.slices.back().stop = stop;
    } else {
      copy.slices.push_back({starts[t], stop, std::move(holders)});
    }
  }
  copy.nodes = nodes;
  copy.state = CopyState::kReady;
  // What a heal needs to reload exactly the rows a node loses (heal_runner.cc).
  copy.task_starts = starts;
  copy.task_rows = task_rows;
  copy.plan = std::make_shared<const iceberg::ScanPlan>(plan);
  copy.placed_at = Clock::now();
  env_->catalog->Put(entry);
  if (previous && previous->generation != copy.generation &&
      !env_->catalog->StorageShared(copy.name, previous->storage_name, previous->generation)) {
    if (env_->options->retain_s > 0 && previous->state != CopyState::kFailed &&
        previous->num_rows > 0) {
      // Consumers mid-epoch on it finish there (ReleaseRetired frees it).
      env_->catalog->Retire(previous, copy.generation, Clock::now());
    } else {
      EvictOnNodes(env_->rpc, env_->calls, env_->options->evict_timeout_s, previous->storage_name,
                   previous->generation, previous->nodes);
    }
  }
  env_->registry->PollAll();  // memory figures reflect the load at once
  if (env_->after_publish) env_->after_publish();
  LogInfo("load finished", {{"dataset", copy.name},
                            {"rows", std::to_string(copy.num_rows)},
                            {"bytes", FormatBytes(copy.nbytes)},
                            {"seconds", std::to_string(copy.load_seconds)}});
}

arrow::Status LoadRun::PlaceRefresh(RefreshDiff* diff, const std::vector<int64_t>& task_bytes,
                                    const std::vector<PlacementNode>& live) {
  const size_t num_tasks = plan.tasks.size();
  std::map<std::string, int32_t> index;
  for (size_t n = 0; n < nodes.size(); ++n) index[nodes[n]] = static_cast<int32_t>(n);
  placement.task_nodes.assign(num_tasks, {});
  placement.node_bytes.assign(live.size(), 0);
  std::vector<size_t> read;
  std::vector<int64_t> read_bytes;
  for (size_t t = 0; t < num_tasks; ++t) {
    std::vector<int32_t> holders;
    for (const auto& h : diff->holders[t]) {
      auto it = index.find(h);
      if (it != index.end()) holders.push_back(it->second);
    }
    if (diff->reuse[t] >= 0 && holders.size() != diff->holders[t].size()) {
      // A holder left the registry since the diff: read the task instead.
      diff->rows_reused -= base->task_rows[diff->reuse[t]];
      diff->reuse[t] = -1;
      --diff->tasks_reused;
      ++diff->tasks_read;
    }
    if (diff->reuse[t] >= 0) {
      placement.task_nodes[t] = std::move(holders);
    } else {
      read.push_back(t);
      read_bytes.push_back(task_bytes[t]);
    }
  }
  reuse = diff->reuse;
  if (read.empty()) return arrow::Status::OK();
  auto placed = PlaceTasks(read_bytes, live, entry->request.replication);
  if (!placed.ok()) {
    return placed.status().WithMessage(
        "refresh of '", entry->name,
        "': the changed files do not fit: ", placed.status().message());
  }
  for (size_t i = 0; i < read.size(); ++i) {
    placement.task_nodes[read[i]] = std::move(placed->task_nodes[i]);
  }
  placement.node_bytes = std::move(placed->node_bytes);
  return arrow::Status::OK();
}

arrow::Status LoadRun::Repair() {
  int64_t placed = 0;
  for (const auto& tasks : node_tasks) placed += static_cast<int64_t>(tasks.size());
  job_->SetTotals(placed, 0);
  job_->SetPhase(LoadJob::Phase::kLoading);
  ARROW_RETURN_NOT_OK(StartOnNodes());
  ARROW_RETURN_NOT_OK(WaitForNodes());
  // The same snapshot's tasks must give the same rows as when loaded.
  const DatasetEntry& copy = *entry;
  for (size_t n = 0; n < nodes.size(); ++n) {
    const auto& rows = staged[n].task_rows;
    if (rows.size() != node_tasks[n].size()) {
      return arrow::Status::IOError("node ", nodes[n], " reported ", rows.size(),
                                    " task row counts for ", node_tasks[n].size(), " tasks");
    }
    for (size_t i = 0; i < rows.size(); ++i) {
      const int64_t t = node_tasks[n][i];
      if (rows[i] != copy.task_rows[t]) {
        return arrow::Status::IOError("task ", t, " (", plan.tasks[t].data_file.file_path,
                                      ") now has ", rows[i], " rows, not ", copy.task_rows[t],
                                      ": the table's files changed; evict and load");
      }
    }
  }
  ARROW_RETURN_NOT_OK(job_->cancelled());
  job_->SetPhase(LoadJob::Phase::kCommitting);
  starts = copy.task_starts;
  return CommitOnNodes();
}

}  // namespace icefloe
