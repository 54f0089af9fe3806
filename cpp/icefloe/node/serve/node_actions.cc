#include "icefloe/node/serve/node_actions.h"

#include <algorithm>
#include <chrono>

#include <arrow/flight/types.h>
#include <arrow/util/byte_size.h>

#include "icefloe/common/bytes.h"
#include "icefloe/common/log.h"
#include "icefloe/common/security.h"
#include "icefloe/node/copy/shared_export.h"
#include "icefloe/node/tier/tier_file.h"

namespace icefloe {

namespace flight = arrow::flight;

arrow::Result<std::shared_ptr<const CachedDataset>> ShareCopy(
    std::shared_ptr<const CachedDataset> copy, const std::shared_ptr<MemoryBudget>& budget,
    std::vector<std::shared_ptr<const SharedExport>> reusable, const std::vector<uint64_t>& cuts) {
  const std::string name = copy->name();
  const TierLocator on_tier = LocateOnTier(*copy);  // called before ExportShared lets it go
  Shared shared = ExportShared(std::move(copy), budget, reusable, cuts, on_tier);
  reusable.clear();  // the old copies' segments this one does not name may go
  if (shared.dataset == nullptr) return shared.status;
  if (!shared.status.ok()) {
    LogWarn("not shared", {{"dataset", name}, {"error", shared.status.ToString()}});
  } else {
    const SharedExport& file = *shared.dataset->shared();
    LogInfo("shared", {{"dataset", name},
                       {"segments", std::to_string(file.segments().size())},
                       {"written", FormatBytes(file.bytes_written())},
                       {"reused", FormatBytes(file.size() - file.bytes_written())}});
  }
  return std::move(shared.dataset);
}

std::vector<flight::ActionType> NodeActions::Types() {
  return {{"node.status", "Head only: this node's memory, datasets and loads."},
          {"node.load", "Head only: start reading scan tasks into staged batches."},
          {"node.load_status", "Head only: a load's state, after a bounded wait."},
          {"node.commit", "Head only: assign global row ids and publish a staged load."},
          {"node.evict", "Head only: drop a dataset or cancel its load."},
          {"node.record", "Head only: keep the head's catalog record of a dataset."}};
}

// A refused node action is logged once per caller and reason (the head
// retries it on every poll): which address was expected, which one called.
arrow::Status NodeActions::Authorize(const flight::ServerCallContext& context,
                                     const std::string& type, const std::string& body) const {
  if (parts_.ticket_key.empty() && !parts_.trusted_head_host.empty()) {
    PeerCheck check = CheckPeerIsHost(context.peer(), parts_.trusted_head_host);
    if (check.refusal.empty()) return arrow::Status::OK();
    if (refusals_.First(check.seen, check.refusal)) {
      LogWarn("refused the head's node actions", {{"leader", parts_.trusted_head_host},
                                                  {"expected", check.expected},
                                                  {"seen", check.seen},
                                                  {"action", type},
                                                  {"reason", check.refusal}});
    }
    return flight::MakeFlightError(flight::FlightStatusCode::Unauthorized,
                                   "action '" + type + "' is " + check.refusal);
  }
  arrow::Status st = VerifyActionSignature(parts_.ticket_key, context, type, body, "the head");
  if (!st.ok()) {
    const std::string seen = PeerAddress(context.peer());
    if (refusals_.First(seen, parts_.ticket_key.empty() ? "no secret" : "bad signature")) {
      LogWarn("refused the head's node actions",
              {{"seen", seen}, {"action", type}, {"reason", st.message()}});
    }
  }
  return st;
}

arrow::Status NodeActions::Run(const flight::ServerCallContext& context,
                               const flight::Action& action,
                               std::unique_ptr<flight::ResultStream>* result) const {
  const std::string body = action.body ? action.body->ToString() : std::string();
  const std::string& type = action.type;
  if (type != "node.status" && type != "node.load" && type != "node.load_status" &&
      type != "node.commit" && type != "node.evict" && type != "node.record") {
    return arrow::Status::NotImplemented("unknown action '", type, "'");
  }
  ARROW_RETURN_NOT_OK(Authorize(context, type, body));
  std::string reply;
  if (type == "node.status") {
    reply = Dump(parts_.status().ToJson());
  } else if (type == "node.load") {
    ARROW_ASSIGN_OR_RAISE(reply, Load(body));
  } else if (type == "node.load_status") {
    ARROW_ASSIGN_OR_RAISE(reply, LoadStatus(body));
  } else if (type == "node.commit") {
    ARROW_ASSIGN_OR_RAISE(reply, Commit(body));
  } else if (type == "node.evict") {
    ARROW_ASSIGN_OR_RAISE(reply, Evict(body));
  } else {
    ARROW_ASSIGN_OR_RAISE(reply, Record(body));
  }
  std::vector<flight::Result> results(1);
  results[0].body = arrow::Buffer::FromString(std::move(reply));
  *result = std::make_unique<flight::SimpleResultStream>(std::move(results));
  return arrow::Status::OK();
}

arrow::Result<std::string> NodeActions::Load(const std::string& body) const {
  // Parsed (schema and every task included) before anything is reserved.
  ARROW_ASSIGN_OR_RAISE(NodeLoadRequest request, NodeLoadRequest::Parse(body));
  ARROW_ASSIGN_OR_RAISE(NodeLoadState state, parts_.loads->Start(std::move(request)));
  return Dump(state.ToJson());
}

arrow::Result<std::string> NodeActions::LoadStatus(const std::string& body) const {
  ARROW_ASSIGN_OR_RAISE(NodeLoadStatusRequest request, NodeLoadStatusRequest::Parse(body));
  NodeLoadState state = parts_.loads->Wait(request.dataset, request.generation,
                                           std::chrono::milliseconds(request.wait_ms));
  return Dump(state.ToJson());
}

arrow::Result<std::string> NodeActions::Commit(const std::string& body) const {
  ARROW_ASSIGN_OR_RAISE(NodeCommit commit, NodeCommit::Parse(body));
  ARROW_ASSIGN_OR_RAISE(LoadedTasks staged,
                        parts_.loads->TakeStaged(commit.dataset, commit.generation));
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
  std::shared_ptr<const CachedDataset> base = parts_.find(commit.dataset);
  if (base != nullptr && base->generation() != commit.generation) base.reset();
  // Make() and Extend() refuse overlapping or unsorted rows (a wrong task_starts).
  std::shared_ptr<const CachedDataset> ds;
  ARROW_ASSIGN_OR_RAISE(
      ds,
      base ? CachedDataset::Extend(*base, std::move(batches), staged.pool, std::move(staged.held))
           : CachedDataset::Make(commit.dataset, commit.generation, staged.schema,
                                 std::move(batches), staged.pool, std::move(staged.kept_pools),
                                 std::move(staged.held)));
  if (parts_.share_memory) {
    // Segments of the copies shared now (a refresh's source, a heal's base)
    // that runs of its batches still view are the new copy's too.
    std::vector<uint64_t> cuts = commit.task_starts;
    std::sort(cuts.begin(), cuts.end());
    ARROW_ASSIGN_OR_RAISE(ds,
                          ShareCopy(std::move(ds), parts_.budget, parts_.shared_exports(), cuts));
  }
  if (base && !parts_.replace(base, ds)) {
    return arrow::Status::Cancelled("node.commit: dataset '", commit.dataset, "' generation ",
                                    commit.generation, " changed during the commit");
  }
  LogInfo("published", {{"dataset", commit.dataset},
                        {"generation", std::to_string(commit.generation)},
                        {"rows", std::to_string(ds->num_rows())},
                        {"bytes", FormatBytes(ds->nbytes())}});
  NodeCommitResult out{ds->num_rows(), ds->nbytes()};
  if (!base) parts_.put(std::move(ds));
  parts_.sync_tier_manifest(commit.dataset);  // after its files are whole: a restart may adopt them
  return Dump(out.ToJson());
}

arrow::Result<std::string> NodeActions::Evict(const std::string& body) const {
  ARROW_ASSIGN_OR_RAISE(NodeEvict evict, NodeEvict::Parse(body));
  std::shared_ptr<const CachedDataset> dropped;
  if (!evict.staged_only) dropped = parts_.drop(evict.dataset, evict.generation);
  // A stray copy's generation stays open: the head may heal it onto this
  // node later (LoadManager refuses an extend of an evicted generation).
  const bool load_dropped =
      !evict.stray && parts_.loads->Drop(evict.dataset, evict.generation, evict.staged_only);
  NodeEvictResult out{dropped != nullptr || load_dropped, dropped ? dropped->nbytes() : 0};
  dropped.reset();  // memory returns once in-flight streams finish too
  if (out.evicted) parts_.sync_tier_manifest(evict.dataset);
  if (out.evicted) {
    LogInfo("evicted", {{"dataset", evict.dataset}, {"bytes", FormatBytes(out.bytes)}});
  }
  return Dump(out.ToJson());
}

arrow::Result<std::string> NodeActions::Record(const std::string& body) const {
  ARROW_ASSIGN_OR_RAISE(NodeRecordRequest request, NodeRecordRequest::Parse(body));
  if (!parts_.keep_record(request.dataset, request.generation, std::move(request.record))) {
    return arrow::Status::KeyError("node.record: this node holds no dataset '", request.dataset,
                                   "' of generation ", request.generation);
  }
  parts_.sync_tier_manifest(request.dataset);  // a restarted node hands the record on
  return Dump(nlohmann::json::object());
}

}  // namespace icefloe
