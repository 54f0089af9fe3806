#include "icefloe/node/node_server.h"

#include <algorithm>

#include <arrow/flight/types.h>
#include <arrow/record_batch.h>

#include "icefloe/common/bytes.h"
#include "icefloe/common/log.h"
#include "icefloe/common/wire_status.h"
#include "icefloe/node/piece_stream.h"
#include "icefloe/protocol/messages.h"
#include "icefloe/protocol/ticket.h"

namespace icefloe {

namespace flight = arrow::flight;

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

}  // namespace

NodeServer::NodeServer(NodeOptions options)
    : options_(std::move(options)),
      ticket_key_(options_.security.TicketKey()),
      budget_(std::make_shared<MemoryBudget>(options_.memory_limit_bytes)),
      base_pool_(BasePool()),
      gather_pool_(std::make_shared<TrackingPool>(budget_, "gathers", base_pool_)),
      io_(options_.io),
      advertised_location_(options_.advertised_location),
      loads_(options_.loads, [this](const NodeLoadRequest& request, LoadProgress* progress) {
        return LoadForManager(request, progress);
      }) {}

NodeServer::~NodeServer() { StopBackground(); }

void NodeServer::StopBackground() { loads_.Shutdown(); }

void NodeServer::set_advertised_location(std::string location) {
  MutexLock lock(&mu_);
  advertised_location_ = std::move(location);
}

void NodeServer::Put(std::shared_ptr<const CachedDataset> dataset) {
  std::shared_ptr<const CachedDataset> replaced;  // released outside the lock
  MutexLock lock(&mu_);
  auto& slot = datasets_[dataset->name()];
  replaced = std::move(slot);
  records_.erase(dataset->name());  // it described the copy replaced
  slot = std::move(dataset);
}

arrow::Result<std::shared_ptr<const CachedDataset>> NodeServer::Get(const std::string& name) const {
  MutexLock lock(&mu_);
  auto it = datasets_.find(name);
  if (it == datasets_.end()) {
    return arrow::Status::KeyError("dataset '", name, "' is not cached on this node");
  }
  return it->second;
}

std::shared_ptr<TrackingPool> NodeServer::NewPool(const std::string& label) {
  return std::make_shared<TrackingPool>(budget_, label, base_pool_);
}

NodeStatus NodeServer::Status() const {
  NodeStatus status;
  status.memory_limit_bytes = budget_->limit_bytes();
  status.memory_used_bytes = budget_->used_bytes();
  for (const auto& l : loads_.States()) {
    if (l.state == "staged") ++status.staged;
    status.loads.push_back(l);
  }
  MutexLock lock(&mu_);
  status.location = advertised_location_;
  for (const auto& [name, ds] : datasets_) {
    NodeDatasetInfo info{name, ds->generation(), ds->num_rows(), ds->nbytes(), {}, nullptr};
    if (auto r = records_.find(name); r != records_.end()) info.record = r->second;
    for (const auto& b : ds->batches()) {
      if (!info.ranges.empty() && info.ranges.back().stop == b.global_start) {
        info.ranges.back().stop = b.global_stop();
      } else {
        info.ranges.push_back({b.global_start, b.global_stop()});
      }
    }
    status.datasets.push_back(std::move(info));
  }
  return status;
}

std::string NodeServer::Metrics() const {
  NodeStatus status = Status();
  std::string out;
  out += "# TYPE icefloe_node_memory_used_bytes gauge\nicefloe_node_memory_used_bytes " +
         std::to_string(status.memory_used_bytes) + "\n";
  out += "# TYPE icefloe_node_memory_limit_bytes gauge\nicefloe_node_memory_limit_bytes " +
         std::to_string(status.memory_limit_bytes) + "\n";
  out += "# TYPE icefloe_node_gather_bytes gauge\nicefloe_node_gather_bytes " +
         std::to_string(gather_pool_->bytes_allocated()) + "\n";
  out += "# TYPE icefloe_node_datasets gauge\nicefloe_node_datasets " +
         std::to_string(status.datasets.size()) + "\n";
  out += "# TYPE icefloe_node_dataset_bytes gauge\n";
  for (const auto& d : status.datasets) {
    std::string name;  // a label value: escape what Prometheus text needs escaped
    for (char c : d.name) {
      if (c == '\\' || c == '"') name.push_back('\\');
      if (c == '\n') {
        name += "\\n";
        continue;
      }
      name.push_back(c);
    }
    out += "icefloe_node_dataset_bytes{dataset=\"" + name + "\"} " + std::to_string(d.bytes) + "\n";
  }
  return out;
}

std::pair<bool, std::string> NodeServer::Ready() const {
  if (options_.default_dataset.empty()) return {true, "ready"};
  {
    MutexLock lock(&mu_);
    if (datasets_.count(options_.default_dataset)) return {true, "ready"};
  }
  if (loads_.Loading(options_.default_dataset)) {
    return {false, "loading " + options_.default_dataset};
  }
  return {false, "waiting for the head to assign " + options_.default_dataset};
}

bool NodeServer::Idle() const { return loads_.Idle(); }

arrow::Status NodeServer::ListFlights(const flight::ServerCallContext&, const flight::Criteria*,
                                      std::unique_ptr<flight::FlightListing>* listings) {
  std::vector<std::shared_ptr<const CachedDataset>> snapshot;
  std::string advertised;
  {
    MutexLock lock(&mu_);
    for (const auto& [name, ds] : datasets_) snapshot.push_back(ds);
    advertised = advertised_location_;
  }
  ARROW_ASSIGN_OR_RAISE(auto location, flight::Location::Parse(advertised));
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
    ARROW_ASSIGN_OR_RAISE(*stream,
                          MakePlanStream(std::move(dataset), std::move(plan), gather_pool_));
    return arrow::Status::OK();
  }
  if (ticket.header.kind == TicketKind::kRows) {
    ARROW_ASSIGN_OR_RAISE(RowsTicket rows, DecodeRowsBody(ticket.body));
    ARROW_ASSIGN_OR_RAISE(*stream,
                          MakeRowsStream(std::move(dataset), std::move(rows), gather_pool_));
    return arrow::Status::OK();
  }
  ARROW_ASSIGN_OR_RAISE(RowRange range, DecodeRangeBody(ticket.body));
  auto batches = dataset->Slice(range);
  auto reader = std::make_shared<SnapshotReader>(dataset, std::move(batches));
  *stream = std::make_unique<flight::RecordBatchStream>(std::move(reader));
  return arrow::Status::OK();
}

}  // namespace icefloe
