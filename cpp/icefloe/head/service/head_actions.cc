#include "icefloe/head/service/head_actions.h"

#include <algorithm>
#include <map>

#include <arrow/flight/types.h>

#include "icefloe/common/log.h"
#include "icefloe/common/security.h"
#include "icefloe/common/wire_status.h"
#include "icefloe/head/service/load_progress_stream.h"

namespace icefloe {

namespace flight = arrow::flight;
using json = nlohmann::json;

namespace {

// Per slice of `out` and node holding it, the rows that node's last status
// puts on its disk tier (ReplySlice::disk_rows).
void AddDiskRows(const DatasetEntry& entry, const std::vector<NodeInfo>& nodes,
                 DatasetDescription* out) {
  if (!out->slices) return;
  std::map<std::string, const std::vector<RowRange>*> on_disk;
  for (const NodeInfo& n : nodes) {
    for (const auto& d : n.status.datasets) {
      if (d.name == entry.storage_name && d.generation == entry.generation) {
        on_disk[n.location] = &d.disk_ranges;
      }
    }
  }
  for (ReplySlice& slice : *out->slices) {
    std::vector<uint64_t> rows;
    for (const std::string& node : slice.nodes) {
      uint64_t n = 0;
      if (auto it = on_disk.find(node); it != on_disk.end()) {
        for (const RowRange& r : *it->second) {
          const uint64_t a = std::max(r.start, slice.start), b = std::min(r.stop, slice.stop);
          if (a < b) n += b - a;
        }
      }
      rows.push_back(n);
    }
    slice.disk_rows = std::move(rows);
  }
}

std::unique_ptr<flight::ResultStream> JsonResult(const json& j) {
  std::vector<flight::Result> results(1);
  results[0].body = arrow::Buffer::FromString(Dump(j));
  return std::make_unique<flight::SimpleResultStream>(std::move(results));
}

}  // namespace

std::vector<flight::ActionType> HeadActions::Types() {
  return {{"load",
           "Load a dataset: {name, source, snapshot_id?, ref?, as_of_ms?, columns?, "
           "filter?, batch_rows?, replication?}; streams progress, then the description."},
          {"refresh",
           "Load the newest snapshot of a cached dataset's table with its arguments, "
           "reading only what changed: {name}; streams progress, then the description."},
          {"list", "Every dataset (JSON array of descriptions)."},
          {"describe", "One dataset with its slice map: {name}."},
          {"slice_map",
           "Where a dataset's rows live and a read grant for rows tickets (kind 04): "
           "{name, columns?, generation?}."},
          {"evict", "Drop a dataset from the nodes (cancels its load): {name}."},
          {"status", "Nodes, datasets, loads and jobs reading now."},
          {"job.report",
           "A consumer's reading of the last seconds: {job, rank, worker, rows, wait_us, "
           "elapsed_us, ...}; feeds the per-job stall metrics."},
          {"node.register", "Data nodes only (signed): announce a node and its status."}};
}

arrow::Status HeadActions::Run(const flight::ServerCallContext& context,
                               const flight::Action& action,
                               std::unique_ptr<flight::ResultStream>* result) const {
  const std::string body = action.body ? action.body->ToString() : std::string();
  const std::string& type = action.type;
  if (type == "load" || type == "refresh" || type == "list" || type == "describe" ||
      type == "evict" || type == "slice_map") {
    // Not before the catalog is recovered: a name may be adopted in a moment.
    ARROW_RETURN_NOT_OK(parts_.adopter->CheckServing());
  }
  if (type == "load") {
    ARROW_ASSIGN_OR_RAISE(LoadRequest request, LoadRequest::Parse(body));
    ARROW_ASSIGN_OR_RAISE(auto job, parts_.load(request));
    *result = std::make_unique<LoadProgressStream>(std::move(job));
    return arrow::Status::OK();
  }
  if (type == "refresh") {
    ARROW_ASSIGN_OR_RAISE(NameRequest request, NameRequest::Parse(body, type));
    ARROW_ASSIGN_OR_RAISE(auto job, parts_.refresh(request.name));
    *result = std::make_unique<LoadProgressStream>(std::move(job));
    return arrow::Status::OK();
  }
  if (type == "list") {
    json out = json::array();
    for (const auto& e : parts_.catalog->All()) out.push_back(e->ToJson(false));
    *result = JsonResult(out);
    return arrow::Status::OK();
  }
  if (type == "describe") {
    ARROW_ASSIGN_OR_RAISE(NameRequest request, NameRequest::Parse(body, type));
    auto entry = parts_.catalog->Find(request.name);
    if (!entry) return arrow::Status::KeyError("unknown dataset '", request.name, "'");
    if (!entry->plan) {  // adopted after a restart: the file map needs the plan
      auto planned = parts_.coordinator->WithPlan(request.name);
      if (planned.ok()) {
        entry = *planned;
      } else {
        LogWarn("describe without a file map",
                {{"dataset", request.name}, {"error", planned.status().ToString()}});
      }
    }
    DatasetDescription described = entry->Description(true);
    AddDiskRows(*entry, parts_.registry->Snapshot(), &described);
    *result = JsonResult(described.ToJson());
    return arrow::Status::OK();
  }
  if (type == "slice_map") {
    ARROW_ASSIGN_OR_RAISE(SliceMapRequest request, SliceMapRequest::Parse(body));
    parts_.metrics->SliceMapServed();
    ARROW_ASSIGN_OR_RAISE(
        SliceMapReply reply,
        parts_.planner->SliceMap(request.name, request.columns, request.generation));
    *result = JsonResult(reply.ToJson());
    return arrow::Status::OK();
  }
  if (type == "evict") {
    ARROW_ASSIGN_OR_RAISE(NameRequest request, NameRequest::Parse(body, type));
    ARROW_ASSIGN_OR_RAISE(EvictReply reply, parts_.coordinator->Evict(request.name));
    *result = JsonResult(reply.ToJson());
    return arrow::Status::OK();
  }
  if (type == "status") {
    *result = JsonResult(parts_.status());
    return arrow::Status::OK();
  }
  if (type == "job.report") {
    ARROW_RETURN_NOT_OK(ReportJob(body));
    *result = JsonResult(OkReply{}.ToJson());
    return arrow::Status::OK();
  }
  if (type == "node.register") {
    ARROW_RETURN_NOT_OK(Register(context, body));
    *result = JsonResult(OkReply{}.ToJson());
    return arrow::Status::OK();
  }
  return arrow::Status::NotImplemented("unknown action '", type, "'");
}

arrow::Status HeadActions::Register(const flight::ServerCallContext& context,
                                    const std::string& body) const {
  ARROW_RETURN_NOT_OK(
      VerifyActionSignature(parts_.ticket_key, context, "node.register", body, "a data node"));
  // Parsed whole before the registry sees it: a bad status registers nothing.
  ARROW_ASSIGN_OR_RAISE(RegisterRequest request, RegisterRequest::Parse(body));
  parts_.registry->Heartbeat(request.location, request.status);
  return arrow::Status::OK();
}

arrow::Status HeadActions::ReportJob(const std::string& body) const {
  auto report = icefloe::JobReport::Parse(body);
  if (!report.ok()) {
    parts_.metrics->JobReported("invalid");
    return report.status();
  }
  // Over a bound (jobs, consumers) the report is dropped, not refused: the
  // consumer sends fire-and-forget and must never notice.
  const bool accepted = parts_.jobs->Report(*report, std::chrono::steady_clock::now());
  parts_.metrics->JobReported(accepted ? "accepted" : "dropped");
  return arrow::Status::OK();
}

}  // namespace icefloe
