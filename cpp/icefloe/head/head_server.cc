#include "icefloe/head/head_server.h"

#include <algorithm>
#include <chrono>
#include <tuple>

#include <arrow/flight/types.h>
#include <arrow/type.h>

#include "icefloe/common/log.h"
#include "icefloe/common/wire_status.h"
#include "icefloe/head/flight_node_rpc.h"
#include "icefloe/head/projection.h"
#include "icefloe/head/status_page.h"
#include "icefloe/iceberg/metadata.h"
#include "icefloe/iceberg/scan.h"
#include "icefloe/protocol/transform_spec.h"
#include "icefloe/transform/transform.h"

namespace icefloe {

namespace flight = arrow::flight;
using json = nlohmann::json;

namespace {

uint64_t InitialGeneration() {
  // A floor for this head's generations (tickets from before a restart stay
  // stale); LoadCoordinator::NewGeneration also stays above every generation
  // the nodes report, so a clock behind the previous head's does no harm.
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

std::shared_ptr<NodeRpc> RpcOf(const HeadOptions& options) {
  if (options.rpc) return options.rpc;
  return std::make_shared<FlightNodeRpc>(options.security);
}

// Parsed manifests kept for later plans (a refresh reads only the new ones):
// at most this many manifest entries, about 1-2 KB each.
constexpr size_t kManifestCacheEntries = 100'000;

ScanPlanner PlannerOf(const HeadOptions& options, iceberg::FileIO* io) {
  if (options.planner) return options.planner;
  auto manifests = std::make_shared<iceberg::ManifestCache>(kManifestCacheEntries);
  return [io, manifests](const LoadRequest& r) -> arrow::Result<iceberg::ScanPlan> {
    iceberg::ScanOptions scan;
    scan.manifests = manifests.get();
    scan.snapshot_id = r.snapshot_id;
    scan.ref = r.ref;
    scan.as_of_ms = r.as_of_ms;
    scan.columns = r.columns;
    scan.filter = r.filter;
    if (!scan.columns.empty() || r.transform.is_null()) {
      return iceberg::PlanScan(*io, r.source, scan);
    }
    // A transform reads only the columns it names.
    ARROW_ASSIGN_OR_RAISE(TransformSpec spec, TransformSpec::FromJson(r.transform));
    ARROW_ASSIGN_OR_RAISE(scan.columns, transform::InputColumns(spec));
    auto plan = iceberg::PlanScan(*io, r.source, scan);
    if (plan.ok()) return plan;
    // Say which of the transform's columns names no table column: bound to
    // every column of the table, the transform fails naming it (error path only).
    scan.columns.clear();
    auto all = iceberg::PlanScan(*io, r.source, scan);
    if (all.ok()) {
      auto read = [io](const std::string& location) { return io->ReadAll(location); };
      auto bound = transform::Transform::Make(spec, all->arrow_schema, read);
      if (!bound.ok()) return bound.status();
    }
    return plan.status();
  };
}

// The head checks a transform before anything loads: every expression bound
// to the planned columns, every tokenizer model read (the table's FileIO),
// hashed and parsed.
TransformBinder BinderOf(iceberg::FileIO* io) {
  return [io](const LoadRequest& r,
              const std::shared_ptr<arrow::Schema>& input) -> arrow::Result<BoundTransform> {
    ARROW_ASSIGN_OR_RAISE(TransformSpec spec, TransformSpec::FromJson(r.transform));
    auto read = [io](const std::string& location) { return io->ReadAll(location); };
    ARROW_ASSIGN_OR_RAISE(auto bound, transform::Transform::Make(spec, input, read));
    return BoundTransform{bound->output_schema(), bound->model_sha256()};
  };
}

// What the follower reads of a table: its current metadata.json (found as
// a scan finds it) and the snapshot the request reads; never the manifests.
TableProbe ProbeOf(const HeadOptions& options, iceberg::FileIO* io) {
  if (options.table_probe) return options.table_probe;
  return [io](const LoadRequest& r) -> arrow::Result<TableHead> {
    TableHead head;
    // A metadata file in its table's metadata/ directory follows the table
    // (Kubeflow's METADATA_LOC); one anywhere else never moves.
    std::string table = r.source;
    if (iceberg::IsMetadataFileLocation(r.source)) {
      auto dir = iceberg::TableOfMetadataFile(r.source);
      if (!dir) {
        head.fixed = true;
        head.why_fixed =
            "the source is a metadata.json file outside a table's metadata/ directory, "
            "which never moves (load the table directory to follow it)";
        head.metadata_location = r.source;
        return head;
      }
      table = *dir;
    }
    ARROW_ASSIGN_OR_RAISE(iceberg::TableMetadata metadata, iceberg::LoadTableMetadata(*io, table));
    head.metadata_location = metadata.metadata_location;
    auto selector = iceberg::SnapshotSelector::Current();
    if (r.ref) {
      auto ref = metadata.refs.find(*r.ref);
      if (ref != metadata.refs.end() && ref->second.kind == iceberg::SnapshotRef::Kind::kTag) {
        head.fixed = true;
        head.why_fixed = "the load reads tag '" + *r.ref + "'";
        return head;
      }
      selector = iceberg::SnapshotSelector::Ref(*r.ref);
    }
    ARROW_ASSIGN_OR_RAISE(const iceberg::Snapshot* snapshot,
                          iceberg::SelectSnapshot(metadata, selector));
    if (snapshot) {
      head.snapshot_id = snapshot->snapshot_id;
      head.timestamp_ms = snapshot->timestamp_ms;
    }
    return head;
  };
}

}  // namespace

HeadServer::HeadServer(HeadOptions options)
    : options_(std::move(options)),
      ticket_key_(options_.security.TicketKey()),
      first_generation_(InitialGeneration()),
      io_(options_.io),
      jobs_(options_.jobs),
      rpc_(RpcOf(options_)),
      calls_("the node-call pool", options_.node_call_threads,
             static_cast<size_t>(options_.max_queued_node_calls)),
      registry_(rpc_.get(), &calls_, options_.registry),
      coordinator_(options_.loads, rpc_.get(), &calls_, &registry_, &catalog_,
                   PlannerOf(options_, &io_), first_generation_),
      adopter_(
          options_.adopter, rpc_.get(), &calls_, &registry_, &catalog_,
          [this](const std::string& name) { return coordinator_.Loading(name); },
          first_generation_),
      follower_(
          options_.follow, &catalog_, ProbeOf(options_, &io_),
          // A refresh: a metadata-file source moves to the table's newest.
          [this](const LoadRequest& request) { return Refresh(request.name); },
          // While the catalog is being recovered nothing is reloaded: the
          // adopter may still be replacing entries from the nodes' records.
          [this](const std::string& name) {
            return adopter_.recovering() || coordinator_.Loading(name);
          }) {
  coordinator_.SetTransformBinder(BinderOf(&io_));
  metrics_.registry().OnScrape([this] { RefreshMetrics(); });
  for (const auto& n : options_.nodes) registry_.AddStatic(n);
  if (ticket_key_.empty()) {
    LogWarn(
        "no cluster secret: nodes refuse this head's node actions (except Kubeflow workers, "
        "from their leader) and node.register is refused; give --cluster-secret-file or "
        "--token-file");
  }
}

HeadServer::~HeadServer() { StopBackground(); }

void HeadServer::StartBackground() {
  registry_.PollAll();
  // Lost slices heal themselves: every poll is followed by a health check.
  registry_.SetAfterPoll([this] { coordinator_.CheckHealth(); });
  // A finished load's catalog record reaches its nodes before load() returns.
  coordinator_.SetAfterPublish([this] { adopter_.RunOnce(); });
  registry_.Start();
  adopter_.Start();
  follower_.Start();
}

void HeadServer::StopBackground() {
  {
    MutexLock lock(&startup_mu_);
    stopping_ = true;
    startup_cv_.NotifyAll();
  }
  follower_.Stop();
  adopter_.Stop();
  registry_.Stop();
  coordinator_.Shutdown();
  calls_.Shutdown();
}

arrow::Result<std::shared_ptr<LoadJob>> HeadServer::Load(const LoadRequest& request) {
  auto job = coordinator_.Load(request);
  if (job.ok()) {
    metrics_.Track(*job);
  } else {
    metrics_.LoadRefused(job.status());
  }
  return job;
}

arrow::Result<std::shared_ptr<LoadJob>> HeadServer::Refresh(const std::string& name) {
  auto entry = catalog_.Find(name);
  if (!entry) return arrow::Status::KeyError("unknown dataset '", name, "'");
  LoadRequest request = entry->request;
  request.snapshot_id.reset();
  request.as_of_ms.reset();
  // A table directory plans its newest snapshot by itself; a metadata file
  // moves to its table's newest one (it stays a file: Kubeflow's METADATA_LOC).
  if (iceberg::IsMetadataFileLocation(request.source)) {
    auto newest = iceberg::NewestMetadataLocation(io_, request.source);
    if (!newest.ok()) {
      metrics_.LoadRefused(newest.status());
      return newest.status().WithMessage("refresh of '", name, "': ", newest.status().message());
    }
    request.source = std::move(*newest);
  }
  return Load(request);
}

std::pair<bool, std::string> HeadServer::Ready() const {
  if (adopter_.recovering()) return {false, "recovering the catalog from the data nodes"};
  size_t alive = 0;
  const auto nodes = registry_.Snapshot();
  // Nodes that refuse this head's node actions first: that is why it waits.
  std::string refused;
  size_t refusing = 0;
  for (const auto& n : nodes) {
    if (n.refused.empty()) continue;
    if (++refusing <= 4) {
      refused += std::string(refused.empty() ? "" : "; ") + "node " + n.location +
                 " refuses this head's node actions: " + n.refused;
    }
  }
  if (refusing > 4) refused += "; and " + std::to_string(refusing - 4) + " more nodes";
  if (!refused.empty()) return {false, refused};
  for (const auto& n : nodes) {
    if (n.state == NodeState::kAlive) {
      ++alive;
    } else if (n.is_static) {
      return {false, "waiting for node " + n.location};
    }
  }
  if (alive == 0) return {false, "no data node registered"};
  if (options_.startup_load) {
    auto entry = catalog_.Find(options_.startup_load->name);
    if (!entry || entry->state != CopyState::kReady) {
      MutexLock lock(&startup_mu_);
      return {false, "loading " + options_.startup_load->name + ": " + startup_state_};
    }
  }
  return {true, "ready"};
}

json HeadServer::ClusterStatus() const {
  metrics_.PollLoads();
  StatusReply status;
  for (const auto& e : catalog_.All()) {
    DatasetDescription d = e->Description(false);
    std::map<std::string, int64_t> per_node;
    for (const auto& slice : e->slices) {
      for (const auto& node : slice.nodes) ++per_node[node];
    }
    d.slices_per_node.emplace();
    for (const auto& [node, n] : per_node) d.slices_per_node->push_back({node, n});
    status.datasets.push_back(std::move(d));
  }
  status.jobs = jobs_.Summaries(std::chrono::steady_clock::now());
  // Copies a reload replaced, kept for the epochs still reading them.
  const auto now = std::chrono::steady_clock::now();
  for (const auto& r : catalog_.Retired()) {
    status.retired.push_back({r.entry->name, r.entry->generation, r.replaced_by, r.entry->nbytes,
                              std::chrono::duration<double>(now - r.retired_at).count(),
                              std::chrono::duration<double>(now - r.last_used).count()});
  }
  std::tie(status.ready, status.reason) = Ready();
  status.nodes = registry_.Status();
  status.loads = coordinator_.Loads();
  status.recent_loads = metrics_.RecentLoads();
  status.recovering = adopter_.recovering();
  status.follow = follower_.Status();
  status.default_dataset = options_.default_dataset;
  return status.ToJson();
}

std::string HeadServer::StatusPage() const { return RenderStatusPage(ClusterStatus()); }

void HeadServer::RefreshMetrics() const {
  metrics_.PollLoads();
  metrics_.SetState(registry_.Snapshot(), catalog_.All(), coordinator_.Loads().size(),
                    Ready().first, jobs_.Summaries(std::chrono::steady_clock::now()));
  metrics_.SetFollow(follower_.Records());
}

std::string HeadServer::Metrics() const { return metrics_.registry().Scrape(); }

arrow::Result<std::shared_ptr<const DatasetEntry>> HeadServer::Lookup(
    const std::string& name, std::optional<uint64_t> generation) const {
  auto entry = catalog_.Find(name);
  if (!entry) {
    if (coordinator_.Loading(name)) {
      return arrow::Status::Invalid("dataset '", name, "' is still loading");
    }
    return arrow::Status::KeyError("unknown dataset '", name, "'");
  }
  if (generation && *generation != entry->generation) {
    auto kept = catalog_.FindGeneration(name, *generation, std::chrono::steady_clock::now());
    if (!kept) {
      return arrow::Status::Invalid(
          "dataset '", name, "' generation ", *generation,
          " is no longer cached: it was replaced by generation ", entry->generation,
          " and freed (a replaced copy is kept while it has readers, up to --retain-s); "
          "start the epoch again on generation ",
          entry->generation);
    }
    entry = std::move(kept);
  }
  // A degraded or healing copy stays readable where its rows are present.
  if (!Loaded(entry->state)) {
    return arrow::Status::Invalid("dataset '", name, "' is ", entry->state,
                                  entry->error.empty() ? "" : ": " + entry->error);
  }
  // Live replicas first: readers try a slice's nodes in order.
  const auto alive = registry_.AliveLocations();
  auto is_alive = [&alive](const std::string& n) { return alive.count(n) > 0; };
  if (std::all_of(entry->nodes.begin(), entry->nodes.end(), is_alive)) return entry;
  auto reordered = std::make_shared<DatasetEntry>(*entry);
  for (auto& slice : reordered->slices) {
    std::stable_partition(slice.nodes.begin(), slice.nodes.end(), is_alive);
  }
  return std::shared_ptr<const DatasetEntry>(std::move(reordered));
}

arrow::Result<std::shared_ptr<const DatasetEntry>> HeadServer::DatasetOf(
    const flight::FlightDescriptor& d) const {
  if (d.type == flight::FlightDescriptor::PATH) {
    if (d.path.size() != 1) {
      return arrow::Status::NotImplemented("PATH descriptors with ", d.path.size(),
                                           " elements are not served here");
    }
    return Lookup(d.path[0]);
  }
  ARROW_ASSIGN_OR_RAISE(Descriptor descriptor, ParseDescriptor(d.cmd));
  return Lookup(DescriptorDataset(descriptor));
}

arrow::Status HeadServer::ListFlights(const flight::ServerCallContext&, const flight::Criteria*,
                                      std::unique_ptr<flight::FlightListing>* listings) {
  ARROW_RETURN_NOT_OK(adopter_.CheckServing());
  std::vector<flight::FlightInfo> infos;
  for (const auto& e : catalog_.All()) {
    if (e->state != CopyState::kReady) continue;
    auto info = RangeInfo(*e, flight::FlightDescriptor::Path({e->name}), 0,
                          static_cast<uint64_t>(e->num_rows));
    if (!info.ok()) return ToWireStatus(info.status());
    infos.push_back(std::move(*info));
  }
  *listings = std::make_unique<flight::SimpleFlightListing>(std::move(infos));
  return arrow::Status::OK();
}

arrow::Status HeadServer::GetFlightInfo(const flight::ServerCallContext&,
                                        const flight::FlightDescriptor& request,
                                        std::unique_ptr<flight::FlightInfo>* info) {
  ARROW_RETURN_NOT_OK(adopter_.CheckServing());
  const auto started = std::chrono::steady_clock::now();
  const char* kind = "invalid";
  auto out = Info(request, &kind);
  metrics_.FlightInfo(kind, std::chrono::steady_clock::now() - started, out.status());
  if (!out.ok()) return ToWireStatus(out.status());
  *info = std::make_unique<flight::FlightInfo>(std::move(*out));
  return arrow::Status::OK();
}

arrow::Result<flight::FlightInfo> HeadServer::Info(const flight::FlightDescriptor& request,
                                                   const char** kind) const {
  if (request.type == flight::FlightDescriptor::PATH) {
    if (request.path.size() != 1 || !catalog_.Find(request.path[0])) {
      *kind = "kubeflow";
      return KubeflowInfo(request);
    }
    *kind = "path";
    ARROW_ASSIGN_OR_RAISE(auto entry, Lookup(request.path[0]));
    return RangeInfo(*entry, request, 0, static_cast<uint64_t>(entry->num_rows));
  }
  if (request.type != flight::FlightDescriptor::CMD) {
    return arrow::Status::Invalid("descriptor: expected a CMD or PATH descriptor");
  }
  ARROW_ASSIGN_OR_RAISE(Descriptor descriptor, ParseDescriptor(request.cmd));
  if (auto* epoch = std::get_if<EpochDescriptor>(&descriptor)) {
    *kind = "epoch";
    return EpochInfo(*epoch, request);
  }
  if (auto* rows = std::get_if<RowsDescriptor>(&descriptor)) {
    *kind = "rows";
    return RowsInfo(*rows, request);
  }
  *kind = "range";
  const auto& range = std::get<RangeDescriptor>(descriptor);
  ARROW_ASSIGN_OR_RAISE(auto entry, Lookup(range.dataset));
  const uint64_t n = static_cast<uint64_t>(entry->num_rows);
  const uint64_t stop = range.stop.value_or(n);
  if (range.start > n || stop > n) {
    return arrow::Status::IndexError("range [", range.start, ", ", stop, ") is outside dataset '",
                                     entry->name, "' of ", n, " rows");
  }
  return RangeInfo(*entry, request, range.start, stop, range.columns);
}

arrow::Status HeadServer::GetSchema(const flight::ServerCallContext&,
                                    const flight::FlightDescriptor& request,
                                    std::unique_ptr<flight::SchemaResult>* schema) {
  ARROW_RETURN_NOT_OK(adopter_.CheckServing());
  auto entry = DatasetOf(request);
  if (!entry.ok()) return ToWireStatus(entry.status());
  // A CMD descriptor's projection shapes the schema as it shapes the streams.
  std::vector<std::string> columns;
  if (request.type == flight::FlightDescriptor::CMD) {
    auto descriptor = ParseDescriptor(request.cmd);  // parsed fine in DatasetOf
    if (descriptor.ok()) columns = DescriptorColumns(*descriptor);
  }
  auto projection = Project((*entry)->schema, columns, "descriptor");
  if (!projection.ok()) return ToWireStatus(projection.status());
  auto result = flight::SchemaResult::Make(*projection->schema);
  if (!result.ok()) return ToWireStatus(result.status());
  *schema = std::move(*result);
  return arrow::Status::OK();
}

}  // namespace icefloe
