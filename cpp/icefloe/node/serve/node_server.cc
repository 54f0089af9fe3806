#include "icefloe/node/serve/node_server.h"

#include <algorithm>
#include <chrono>

#include <arrow/flight/types.h>
#include <arrow/record_batch.h>

#include "icefloe/common/bytes.h"
#include "icefloe/common/log.h"
#include "icefloe/common/wire_status.h"
#include "icefloe/node/serve/piece_stream.h"
#include "icefloe/node/serve/row_lengths.h"
#include "icefloe/node/tier/tier_file.h"
#include "icefloe/node/tier/tier_sink.h"
#include "icefloe/protocol/messages.h"
#include "icefloe/protocol/ticket.h"

namespace icefloe {

namespace flight = arrow::flight;

namespace {

// Streams batches of one dataset snapshot; holding the snapshot keeps its
// memory pool (and so every buffer) alive until the stream ends.
class SnapshotReader : public arrow::RecordBatchReader {
 public:
  /// `schema`: the dataset's, or its projection the batches already have.
  SnapshotReader(std::shared_ptr<const CachedDataset> dataset,
                 std::vector<std::shared_ptr<arrow::RecordBatch>> batches,
                 std::shared_ptr<arrow::Schema> schema)
      : dataset_(std::move(dataset)), batches_(std::move(batches)), schema_(std::move(schema)) {}

  std::shared_ptr<arrow::Schema> schema() const override { return schema_; }
  arrow::Status ReadNext(std::shared_ptr<arrow::RecordBatch>* batch) override {
    if (next_ >= batches_.size()) {
      batch->reset();
      return arrow::Status::OK();
    }
    *batch = std::move(batches_[next_++]);
    last_rows_ = (*batch)->num_rows();
    return arrow::Status::OK();
  }
  /// Rows of the batch ReadNext() returned last.
  int64_t last_rows() const { return last_rows_; }

 private:
  std::shared_ptr<const CachedDataset> dataset_;
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches_;
  std::shared_ptr<arrow::Schema> schema_;
  size_t next_ = 0;
  int64_t last_rows_ = 0;
};

// A range stream (Flight's RecordBatchStream: dictionaries included) that
// reports every record batch it sends to the node's metrics.
class MeteredRangeStream : public flight::FlightDataStream {
 public:
  MeteredRangeStream(std::shared_ptr<SnapshotReader> reader, std::unique_ptr<StreamMeter> meter)
      : reader_(reader), inner_(std::move(reader)), meter_(std::move(meter)) {}

  std::shared_ptr<arrow::Schema> schema() override { return inner_.schema(); }
  arrow::Result<flight::FlightPayload> GetSchemaPayload() override {
    return inner_.GetSchemaPayload();
  }
  arrow::Result<flight::FlightPayload> Next() override {
    const auto started = std::chrono::steady_clock::now();
    auto payload = inner_.Next();
    if (!payload.ok()) {
      meter_->Failed(payload.status());
    } else if (payload->ipc_message.type == arrow::ipc::MessageType::RECORD_BATCH) {
      meter_->Batch(reader_->last_rows(), payload->ipc_message.body_length,
                    std::chrono::steady_clock::now() - started, /*gathered=*/false);
    }
    return payload;
  }

 private:
  std::shared_ptr<SnapshotReader> reader_;
  flight::RecordBatchStream inner_;
  std::unique_ptr<StreamMeter> meter_;
};

// Cached data lives for hours while loads churn through decode buffers:
// jemalloc hands those back to the OS (RSS stays near the Arrow bytes held),
// where the default allocator keeps them.
arrow::MemoryPool* BasePool() {
  arrow::MemoryPool* pool = nullptr;
  if (arrow::jemalloc_memory_pool(&pool).ok() && pool != nullptr) return pool;
  return arrow::default_memory_pool();
}

// Appends `r` to sorted `ranges`, merged with the last when they touch.
void AppendRange(std::vector<RowRange>* ranges, RowRange r) {
  if (!ranges->empty() && ranges->back().stop == r.start) {
    ranges->back().stop = r.stop;
  } else {
    ranges->push_back(r);
  }
}

// The version of the stream by reference a reader asks for (header
// kSharedHeader): 0 when it does not ask; 1 for "1" or words this node does
// not know (what the first readers send); 2 for "2" (it cuts pieces at
// segments itself); 3 for "3" (it also assembles a piece across segments in
// one go, docs/protocol.md "Shared memory").
int SharedHeaderVersion(const flight::CallHeaders& headers) {
  auto it = headers.find(kSharedHeader);
  if (it == headers.end()) return 0;
  if (it->second == "3") return 3;
  return it->second == "2" ? 2 : 1;
}

}  // namespace

NodeServer::NodeServer(NodeOptions options)
    : options_(std::move(options)),
      ticket_key_(options_.security.TicketKey()),
      budget_(std::make_shared<MemoryBudget>(options_.memory_limit_bytes)),
      disk_budget_(std::make_shared<MemoryBudget>(options_.disk_limit_bytes)),
      tier_prefix_(std::to_string(std::chrono::system_clock::now().time_since_epoch() /
                                  std::chrono::nanoseconds(1))),
      base_pool_(BasePool()),
      gather_pool_(std::make_shared<TrackingPool>(budget_, "gathers", base_pool_)),
      io_(options_.io),
      metrics_(std::make_shared<NodeMetrics>()),
      advertised_location_(options_.advertised_location),
      actions_(ActionParts()),
      loads_(options_.loads, [this](const NodeLoadRequest& request, LoadProgress* progress) {
        return LoadForManager(request, progress);
      }) {
  if (TierEnabled()) {
    readahead_ = std::make_shared<TierReadahead>(ReadaheadLimit(), options_.readahead_policy);
  }
  metrics_->registry().OnScrape([this] {
    metrics_->SetStatus(Status(), gather_pool_->bytes_allocated());
    if (readahead_ != nullptr) metrics_->SetReadahead(readahead_->Stats());
  });
}

NodeServer::~NodeServer() { StopBackground(); }

void NodeServer::StopBackground() {
  loads_.Shutdown();
  if (readahead_ != nullptr) readahead_->Stop();
}

arrow::Result<TierAdoption> NodeServer::AdoptTier() {
  if (options_.disk_dir.empty()) return TierAdoption{};
  ARROW_ASSIGN_OR_RAISE(TierAdoption adopted, AdoptTierDir(options_.disk_dir, disk_budget_));
  for (auto& c : adopted.copies) {
    if (options_.share_memory) {  // its tier files are its segments: nothing is copied
      ARROW_ASSIGN_OR_RAISE(c.copy, ShareCopy(std::move(c.copy), budget_, {}, {}));
    }
    Put(c.copy);
    if (c.record.is_object()) {
      MutexLock lock(&mu_);
      records_[c.copy->name()] = c.record;
    }
    LogInfo("adopted from the disk tier", {{"dataset", c.copy->name()},
                                           {"generation", std::to_string(c.copy->generation())},
                                           {"rows", std::to_string(c.copy->num_rows())}});
  }
  return adopted;
}

void NodeServer::SyncTierManifest(const std::string& name) {
  if (options_.disk_dir.empty()) return;
  MutexLock serial(&manifest_mu_);
  std::shared_ptr<const CachedDataset> copy;
  nlohmann::json record;
  {
    MutexLock lock(&mu_);
    if (auto it = datasets_.find(name); it != datasets_.end()) copy = it->second;
    if (auto it = records_.find(name); it != records_.end()) record = it->second;
  }
  const arrow::Status st = copy != nullptr ? SaveTierManifest(options_.disk_dir, *copy, record)
                                           : RemoveTierManifest(options_.disk_dir, name);
  if (!st.ok()) LogWarn("disk tier manifest", {{"dataset", name}, {"error", st.ToString()}});
}

bool NodeServer::TierEnabled() const {
  return !options_.disk_dir.empty() && options_.disk_limit_bytes > 0 &&
         options_.memory_limit_bytes > 0;
}

int64_t NodeServer::ReadaheadLimit() const {
  if (!TierEnabled()) return 0;
  return options_.readahead_limit_bytes >= 0 ? options_.readahead_limit_bytes
                                             : options_.memory_limit_bytes / 8;
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

NodeActions::Parts NodeServer::ActionParts() {
  NodeActions::Parts parts;
  parts.ticket_key = ticket_key_;
  parts.trusted_head_host = options_.trusted_head_host;
  parts.share_memory = options_.share_memory;
  parts.budget = budget_;
  parts.loads = &loads_;
  parts.status = [this] { return Status(); };
  parts.find = [this](const std::string& name) -> std::shared_ptr<const CachedDataset> {
    MutexLock lock(&mu_);
    auto it = datasets_.find(name);
    return it == datasets_.end() ? nullptr : it->second;
  };
  parts.shared_exports = [this] { return SharedExports(); };
  parts.put = [this](std::shared_ptr<const CachedDataset> copy) { Put(std::move(copy)); };
  parts.replace = [this](const std::shared_ptr<const CachedDataset>& base,
                         std::shared_ptr<const CachedDataset> copy) {
    return Replace(base, std::move(copy));
  };
  parts.drop = [this](const std::string& name, uint64_t generation) {
    return Drop(name, generation);
  };
  parts.keep_record = [this](const std::string& name, uint64_t generation, nlohmann::json record) {
    return KeepRecord(name, generation, std::move(record));
  };
  parts.sync_tier_manifest = [this](const std::string& name) { SyncTierManifest(name); };
  return parts;
}

bool NodeServer::Replace(const std::shared_ptr<const CachedDataset>& base,
                         std::shared_ptr<const CachedDataset> copy) {
  MutexLock lock(&mu_);
  auto it = datasets_.find(base->name());
  if (it == datasets_.end() || it->second != base) return false;
  it->second.swap(copy);  // `base`'s old snapshot is released outside the lock
  return true;
}

std::shared_ptr<const CachedDataset> NodeServer::Drop(const std::string& name,
                                                      uint64_t generation) {
  MutexLock lock(&mu_);
  auto it = datasets_.find(name);
  if (it == datasets_.end() || (generation != 0 && it->second->generation() != generation)) {
    return nullptr;
  }
  std::shared_ptr<const CachedDataset> dropped = std::move(it->second);
  datasets_.erase(it);
  records_.erase(name);
  return dropped;
}

bool NodeServer::KeepRecord(const std::string& name, uint64_t generation, nlohmann::json record) {
  MutexLock lock(&mu_);
  auto it = datasets_.find(name);
  if (it == datasets_.end() || it->second->generation() != generation) return false;
  records_[name] = std::move(record);
  return true;
}

std::vector<std::shared_ptr<const SharedExport>> NodeServer::SharedExports() const {
  std::vector<std::shared_ptr<const SharedExport>> out;
  MutexLock lock(&mu_);
  for (const auto& [name, held] : datasets_) {
    if (held->shared() != nullptr) out.push_back(held->shared());
  }
  return out;
}

void NodeServer::set_advertised_location(std::string location) {
  MutexLock lock(&mu_);
  advertised_location_ = std::move(location);
}

void NodeServer::Put(std::shared_ptr<const CachedDataset> dataset) {
  metrics_->Published(static_cast<int64_t>(dataset->num_rows()),
                      static_cast<int64_t>(dataset->nbytes()));
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
  status.row_memory_bytes = RowMemory();
  status.disk_limit_bytes = disk_budget_->limit_bytes();
  status.disk_used_bytes = disk_budget_->used_bytes();
  if (readahead_ != nullptr) {
    const ReadaheadStats readahead = readahead_->Stats();
    status.tier_ram_bytes = readahead.ram_bytes;
    status.tier_disk_bytes = readahead.disk_bytes;
    status.prefetch_lead_batches = readahead.lead_batches;
  }
  for (const auto& l : loads_.States()) {
    if (l.state == LoadState::kStaged) ++status.staged;
    status.loads.push_back(l);
  }
  status.newest_generation = loads_.NewestGeneration();
  MutexLock lock(&mu_);
  status.location = advertised_location_;
  for (const auto& [name, ds] : datasets_) {
    // Every stream serving the copy holds it; so does this map.
    NodeDatasetInfo info{name, ds->generation(), ds->num_rows(), ds->nbytes(), {}, {}, 0, nullptr};
    info.readers = std::max<int64_t>(0, static_cast<int64_t>(ds.use_count()) - 1);
    if (auto r = records_.find(name); r != records_.end()) info.record = r->second;
    const auto& on_disk = ds->on_disk();
    for (size_t i = 0; i < ds->batches().size(); ++i) {
      const CachedBatch& b = ds->batches()[i];
      AppendRange(&info.ranges, {b.global_start, b.global_stop()});
      if (!on_disk.empty() && on_disk[i].size > 0) {
        AppendRange(&info.disk_ranges, {b.global_start, b.global_stop()});
      }
    }
    status.datasets.push_back(std::move(info));
  }
  return status;
}

std::string NodeServer::Metrics() const { return metrics_->registry().Scrape(); }

std::pair<bool, std::string> NodeServer::Ready() const {
  if (options_.default_dataset.empty()) return {true, "ready"};
  if (DefaultDataset()) return {true, "ready"};
  if (loads_.Loading(options_.default_dataset)) {
    return {false, "loading " + options_.default_dataset};
  }
  return {false, "waiting for the head to assign " + options_.default_dataset};
}

bool NodeServer::Idle() const { return loads_.Idle(); }

std::shared_ptr<const CachedDataset> NodeServer::DefaultDataset() const {
  // A reload stores the new copy as "name@generation" beside the old one
  // (head/core/load_coordinator.cc). The current one is the newest the head has
  // published (it sends the copy's catalog record then), else the newest.
  const std::string& name = options_.default_dataset;
  std::shared_ptr<const CachedDataset> newest, published;
  MutexLock lock(&mu_);
  for (auto it = datasets_.lower_bound(name);
       it != datasets_.end() && it->first.compare(0, name.size(), name) == 0; ++it) {
    if (it->first.size() != name.size() && it->first[name.size()] != '@') continue;
    const auto& ds = it->second;
    if (!newest || ds->generation() > newest->generation()) newest = ds;
    if (records_.count(it->first) && (!published || ds->generation() > published->generation())) {
      published = ds;
    }
  }
  return published ? published : newest;
}

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
    // One range ticket per run of rows held back to back: a range ticket is
    // served only whole (ServeTicket), and a node may hold slices apart.
    std::vector<RowRange> runs;
    for (const auto& b : ds->batches()) {
      if (!runs.empty() && runs.back().stop == b.global_start) {
        runs.back().stop = b.global_stop();
      } else {
        runs.push_back({b.global_start, b.global_stop()});
      }
    }
    if (runs.empty()) runs.push_back({0, 0});
    std::vector<flight::FlightEndpoint> endpoints;
    for (const auto& run : runs) {
      flight::FlightEndpoint endpoint;
      endpoint.ticket.ticket = EncodeNativeTicket(
          {TicketKind::kRange, ds->name(), ds->generation()}, EncodeRangeBody(run), ticket_key_);
      endpoint.locations.push_back(location);
      endpoints.push_back(std::move(endpoint));
    }
    ARROW_ASSIGN_OR_RAISE(
        auto info,
        flight::FlightInfo::Make(*ds->schema(), flight::FlightDescriptor::Path({ds->name()}),
                                 endpoints, ds->num_rows(), ds->nbytes()));
    infos.push_back(std::move(info));
  }
  *listings = std::make_unique<flight::SimpleFlightListing>(std::move(infos));
  return arrow::Status::OK();
}

arrow::Status NodeServer::ListActions(const flight::ServerCallContext&,
                                      std::vector<flight::ActionType>* actions) {
  *actions = NodeActions::Types();
  return arrow::Status::OK();
}

arrow::Status NodeServer::DoAction(const flight::ServerCallContext& context,
                                   const flight::Action& action,
                                   std::unique_ptr<flight::ResultStream>* result) {
  return ToWireStatus(actions_.Run(context, action, result));
}

arrow::Status NodeServer::DoGet(const flight::ServerCallContext& context,
                                const flight::Ticket& request,
                                std::unique_ptr<flight::FlightDataStream>* stream) {
  arrow::Status st = ServeTicket(request, SharedHeaderVersion(context.incoming_headers()), stream);
  if (!st.ok()) metrics_->Error("DoGet", st);
  return ToWireStatus(st);
}

std::unique_ptr<StreamMeter> NodeServer::Meter(StreamKind kind) const {
  return std::make_unique<StreamMeter>(metrics_, kind);
}

arrow::Status NodeServer::ServeTicket(const flight::Ticket& request, int shared,
                                      std::unique_ptr<flight::FlightDataStream>* stream) {
  const bool wants_shared = shared > 0;
  if (!IsNativeTicket(request.ticket)) {
    // Kubeflow's ticket: inclusive global rows [start, end] of the default
    // dataset; this node streams the rows of that range it holds.
    ARROW_ASSIGN_OR_RAISE(KubeflowTicket kf, DecodeKubeflowTicket(request.ticket));
    if (options_.default_dataset.empty()) {
      return arrow::Status::Invalid(
          "Kubeflow-format ticket, but this node has no default dataset (--default-dataset)");
    }
    auto dataset = DefaultDataset();
    if (!dataset) {
      return arrow::Status::KeyError("this node holds no copy of dataset '",
                                     options_.default_dataset, "' (yet)");
    }
    RowRange range{kf.start, kf.end < kf.start ? kf.start : kf.end + 1};
    if (kf.end == UINT64_MAX) range.stop = UINT64_MAX;
    auto schema = dataset->schema();
    *stream = std::make_unique<MeteredRangeStream>(
        std::make_shared<SnapshotReader>(dataset, dataset->Slice(range), std::move(schema)),
        Meter(StreamKind::kRange));
    return arrow::Status::OK();
  }
  ARROW_ASSIGN_OR_RAISE(NativeTicket ticket, DecodeNativeTicket(request.ticket, ticket_key_));
  ARROW_ASSIGN_OR_RAISE(auto dataset, Get(ticket.header.dataset));
  if (dataset->generation() != ticket.header.generation) {
    return arrow::Status::Invalid("stale ticket: dataset '", dataset->name(), "' generation ",
                                  ticket.header.generation, " was replaced by generation ",
                                  dataset->generation(), "; ask the head for new endpoints");
  }
  // The projection (empty: every column) is applied before anything is sent.
  ARROW_RETURN_NOT_OK(CheckTicketColumns(ticket.header.columns, dataset->schema()->num_fields()));
  std::vector<int> columns(ticket.header.columns.begin(), ticket.header.columns.end());
  if (ticket.header.kind == TicketKind::kPlan) {
    ARROW_ASSIGN_OR_RAISE(PlanTicket plan, DecodePlanBody(ticket.body));
    // A node restarted with part of its copy is refused at once, before a
    // batch goes out: the reader fails over to another replica of the rows.
    for (const auto& owned : plan.owned) ARROW_RETURN_NOT_OK(CheckHeld(*dataset, owned));
    // By reference where the reader's part is slices (none, block) or runs
    // of blocks (window: the reader scatters them from the file to their
    // positions in one native pass, two threads; 0.58 against 0.52 GB/s
    // over the wire on the benchmark's table, with 22% less CPU). Sample
    // rows, one run each, are gathered here, on the node's threads, which
    // measured faster than the reading process taking them itself.
    // A window epoch over a copy with rows on the tier is by reference only
    // to a reader that assembles a piece across segments in one go (version
    // 3): its units (a load batch each, ~0.3 MB) are segments of their own
    // and a window span's rows cross hundreds of them; a reader that paid
    // per piece read at 0.29-0.42x TCP's rows/s (benchmarks/README.md,
    // tier_reference), so earlier readers get it over TCP. A reader that
    // cuts (version 2 on) gets a window span's piece whole where the copy's
    // segments split it.
    const ShuffleMode mode = plan.params.order.mode;
    const bool reader_cuts = shared >= 2;
    const bool by_reference =
        wants_shared && dataset->shared() != nullptr &&
        (mode == ShuffleMode::kNone || mode == ShuffleMode::kBlock ||
         (mode == ShuffleMode::kWindow && (dataset->disk_bytes() == 0 || shared >= 3)));
    ARROW_ASSIGN_OR_RAISE(*stream, MakePlanStream(std::move(dataset), std::move(plan), gather_pool_,
                                                  Meter(StreamKind::kPlan), std::move(columns),
                                                  by_reference, readahead_, reader_cuts));
    return arrow::Status::OK();
  }
  // A granted rows ticket (kind 04) is served exactly as a head-signed one.
  if (ticket.header.kind == TicketKind::kRows || ticket.header.kind == TicketKind::kGrantedRows) {
    ARROW_ASSIGN_OR_RAISE(RowsTicket rows, DecodeRowsBody(ticket.body));
    // By reference for a same-host reader: it takes the rows from the file,
    // and keeps the file for later takes of this generation.
    const bool by_reference = wants_shared && dataset->shared() != nullptr;
    ARROW_ASSIGN_OR_RAISE(
        *stream, MakeRowsStream(std::move(dataset), std::move(rows), gather_pool_,
                                Meter(StreamKind::kRows), std::move(columns), by_reference));
    return arrow::Status::OK();
  }
  ARROW_ASSIGN_OR_RAISE(RowRange range, DecodeRangeBody(ticket.body));
  // Every row of the range, or an error a reader fails over on: never the
  // part of it this node holds (a node restarted with part of its copy).
  ARROW_RETURN_NOT_OK(CheckHeld(*dataset, range));
  if (wants_shared && dataset->shared() != nullptr && !ticket.header.lengths) {
    ARROW_ASSIGN_OR_RAISE(*stream, MakeRangeStream(std::move(dataset), range, gather_pool_,
                                                   Meter(StreamKind::kRange), columns));
    return arrow::Status::OK();
  }
  ARROW_ASSIGN_OR_RAISE(auto schema, ProjectedSchema(*dataset, columns));
  auto batches = dataset->Slice(range);
  if (ticket.header.lengths) {  // one column (DecodeNativeTicket): its row lengths
    ARROW_ASSIGN_OR_RAISE(batches,
                          RowLengths(batches, columns[0], schema->field(0)->name(), &schema));
    auto reader = std::make_shared<SnapshotReader>(dataset, std::move(batches), std::move(schema));
    *stream = std::make_unique<MeteredRangeStream>(std::move(reader), Meter(StreamKind::kRange));
    return arrow::Status::OK();
  }
  if (!columns.empty()) {  // zero-copy: the slices' column arrays, fewer of them
    for (auto& b : batches) {
      ARROW_ASSIGN_OR_RAISE(b, b->SelectColumns(columns));
    }
  }
  auto reader = std::make_shared<SnapshotReader>(dataset, std::move(batches), std::move(schema));
  *stream = std::make_unique<MeteredRangeStream>(std::move(reader), Meter(StreamKind::kRange));
  return arrow::Status::OK();
}

}  // namespace icefloe
