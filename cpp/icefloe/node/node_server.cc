#include "icefloe/node/node_server.h"

#include <algorithm>

#include <arrow/flight/types.h>
#include <arrow/record_batch.h>

#include "icefloe/common/bytes.h"
#include "icefloe/common/log.h"
#include "icefloe/common/ticket.h"
#include "icefloe/common/wire_status.h"
#include "icefloe/node/piece_stream.h"
#include "icefloe/protocol/messages.h"

namespace icefloe {

namespace flight = arrow::flight;
using json = nlohmann::json;

namespace {

// Streams batches of one dataset snapshot; holding the snapshot keeps its
// memory pool (and so every buffer) alive until the stream ends.
class SnapshotReader : public arrow::RecordBatchReader {
 public:
  SnapshotReader(std::shared_ptr<const CachedDataset> dataset,
                 std::vector<std::shared_ptr<arrow::RecordBatch>> batches)
      : dataset_(std::move(dataset)), batches_(std::move(batches)) {}

  std::shared_ptr<arrow::Schema> schema() const override { return dataset_->schema(); }
  arrow::Status ReadNext(std::shared_ptr<arrow::RecordBatch>* batch) override {
    if (next_ >= batches_.size()) {
      batch->reset();
      return arrow::Status::OK();
    }
    *batch = std::move(batches_[next_++]);
    return arrow::Status::OK();
  }

 private:
  std::shared_ptr<const CachedDataset> dataset_;
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches_;
  size_t next_ = 0;
};

// Cached data lives for hours while loads churn through decode buffers:
// jemalloc hands those back to the OS (RSS stays near the Arrow bytes held),
// where the default allocator keeps them.
arrow::MemoryPool* BasePool() {
  arrow::MemoryPool* pool = nullptr;
  if (arrow::jemalloc_memory_pool(&pool).ok() && pool != nullptr) return pool;
  return arrow::default_memory_pool();
}

std::unique_ptr<flight::ResultStream> JsonResult(const json& j) {
  std::vector<flight::Result> results(1);
  results[0].body = arrow::Buffer::FromString(j.dump());
  return std::make_unique<flight::SimpleResultStream>(std::move(results));
}

}  // namespace

NodeServer::NodeServer(NodeOptions options)
    : options_(std::move(options)),
      ticket_key_(options_.security.TicketKey()),
      budget_(std::make_shared<MemoryBudget>(options_.memory_limit_bytes)),
      base_pool_(BasePool()),
      io_(options_.io) {}

void NodeServer::set_advertised_location(std::string location) {
  options_.advertised_location = std::move(location);
}

void NodeServer::Put(std::shared_ptr<const CachedDataset> dataset) {
  std::lock_guard<std::mutex> lock(mu_);
  datasets_[dataset->name()] = std::move(dataset);
}

arrow::Result<std::shared_ptr<const CachedDataset>> NodeServer::Get(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = datasets_.find(name);
  if (it == datasets_.end()) {
    return arrow::Status::KeyError("dataset '", name, "' is not cached on this node");
  }
  return it->second;
}

std::shared_ptr<TrackingPool> NodeServer::NewPool(const std::string& label) {
  return std::make_shared<TrackingPool>(budget_, label, base_pool_);
}

json NodeServer::Status() const {
  std::lock_guard<std::mutex> lock(mu_);
  json datasets = json::array();
  for (const auto& [name, ds] : datasets_) {
    json ranges = json::array();
    for (const auto& b : ds->batches()) {
      if (!ranges.empty() && ranges.back()[1].get<uint64_t>() == b.global_start) {
        ranges.back()[1] = b.global_stop();
      } else {
        ranges.push_back({b.global_start, b.global_stop()});
      }
    }
    datasets.push_back({{"name", name},
                        {"generation", ds->generation()},
                        {"rows", ds->num_rows()},
                        {"bytes", ds->nbytes()},
                        {"ranges", ranges}});
  }
  json loads = json::array();
  for (const auto& [name, p] : loading_) {
    loads.push_back({{"dataset", name},
                     {"tasks_total", p->tasks_total.load()},
                     {"tasks_done", p->tasks_done.load()},
                     {"rows", p->rows.load()}});
  }
  return {{"location", options_.advertised_location},
          {"memory_limit_bytes", budget_->limit_bytes()},
          {"memory_used_bytes", budget_->used_bytes()},
          {"datasets", datasets},
          {"loads", loads},
          {"staged", staged_.size()}};
}

std::pair<bool, std::string> NodeServer::Ready() const {
  if (options_.default_dataset.empty()) return {true, "ready"};
  std::lock_guard<std::mutex> lock(mu_);
  if (datasets_.count(options_.default_dataset)) return {true, "ready"};
  if (loading_.count(options_.default_dataset)) {
    return {false, "loading " + options_.default_dataset};
  }
  return {false, "waiting for the head to assign " + options_.default_dataset};
}

bool NodeServer::Idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return loading_.empty() && staged_.empty();
}

arrow::Status NodeServer::ListFlights(const flight::ServerCallContext&, const flight::Criteria*,
                                      std::unique_ptr<flight::FlightListing>* listings) {
  std::vector<std::shared_ptr<const CachedDataset>> snapshot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, ds] : datasets_) snapshot.push_back(ds);
  }
  ARROW_ASSIGN_OR_RAISE(auto location, flight::Location::Parse(options_.advertised_location));
  std::vector<flight::FlightInfo> infos;
  for (const auto& ds : snapshot) {
    uint64_t first = ds->batches().empty() ? 0 : ds->batches().front().global_start;
    uint64_t last = ds->batches().empty() ? 0 : ds->batches().back().global_stop();
    flight::FlightEndpoint endpoint;
    endpoint.ticket.ticket = EncodeNativeTicket({TicketKind::kRange, ds->name(), ds->generation()},
                                                EncodeRangeBody({first, last}), ticket_key_);
    endpoint.locations.push_back(location);
    ARROW_ASSIGN_OR_RAISE(
        auto info,
        flight::FlightInfo::Make(*ds->schema(), flight::FlightDescriptor::Path({ds->name()}),
                                 {endpoint}, ds->num_rows(), ds->nbytes()));
    infos.push_back(std::move(info));
  }
  *listings = std::make_unique<flight::SimpleFlightListing>(std::move(infos));
  return arrow::Status::OK();
}

arrow::Status NodeServer::DoGet(const flight::ServerCallContext& context,
                                const flight::Ticket& request,
                                std::unique_ptr<flight::FlightDataStream>* stream) {
  return ToWireStatus(ServeTicket(request, stream));
}

arrow::Status NodeServer::ServeTicket(const flight::Ticket& request,
                                      std::unique_ptr<flight::FlightDataStream>* stream) {
  if (!IsNativeTicket(request.ticket)) {
    // Kubeflow's ticket: inclusive global rows [start, end] of the default
    // dataset; this node streams the rows of that range it holds.
    ARROW_ASSIGN_OR_RAISE(KubeflowTicket kf, DecodeKubeflowTicket(request.ticket));
    if (options_.default_dataset.empty()) {
      return arrow::Status::Invalid(
          "Kubeflow-format ticket, but this node has no default dataset (--default-dataset)");
    }
    ARROW_ASSIGN_OR_RAISE(auto dataset, Get(options_.default_dataset));
    RowRange range{kf.start, kf.end < kf.start ? kf.start : kf.end + 1};
    if (kf.end == UINT64_MAX) range.stop = UINT64_MAX;
    *stream = std::make_unique<flight::RecordBatchStream>(
        std::make_shared<SnapshotReader>(dataset, dataset->Slice(range)));
    return arrow::Status::OK();
  }
  ARROW_ASSIGN_OR_RAISE(NativeTicket ticket, DecodeNativeTicket(request.ticket, ticket_key_));
  ARROW_ASSIGN_OR_RAISE(auto dataset, Get(ticket.header.dataset));
  if (dataset->generation() != ticket.header.generation) {
    return arrow::Status::Invalid("stale ticket: dataset '", dataset->name(), "' generation ",
                                  ticket.header.generation, " was replaced by generation ",
                                  dataset->generation(), "; ask the head for new endpoints");
  }
  if (ticket.header.kind == TicketKind::kPlan) {
    ARROW_ASSIGN_OR_RAISE(PlanTicket plan, DecodePlanBody(ticket.body));
    ARROW_ASSIGN_OR_RAISE(*stream, MakePlanStream(std::move(dataset), std::move(plan)));
    return arrow::Status::OK();
  }
  if (ticket.header.kind == TicketKind::kRows) {
    ARROW_ASSIGN_OR_RAISE(RowsTicket rows, DecodeRowsBody(ticket.body));
    ARROW_ASSIGN_OR_RAISE(*stream, MakeRowsStream(std::move(dataset), std::move(rows)));
    return arrow::Status::OK();
  }
  ARROW_ASSIGN_OR_RAISE(RowRange range, DecodeRangeBody(ticket.body));
  auto batches = dataset->Slice(range);
  auto reader = std::make_shared<SnapshotReader>(dataset, std::move(batches));
  *stream = std::make_unique<flight::RecordBatchStream>(std::move(reader));
  return arrow::Status::OK();
}

arrow::Status NodeServer::ListActions(const flight::ServerCallContext&,
                                      std::vector<flight::ActionType>* actions) {
  *actions = {{"node.status", "This node's memory, datasets and loads (JSON)."},
              {"node.load", "Head only: read scan tasks into staged batches."},
              {"node.commit", "Head only: assign global row ids and publish a staged load."},
              {"node.evict", "Head only: drop a dataset."}};
  return arrow::Status::OK();
}

arrow::Status NodeServer::DoAction(const flight::ServerCallContext& context,
                                   const flight::Action& action,
                                   std::unique_ptr<flight::ResultStream>* result) {
  return ToWireStatus(RunAction(context, action, result));
}

arrow::Status NodeServer::RunAction(const flight::ServerCallContext& context,
                                    const flight::Action& action,
                                    std::unique_ptr<flight::ResultStream>* result) {
  std::string body = action.body ? action.body->ToString() : std::string();
  if (action.type == "node.status") {
    *result = JsonResult(Status());
    return arrow::Status::OK();
  }
  arrow::Result<json> out;
  if (action.type == "node.load" || action.type == "node.commit" || action.type == "node.evict") {
    ARROW_RETURN_NOT_OK(VerifyActionSignature(ticket_key_, context, action.type, body));
    if (action.type == "node.load") {
      out = HandleLoad(body);
    } else if (action.type == "node.commit") {
      out = HandleCommit(body);
    } else {
      out = HandleEvict(body);
    }
  } else {
    return arrow::Status::NotImplemented("unknown action '", action.type, "'");
  }
  ARROW_RETURN_NOT_OK(out.status());
  *result = JsonResult(*out);
  return arrow::Status::OK();
}

arrow::Result<json> NodeServer::HandleLoad(const std::string& body) {
  ARROW_ASSIGN_OR_RAISE(json j, ParseBody(body, "node.load"));
  ARROW_ASSIGN_OR_RAISE(NodeLoadRequest request, NodeLoadRequest::FromJson(j));
  auto progress = std::make_shared<LoadProgress>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (loading_.count(request.dataset)) {
      return arrow::Status::Invalid("dataset '", request.dataset, "' is already loading here");
    }
    loading_[request.dataset] = progress;
    staged_.erase(request.dataset);
  }
  LogInfo("loading", {{"dataset", request.dataset},
                      {"generation", std::to_string(request.generation)},
                      {"tasks", std::to_string(request.tasks.size())}});
  auto pool = NewPool("dataset '" + request.dataset + "'");
  auto loaded = LoadTasks(request, io_, pool, options_.load_threads, progress.get());
  std::lock_guard<std::mutex> lock(mu_);
  loading_.erase(request.dataset);
  if (!loaded.ok()) {
    LogWarn("load failed", {{"dataset", request.dataset}, {"error", loaded.status().ToString()}});
    return loaded.status();
  }
  json rows = loaded->rows;
  json stats = {{"row_groups_total", progress->row_groups_total.load()},
                {"row_groups_read", progress->row_groups_read.load()},
                {"bytes_read", progress->bytes_read.load()}};
  int64_t bytes = loaded->bytes();
  staged_[request.dataset] = StagedLoad{request.generation, std::move(*loaded)};
  base_pool_->ReleaseUnused();  // decode buffers of the load are garbage now
  LogInfo("staged", {{"dataset", request.dataset}, {"bytes", FormatBytes(bytes)}});
  return json{{"task_rows", rows}, {"bytes", bytes}, {"stats", stats}};
}

arrow::Result<json> NodeServer::HandleCommit(const std::string& body) {
  ARROW_ASSIGN_OR_RAISE(json j, ParseBody(body, "node.commit"));
  std::string name = j.value("dataset", "");
  uint64_t generation = j.value("generation", uint64_t{0});
  std::vector<uint64_t> starts = j.value("task_starts", std::vector<uint64_t>{});
  StagedLoad staged;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = staged_.find(name);
    if (it == staged_.end() || it->second.generation != generation) {
      return arrow::Status::KeyError("no staged load of dataset '", name, "' generation ",
                                     generation, " on this node");
    }
    staged = std::move(it->second);
    staged_.erase(it);
  }
  if (starts.size() != staged.loaded.batches.size()) {
    return arrow::Status::Invalid("node.commit: ", starts.size(), " task starts for ",
                                  staged.loaded.batches.size(), " tasks");
  }
  std::vector<std::pair<uint64_t, size_t>> order;
  for (size_t i = 0; i < starts.size(); ++i) order.emplace_back(starts[i], i);
  std::sort(order.begin(), order.end());
  std::vector<CachedBatch> batches;
  for (const auto& [start, task] : order) {
    uint64_t row = start;
    for (auto& b : staged.loaded.batches[task]) {
      uint64_t n = static_cast<uint64_t>(b->num_rows());
      batches.push_back({row, std::move(b)});
      row += n;
    }
  }
  ARROW_ASSIGN_OR_RAISE(auto ds, CachedDataset::Make(name, generation, staged.loaded.schema,
                                                     std::move(batches), staged.loaded.pool));
  LogInfo("published", {{"dataset", name},
                        {"generation", std::to_string(generation)},
                        {"rows", std::to_string(ds->num_rows())},
                        {"bytes", FormatBytes(ds->nbytes())}});
  json out = {{"rows", ds->num_rows()}, {"bytes", ds->nbytes()}};
  Put(std::move(ds));
  return out;
}

arrow::Result<json> NodeServer::HandleEvict(const std::string& body) {
  ARROW_ASSIGN_OR_RAISE(json j, ParseBody(body, "node.evict"));
  std::string name = j.value("dataset", "");
  uint64_t generation = j.value("generation", uint64_t{0});
  std::shared_ptr<const CachedDataset> dropped;
  bool staged_dropped = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = datasets_.find(name);
    if (it != datasets_.end() && (generation == 0 || it->second->generation() == generation)) {
      dropped = std::move(it->second);
      datasets_.erase(it);
    }
    auto st = staged_.find(name);
    if (st != staged_.end() && (generation == 0 || st->second.generation == generation)) {
      staged_.erase(st);
      staged_dropped = true;
    }
  }
  int64_t freed = dropped ? dropped->nbytes() : 0;
  dropped.reset();  // memory returns once in-flight streams finish too
  if (freed || staged_dropped)
    LogInfo("evicted", {{"dataset", name}, {"bytes", FormatBytes(freed)}});
  return json{{"evicted", freed > 0 || staged_dropped}, {"bytes", freed}};
}

}  // namespace icefloe
