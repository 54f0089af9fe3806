// The node's DoAction: node actions from the head, each a typed message
// (protocol/messages.h), accepted only when authorized.
#include <algorithm>

#include <arrow/flight/types.h>
#include <arrow/util/byte_size.h>

#include "icefloe/common/bytes.h"
#include "icefloe/common/log.h"
#include "icefloe/common/wire_status.h"
#include "icefloe/node/copy/shared_export.h"
#include "icefloe/node/serve/node_server.h"
#include "icefloe/node/tier/tier_file.h"
#include "icefloe/node/tier/tier_sink.h"

namespace icefloe {

namespace flight = arrow::flight;

arrow::Status NodeServer::ListActions(const flight::ServerCallContext&,
                                      std::vector<flight::ActionType>* actions) {
  *actions = {{"node.status", "Head only: this node's memory, datasets and loads."},
              {"node.load", "Head only: start reading scan tasks into staged batches."},
              {"node.load_status", "Head only: a load's state, after a bounded wait."},
              {"node.commit", "Head only: assign global row ids and publish a staged load."},
              {"node.evict", "Head only: drop a dataset or cancel its load."},
              {"node.record", "Head only: keep the head's catalog record of a dataset."}};
  return arrow::Status::OK();
}

arrow::Status NodeServer::DoAction(const flight::ServerCallContext& context,
                                   const flight::Action& action,
                                   std::unique_ptr<flight::ResultStream>* result) {
  return ToWireStatus(RunAction(context, action, result));
}

// A refused node action is logged once per caller and reason (the head
// retries it on every poll): which address was expected, which one called.
arrow::Status NodeServer::Authorize(const flight::ServerCallContext& context,
                                    const std::string& type, const std::string& body) const {
  if (ticket_key_.empty() && !options_.trusted_head_host.empty()) {
    PeerCheck check = CheckPeerIsHost(context.peer(), options_.trusted_head_host);
    if (check.refusal.empty()) return arrow::Status::OK();
    if (refusals_.First(check.seen, check.refusal)) {
      LogWarn("refused the head's node actions", {{"leader", options_.trusted_head_host},
                                                  {"expected", check.expected},
                                                  {"seen", check.seen},
                                                  {"action", type},
                                                  {"reason", check.refusal}});
    }
    return flight::MakeFlightError(flight::FlightStatusCode::Unauthorized,
                                   "action '" + type + "' is " + check.refusal);
  }
  arrow::Status st = VerifyActionSignature(ticket_key_, context, type, body, "the head");
  if (!st.ok()) {
    const std::string seen = PeerAddress(context.peer());
    if (refusals_.First(seen, ticket_key_.empty() ? "no secret" : "bad signature")) {
      LogWarn("refused the head's node actions",
              {{"seen", seen}, {"action", type}, {"reason", st.message()}});
    }
  }
  return st;
}

arrow::Status NodeServer::RunAction(const flight::ServerCallContext& context,
                                    const flight::Action& action,
                                    std::unique_ptr<flight::ResultStream>* result) {
  const std::string body = action.body ? action.body->ToString() : std::string();
  const std::string& type = action.type;
  if (type != "node.status" && type != "node.load" && type != "node.load_status" &&
      type != "node.commit" && type != "node.evict" && type != "node.record") {
    return arrow::Status::NotImplemented("unknown action '", type, "'");
  }
  ARROW_RETURN_NOT_OK(Authorize(context, type, body));
  std::string reply;
  if (type == "node.status") {
    reply = Dump(Status().ToJson());
  } else if (type == "node.load") {
    ARROW_ASSIGN_OR_RAISE(reply, HandleLoad(body));
  } else if (type == "node.load_status") {
    ARROW_ASSIGN_OR_RAISE(reply, HandleLoadStatus(body));
  } else if (type == "node.commit") {
    ARROW_ASSIGN_OR_RAISE(reply, HandleCommit(body));
  } else if (type == "node.evict") {
    ARROW_ASSIGN_OR_RAISE(reply, HandleEvict(body));
  } else {
    ARROW_ASSIGN_OR_RAISE(reply, HandleRecord(body));
  }
  std::vector<flight::Result> results(1);
  results[0].body = arrow::Buffer::FromString(std::move(reply));
  *result = std::make_unique<flight::SimpleResultStream>(std::move(results));
  return arrow::Status::OK();
}

int64_t NodeServer::RowMemory() const {
  const int64_t limit = budget_->limit_bytes();
  if (!TierEnabled()) return limit;  // rows stay in memory, or the load fails
  return std::max<int64_t>(0, limit - limit / 4 - ReadaheadLimit());
}

int64_t NodeServer::TierReserve() const { return budget_->limit_bytes() - RowMemory(); }

LoadPlan NodeServer::PlanLoad(LoadSpill* spill, const TrackingPool* pool) {
  LoadPlan plan;
  if (options_.memory_limit_bytes <= 0) return plan;  // unlimited: nothing to admit
  ReadRoom* room = &spill->room;
  // Reads and rows take what the budget has besides TierReserve (RowMemory);
  // one read alone may take all of it.
  const int64_t reads = RowMemory();
  room->most = budget_->limit_bytes();
  // What the rest of the node holds: the budget's use less this load's pool
  // (the rows it keeps and its reads' buffers).
  auto others = [this, pool] { return budget_->used_bytes() - pool->bytes_allocated(); };
  room->available = [room, others, reads] { return reads - others() - room->kept.load(); };
  plan.room = room;
  // A row group whose chunks take more than an eighth of the reads' room
  // streams them, through buffers that together take at most another.
  plan.io.coalesce_limit_bytes = reads / 8;
  plan.io.stream_budget_bytes = reads / 8;
  if (!TierEnabled()) return plan;
  plan.sink = [this, spill, room, others, reads]() -> std::unique_ptr<TaskSink> {
    // Rows stay in memory while room for two reads at their peak is left.
    auto keep = [room, others, reads](int64_t bytes) {
      if (others() + room->kept.load() + bytes > reads - 2 * room->largest.load()) {
        return false;
      }
      room->kept += bytes;
      return true;
    };
    auto open = [this](const std::shared_ptr<arrow::Schema>& schema) {
      const std::string path = options_.disk_dir + "/" + tier_prefix_ + "-" +
                               std::to_string(tier_files_.fetch_add(1)) + ".arrow";
      return TierFileWriter::Open(path, schema, disk_budget_);
    };
    auto hold = [spill](std::shared_ptr<TierFile> file) {
      MutexLock lock(&spill->mu);
      spill->files.push_back(std::move(file));
    };
    return std::make_unique<TierSink>(keep, open, hold);
  };
  return plan;
}

arrow::Result<LoadedTasks> NodeServer::LoadForManager(const NodeLoadRequest& request,
                                                      LoadProgress* progress) {
  // A refresh's reused tasks take their rows from the copy this node holds;
  // only the others are read.
  std::shared_ptr<const CachedDataset> source;
  if (!request.reuse_dataset.empty()) {
    MutexLock lock(&mu_);
    auto it = datasets_.find(request.reuse_dataset);
    if (it != datasets_.end() && it->second->generation() == request.reuse_generation) {
      source = it->second;
    }
  }
  NodeLoadRequest to_read = request;
  to_read.tasks.clear();
  for (const auto& t : request.tasks) {
    if (!t.reused()) to_read.tasks.push_back(t);
  }
  const size_t reused = request.tasks.size() - to_read.tasks.size();
  if (reused > 0 && source == nullptr) {
    return arrow::Status::Invalid("node.load: reused rows come from dataset '",
                                  request.reuse_dataset, "' generation ", request.reuse_generation,
                                  ", which this node does not hold");
  }
  auto pool = NewPool("dataset '" + request.dataset + "'");
  LoadSpill spill;
  const LoadPlan plan = PlanLoad(&spill, pool.get());
  auto read = LoadTasks(to_read, io_, std::move(pool), options_.load_threads, progress, plan);
  base_pool_->ReleaseUnused();  // decode buffers of the load are garbage now
  if (read.ok()) {
    MutexLock lock(&spill.mu);
    read->held = std::move(spill.files);
  }
  if (!read.ok() || reused == 0) return read;
  if (!read->schema->Equals(*source->schema(), /*check_metadata=*/false)) {
    return arrow::Status::Invalid("node.load: dataset '", request.reuse_dataset, "' has columns ",
                                  source->schema()->ToString(), ", not the load's ",
                                  read->schema->ToString());
  }
  LoadedTasks out;
  out.pool = read->pool;
  out.schema = read->schema;
  out.kept_pools = source->pools();
  out.held = std::move(read->held);
  out.held.insert(out.held.end(), source->held().begin(), source->held().end());
  size_t next_read = 0;
  for (const auto& t : request.tasks) {
    if (!t.reused()) {
      out.batches.push_back(std::move(read->batches[next_read]));
      out.rows.push_back(read->rows[next_read]);
      ++next_read;
      continue;
    }
    const RowRange range{t.reuse_start, t.reuse_start + static_cast<uint64_t>(t.reuse_rows)};
    if (source->CountRows(range) != static_cast<uint64_t>(t.reuse_rows)) {
      return arrow::Status::Invalid("node.load: task ", t.index, " reuses rows [", range.start,
                                    ", ", range.stop, ") of dataset '", request.reuse_dataset,
                                    "', of which this node holds ", source->CountRows(range));
    }
    out.batches.push_back(source->Slice(range));
    out.rows.push_back(t.reuse_rows);
  }
  progress->tasks_total += static_cast<int64_t>(reused);
  progress->tasks_done += static_cast<int64_t>(reused);
  return out;
}

arrow::Result<std::string> NodeServer::HandleLoad(const std::string& body) {
  // Parsed (schema and every task included) before anything is reserved.
  ARROW_ASSIGN_OR_RAISE(NodeLoadRequest request, NodeLoadRequest::Parse(body));
  ARROW_ASSIGN_OR_RAISE(NodeLoadState state, loads_.Start(std::move(request)));
  return Dump(state.ToJson());
}

arrow::Result<std::string> NodeServer::HandleLoadStatus(const std::string& body) {
  ARROW_ASSIGN_OR_RAISE(NodeLoadStatusRequest request, NodeLoadStatusRequest::Parse(body));
  NodeLoadState state =
      loads_.Wait(request.dataset, request.generation, std::chrono::milliseconds(request.wait_ms));
  return Dump(state.ToJson());
}

arrow::Result<std::string> NodeServer::HandleCommit(const std::string& body) {
  ARROW_ASSIGN_OR_RAISE(NodeCommit commit, NodeCommit::Parse(body));
  ARROW_ASSIGN_OR_RAISE(LoadedTasks staged, loads_.TakeStaged(commit.dataset, commit.generation));
  if (commit.task_starts.size() != staged.batches.size()) {
    return arrow::Status::Invalid("node.commit: 'task_starts' has ", commit.task_starts.size(),
                                  " entries for ", staged.batches.size(), " tasks");
  }
  std::vector<std::pair<uint64_t, size_t>> order;
  for (size_t i = 0; i < commit.task_starts.size(); ++i) {
    order.emplace_back(commit.task_starts[i], i);
  }
  std::sort(order.begin(), order.end());
  std::vector<CachedBatch> batches;
  for (const auto& [start, task] : order) {
    uint64_t row = start;
    for (auto& b : staged.batches[task]) {
      uint64_t n = static_cast<uint64_t>(b->num_rows());
      batches.push_back({row, std::move(b)});
      row += n;
    }
  }
  // A heal's rows join the copy of the same generation this node holds
  // (decision 1, docs/protocol.md); otherwise the commit publishes a new copy.
  std::shared_ptr<const CachedDataset> base;
  {
    MutexLock lock(&mu_);
    auto it = datasets_.find(commit.dataset);
    if (it != datasets_.end() && it->second->generation() == commit.generation) base = it->second;
  }
  // Make() and Extend() refuse overlapping or unsorted rows (a wrong task_starts).
  ARROW_ASSIGN_OR_RAISE(
      auto ds,
      base ? CachedDataset::Extend(*base, std::move(batches), staged.pool, std::move(staged.held))
           : CachedDataset::Make(commit.dataset, commit.generation, staged.schema,
                                 std::move(batches), staged.pool, std::move(staged.kept_pools),
                                 std::move(staged.held)));
  if (options_.share_memory) {
    // The copy as views of a sealed memory file for same-host readers; on
    // failure (memory, dictionaries the IPC file format cannot hold) a
    // private copy is published and every reader streams it. Its batches on
    // the disk tier stay there: readers map their tier files.
    // Segments of the copies shared now (a refresh's source, a heal's base)
    // that runs of its batches still view are the new copy's too.
    std::vector<std::shared_ptr<const SharedExport>> reusable;
    {
      MutexLock lock(&mu_);
      for (const auto& [name, held] : datasets_) {
        if (held->shared() != nullptr) reusable.push_back(held->shared());
      }
    }
    std::vector<uint64_t> cuts = commit.task_starts;
    std::sort(cuts.begin(), cuts.end());
    const TierLocator on_tier = LocateOnTier(*ds);  // `ds` lives through ExportShared
    Shared shared = ExportShared(std::move(ds), budget_, reusable, cuts, on_tier);
    reusable.clear();
    ds = std::move(shared.dataset);
    if (!shared.status.ok()) {
      LogWarn("not shared", {{"dataset", commit.dataset}, {"error", shared.status.ToString()}});
    } else {
      const SharedExport& file = *ds->shared();
      LogInfo("shared", {{"dataset", commit.dataset},
                         {"segments", std::to_string(file.segments().size())},
                         {"written", FormatBytes(file.bytes_written())},
                         {"reused", FormatBytes(file.size() - file.bytes_written())}});
    }
  }
  std::shared_ptr<const CachedDataset> published = ds;
  if (base) {
    MutexLock lock(&mu_);
    auto it = datasets_.find(commit.dataset);
    if (it == datasets_.end() || it->second != base) {
      return arrow::Status::Cancelled("node.commit: dataset '", commit.dataset, "' generation ",
                                      commit.generation, " changed during the commit");
    }
    it->second.swap(published);  // `base`'s old snapshot is released outside the lock
  }
  LogInfo("published", {{"dataset", commit.dataset},
                        {"generation", std::to_string(commit.generation)},
                        {"rows", std::to_string(ds->num_rows())},
                        {"bytes", FormatBytes(ds->nbytes())}});
  NodeCommitResult out{ds->num_rows(), ds->nbytes()};
  if (!base) Put(std::move(ds));
  SyncTierManifest(commit.dataset);  // after its files are whole: a restart may adopt them
  return Dump(out.ToJson());
}

arrow::Result<std::string> NodeServer::HandleEvict(const std::string& body) {
  ARROW_ASSIGN_OR_RAISE(NodeEvict evict, NodeEvict::Parse(body));
  std::shared_ptr<const CachedDataset> dropped;
  {
    MutexLock lock(&mu_);
    auto it = datasets_.find(evict.dataset);
    if (it != datasets_.end() && !evict.staged_only &&
        (evict.generation == 0 || it->second->generation() == evict.generation)) {
      dropped = std::move(it->second);
      datasets_.erase(it);
      records_.erase(evict.dataset);
    }
  }
  // A stray copy's generation stays open: the head may heal it onto this
  // node later (LoadManager refuses an extend of an evicted generation).
  const bool load_dropped =
      !evict.stray && loads_.Drop(evict.dataset, evict.generation, evict.staged_only);
  NodeEvictResult out{dropped != nullptr || load_dropped, dropped ? dropped->nbytes() : 0};
  dropped.reset();  // memory returns once in-flight streams finish too
  if (out.evicted) SyncTierManifest(evict.dataset);
  if (out.evicted) {
    LogInfo("evicted", {{"dataset", evict.dataset}, {"bytes", FormatBytes(out.bytes)}});
  }
  return Dump(out.ToJson());
}

arrow::Result<std::string> NodeServer::HandleRecord(const std::string& body) {
  ARROW_ASSIGN_OR_RAISE(NodeRecordRequest request, NodeRecordRequest::Parse(body));
  {
    MutexLock lock(&mu_);
    auto it = datasets_.find(request.dataset);
    if (it == datasets_.end() || it->second->generation() != request.generation) {
      return arrow::Status::KeyError("node.record: this node holds no dataset '", request.dataset,
                                     "' of generation ", request.generation);
    }
    records_[request.dataset] = std::move(request.record);
  }
  SyncTierManifest(request.dataset);  // a restarted node hands the record on
  return Dump(nlohmann::json::object());
}

}  // namespace icefloe
