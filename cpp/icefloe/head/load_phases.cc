// The node side of one load: start everywhere, follow until staged, commit,
// publish. Every fan-out runs on the shared node-call pool, bounded by its
// timeout; the load thread waits for each round.
#include <set>

#include <arrow/flight/types.h>

#include "icefloe/common/bytes.h"
#include "icefloe/common/log.h"
#include "icefloe/common/wire_status.h"
#include "icefloe/head/load_run_internal.h"
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

arrow::Status LoadCoordinator::LoadOnNodes(Run* run) {
  const size_t num_nodes = run->nodes.size();
  run->node_tasks.assign(num_nodes, {});
  for (size_t t = 0; t < run->plan.tasks.size(); ++t) {
    for (int32_t n : run->placement.task_nodes[t]) {
      run->node_tasks[n].push_back(static_cast<int64_t>(t));
    }
  }
  int64_t placed = 0;
  for (const auto& tasks : run->node_tasks) placed += static_cast<int64_t>(tasks.size());
  run->job->SetTotals(placed, run->entry->estimated_bytes);
  run->job->SetPhase(LoadJob::Phase::kLoading);
  ARROW_RETURN_NOT_OK(StartOnNodes(run));
  ARROW_RETURN_NOT_OK(WaitForNodes(run));

  // Exact rows per task; replicas must agree.
  run->task_rows.assign(run->plan.tasks.size(), -1);
  for (size_t n = 0; n < num_nodes; ++n) {
    const NodeLoadState& s = run->staged[n];
    if (s.task_rows.size() != run->node_tasks[n].size()) {
      return arrow::Status::IOError("node ", run->nodes[n], " reported ", s.task_rows.size(),
                                    " task row counts for ", run->node_tasks[n].size(), " tasks");
    }
    for (size_t i = 0; i < s.task_rows.size(); ++i) {
      int64_t& slot = run->task_rows[run->node_tasks[n][i]];
      if (slot >= 0 && slot != s.task_rows[i]) {
        return arrow::Status::IOError("replicas disagree on task ", run->node_tasks[n][i], ": ",
                                      slot, " vs ", s.task_rows[i], " rows");
      }
      slot = s.task_rows[i];
    }
    // Replicas read the same files: count each file once.
    const int64_t r = run->entry->request.replication;
    run->entry->scan.row_groups_total += s.row_groups_total / r;
    run->entry->scan.row_groups_read += s.row_groups_read / r;
  }
  for (size_t t = 0; t < run->task_rows.size(); ++t) {
    if (run->task_rows[t] >= 0) continue;
    // A reused task of no rows is placed on no node.
    if (t < run->reuse.size() && run->reuse[t] >= 0) {
      run->task_rows[t] = 0;
      continue;
    }
    return arrow::Status::IOError("no node reported rows for task ", t);
  }
  // Global row ids: tasks in plan order, each a contiguous run.
  run->starts.assign(run->plan.tasks.size(), 0);
  uint64_t row = 0;
  for (size_t t = 0; t < run->plan.tasks.size(); ++t) {
    run->starts[t] = row;
    row += static_cast<uint64_t>(run->task_rows[t]);  // each <= 2^62 (checked on parse)
    if (row > kMaxRows) {
      return arrow::Status::Invalid("the dataset has more than ", kMaxRows, " rows");
    }
  }
  run->entry->num_rows = static_cast<int64_t>(row);
  ARROW_RETURN_NOT_OK(run->job->cancelled());
  run->job->SetPhase(LoadJob::Phase::kCommitting);
  return CommitOnNodes(run);
}

arrow::Status LoadCoordinator::StartOnNodes(Run* run) {
  const auto& plan = run->plan;
  const auto& entry = *run->entry;
  auto requests = std::make_shared<std::vector<NodeLoadRequest>>(run->nodes.size());
  for (size_t n = 0; n < run->nodes.size(); ++n) {
    NodeLoadRequest& req = (*requests)[n];
    req.dataset = entry.storage_name;
    req.generation = entry.generation;
    req.schema = iceberg::SchemaToJson(plan.schema);
    req.projection = plan.projection;
    req.name_mapping = plan.name_mapping;
    req.filter = plan.filter;
    req.batch_rows = entry.request.batch_rows;
    req.extend = run->extend;
    req.transform = entry.request.transform;
    req.model_sha256 = entry.model_sha256;
    for (int64_t t : run->node_tasks[n]) {
      TaskSpec spec{t, plan.tasks[t]};
      const int64_t old = t < static_cast<int64_t>(run->reuse.size()) ? run->reuse[t] : -1;
      if (old >= 0) {  // a refresh: take the rows from the copy this node holds
        spec.reuse_start = run->base->task_starts[old];
        spec.reuse_rows = run->base->task_rows[old];
        req.reuse_dataset = run->base->storage_name;
        req.reuse_generation = run->base->generation;
      }
      req.tasks.push_back(std::move(spec));
    }
  }
  NodeRpc* rpc = rpc_;
  const auto nodes = run->nodes;
  const double timeout_s = options_.node_call_timeout_s;
  auto results = FanOut<NodeLoadState>(
      calls_, nodes.size(),
      [rpc, nodes, requests, timeout_s](size_t n) {
        return rpc->StartLoad(nodes[n], (*requests)[n], timeout_s);
      },
      After(timeout_s + 1));
  for (size_t n = 0; n < nodes.size(); ++n) {
    arrow::Status st = !results[n]         ? NoAnswer(nodes[n], "node.load")
                       : !results[n]->ok() ? results[n]->status()
                                           : arrow::Status::OK();
    if (st.ok() && (**results[n]).state == "failed") {
      st = (**results[n]).ErrorStatus("node " + nodes[n] + ": ");
    }
    if (!st.ok()) {
      if (IsPeerUnavailable(st)) registry_->MarkDead(nodes[n], st);
      return st;
    }
  }
  return arrow::Status::OK();
}

arrow::Status LoadCoordinator::WaitForNodes(Run* run) {
  const auto& entry = *run->entry;
  const auto deadline = After(options_.load_timeout_s);
  const uint64_t wait_ms = static_cast<uint64_t>(options_.poll_wait_s * 1000);
  run->staged.assign(run->nodes.size(), NodeLoadState{});
  std::vector<size_t> pending(run->nodes.size());
  for (size_t n = 0; n < pending.size(); ++n) pending[n] = n;
  std::vector<int64_t> done(run->nodes.size(), 0);
  NodeRpc* rpc = rpc_;
  while (!pending.empty()) {
    ARROW_RETURN_NOT_OK(run->job->cancelled());
    if (Clock::now() > deadline) {
      return arrow::Status::IOError("nodes did not finish loading within ", options_.load_timeout_s,
                                    "s");
    }
    const auto round_start = Clock::now();
    // Staged nodes are asked again too: each node.load_status renews the
    // staged load's lease there (node/load_manager.h).
    std::vector<size_t> polled = pending;
    for (size_t n = 0; n < run->nodes.size(); ++n) {
      if (run->staged[n].state == "staged") polled.push_back(n);
    }
    std::vector<std::string> nodes;
    for (size_t n : polled) nodes.push_back(run->nodes[n]);
    NodeLoadStatusRequest req{entry.storage_name, entry.generation, wait_ms};
    const double timeout_s = options_.node_call_timeout_s + options_.poll_wait_s;
    auto results = FanOut<NodeLoadState>(
        calls_, nodes.size(),
        [rpc, nodes, req, timeout_s](size_t i) {
          return rpc->LoadStatus(nodes[i], req, timeout_s);
        },
        After(timeout_s + 1));
    std::vector<size_t> still;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const size_t n = polled[i];
      if (!results[i]) return NoAnswer(nodes[i], "node.load_status");
      if (!results[i]->ok()) {
        if (IsPeerUnavailable(results[i]->status())) {
          registry_->MarkDead(nodes[i], results[i]->status());
        }
        return results[i]->status();
      }
      const NodeLoadState& s = **results[i];
      if (s.state == "failed") return s.ErrorStatus("node " + nodes[i] + ": ");
      if (s.state == "absent") {
        return arrow::Status::IOError("node ", nodes[i], " no longer has this load (restarted?)");
      }
      done[n] = std::min<int64_t>(s.tasks_done, static_cast<int64_t>(run->node_tasks[n].size()));
      if (s.state == "staged") {
        run->staged[n] = s;
        done[n] = static_cast<int64_t>(run->node_tasks[n].size());
      } else {
        still.push_back(n);
      }
    }
    int64_t total_done = 0;
    for (int64_t d : done) total_done += d;
    run->job->SetTasksDone(total_done);
    pending = std::move(still);
    // Nodes answer at once when their state changes; do not spin on one that
    // answers early without news.
    const auto min_round = std::chrono::milliseconds(20);
    if (!pending.empty() && Clock::now() - round_start < min_round) {
      run->job->WaitCancelled(min_round);
    }
  }
  return arrow::Status::OK();
}

arrow::Status LoadCoordinator::CommitOnNodes(Run* run) {
  const auto& entry = *run->entry;
  auto commits = std::make_shared<std::vector<NodeCommit>>(run->nodes.size());
  for (size_t n = 0; n < run->nodes.size(); ++n) {
    NodeCommit& c = (*commits)[n];
    c.dataset = entry.storage_name;
    c.generation = entry.generation;
    for (int64_t t : run->node_tasks[n]) c.task_starts.push_back(run->starts[t]);
  }
  NodeRpc* rpc = rpc_;
  const auto nodes = run->nodes;
  const double timeout_s = options_.node_call_timeout_s;
  auto results = FanOut<NodeCommitResult>(
      calls_, nodes.size(),
      [rpc, nodes, commits, timeout_s](size_t n) {
        return rpc->Commit(nodes[n], (*commits)[n], timeout_s);
      },
      After(timeout_s + 1));
  int64_t bytes = 0;
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (!results[n]) return NoAnswer(nodes[n], "node.commit");
    ARROW_RETURN_NOT_OK(results[n]->status());
    bytes += (**results[n]).bytes;
  }
  run->entry->nbytes = bytes;
  return arrow::Status::OK();
}

void LoadCoordinator::Publish(Run* run) {
  auto& entry = *run->entry;
  // The slice map: neighbouring tasks held by the same nodes merge.
  for (size_t t = 0; t < run->plan.tasks.size(); ++t) {
    if (run->task_rows[t] == 0) continue;
    std::vector<std::string> holders;
    for (int32_t n : run->placement.task_nodes[t]) holders.push_back(run->nodes[n]);
    uint64_t stop = run->starts[t] + static_cast<uint64_t>(run->task_rows[t]);
    if (!entry.slices.empty() && entry.slices.back().nodes == holders &&
        entry.slices.back().stop == run->starts[t]) {
      entry.slices.back().stop = stop;
    } else {
      entry.slices.push_back({run->starts[t], stop, std::move(holders)});
    }
  }
  entry.nodes = run->nodes;
  entry.state = "ready";
  // What a heal needs to reload exactly the rows a node loses (heal_run.cc).
  entry.task_starts = run->starts;
  entry.task_rows = run->task_rows;
  entry.plan = std::make_shared<const iceberg::ScanPlan>(run->plan);
  entry.placed_at = Clock::now();
  catalog_->Put(run->entry);
  const auto& previous = run->previous;
  if (previous && previous->generation != entry.generation &&
      !catalog_->StorageShared(entry.name, previous->storage_name, previous->generation)) {
    if (options_.retain_s > 0 && previous->state != "failed" && previous->num_rows > 0) {
      // Consumers mid-epoch on it finish there (ReleaseRetired frees it).
      catalog_->Retire(previous, entry.generation, Clock::now());
    } else {
      EvictOnNodes(previous->storage_name, previous->generation, previous->nodes);
    }
  }
  registry_->PollAll();  // memory figures reflect the load at once
  AfterPublish();
  LogInfo("load finished", {{"dataset", entry.name},
                            {"rows", std::to_string(entry.num_rows)},
                            {"bytes", FormatBytes(entry.nbytes)},
                            {"seconds", std::to_string(entry.load_seconds)}});
}

std::vector<std::string> LoadCoordinator::EvictOnNodes(const std::string& storage,
                                                       uint64_t generation,
                                                       const std::vector<std::string>& nodes,
                                                       NodeEvict how) {
  std::set<std::string> unique(nodes.begin(), nodes.end());
  const std::vector<std::string> targets(unique.begin(), unique.end());
  NodeRpc* rpc = rpc_;
  NodeEvict req = std::move(how);
  req.dataset = storage;
  req.generation = generation;
  const double timeout_s = options_.evict_timeout_s;
  auto results = FanOut<NodeEvictResult>(
      calls_, targets.size(),
      [rpc, targets, req, timeout_s](size_t i) { return rpc->Evict(targets[i], req, timeout_s); },
      After(timeout_s));
  std::vector<std::string> unreached;
  for (size_t i = 0; i < targets.size(); ++i) {
    if (results[i] && results[i]->ok()) continue;
    const std::string error =
        results[i] ? results[i]->status().ToString() : "no answer within the evict timeout";
    LogWarn("evict failed", {{"node", targets[i]}, {"dataset", storage}, {"error", error}});
    unreached.push_back(targets[i]);
  }
  return unreached;
}

}  // namespace icefloe
