#include "icefloe/head/service/head_server.h"

#include <algorithm>
#include <chrono>
#include <tuple>

#include <arrow/flight/types.h>
#include <arrow/type.h>

#include "icefloe/common/log.h"
#include "icefloe/common/wire_status.h"
#include "icefloe/head/core/projection.h"
#include "icefloe/head/core/table_access.h"
#include "icefloe/head/service/flight_node_rpc.h"
#include "icefloe/head/service/status_page.h"
#include "icefloe/iceberg/metadata.h"

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

// The FlightInfo a plan encodes, answering `descriptor`.
arrow::Result<flight::FlightInfo> Encode(PlannedInfo plan,
                                         const flight::FlightDescriptor& descriptor) {
  std::vector<flight::FlightEndpoint> endpoints;
  endpoints.reserve(plan.endpoints.size());
  for (auto& planned : plan.endpoints) {
    flight::FlightEndpoint e;
    e.ticket.ticket = std::move(planned.ticket);
    e.app_metadata = std::move(planned.app_metadata);
    for (const auto& n : planned.nodes) {
      ARROW_ASSIGN_OR_RAISE(auto loc, flight::Location::Parse(n));
      e.locations.push_back(std::move(loc));
    }
    endpoints.push_back(std::move(e));
  }
  return flight::FlightInfo::Make(*plan.schema, descriptor, endpoints, plan.total_records,
                                  plan.total_bytes, plan.ordered, std::move(plan.app_metadata));
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
                   options_.planner ? options_.planner : IcebergScanPlanner(&io_),
                   first_generation_),
      adopter_(
          options_.adopter, rpc_.get(), &calls_, &registry_, &catalog_,
          [this](const std::string& name) { return coordinator_.Loading(name); },
          first_generation_),
      follower_(
          options_.follow, &catalog_,
          options_.table_probe ? options_.table_probe : IcebergTableProbe(&io_),
          // A refresh: a metadata-file source moves to the table's newest.
          [this](const LoadRequest& request) { return Refresh(request.name); },
          // While the catalog is being recovered nothing is reloaded: the
          // adopter may still be replacing entries from the nodes' records.
          [this](const std::string& name) {
            return adopter_.recovering() || coordinator_.Loading(name);
          }),
      planner_(
          &catalog_, &registry_,
          [this](const std::string& name) { return coordinator_.Loading(name); }, ticket_key_,
          options_.default_dataset),
      actions_({ticket_key_, &adopter_, &catalog_, &coordinator_, &registry_, &jobs_, &metrics_,
                &planner_, [this](const LoadRequest& request) { return Load(request); },
                [this](const std::string& name) { return Refresh(name); },
                [this] { return ClusterStatus(); }}),
      startup_(
          options_.startup_load, options_.startup_timeout_s, &registry_, &adopter_,
          [this](const LoadRequest& request) { return Load(request); },
          [this] { return Ready().second; }) {
  coordinator_.SetTransformBinder(FileTransformBinder(&io_));
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
  startup_.Stop();
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
      return {false, "loading " + options_.startup_load->name + ": " + startup_.state()};
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

arrow::Result<std::shared_ptr<const DatasetEntry>> HeadServer::DatasetOf(
    const flight::FlightDescriptor& d) const {
  if (d.type == flight::FlightDescriptor::PATH) {
    if (d.path.size() != 1) {
      return arrow::Status::NotImplemented("PATH descriptors with ", d.path.size(),
                                           " elements are not served here");
    }
    return planner_.Lookup(d.path[0]);
  }
  ARROW_ASSIGN_OR_RAISE(Descriptor descriptor, ParseDescriptor(d.cmd));
  return planner_.Lookup(DescriptorDataset(descriptor));
}

arrow::Status HeadServer::ListFlights(const flight::ServerCallContext&, const flight::Criteria*,
                                      std::unique_ptr<flight::FlightListing>* listings) {
  ARROW_RETURN_NOT_OK(adopter_.CheckServing());
  auto planned = planner_.List();
  if (!planned.ok()) return ToWireStatus(planned.status());
  std::vector<flight::FlightInfo> infos;
  for (auto& [name, plan] : *planned) {
    auto info = Encode(std::move(plan), flight::FlightDescriptor::Path({name}));
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
    if (!planner_.NamesDataset(request.path)) {
      *kind = "kubeflow";
      ARROW_ASSIGN_OR_RAISE(PlannedInfo plan, planner_.Kubeflow(request.path));
      return Encode(std::move(plan), request);
    }
    *kind = "path";
    ARROW_ASSIGN_OR_RAISE(PlannedInfo plan, planner_.Whole(request.path[0]));
    return Encode(std::move(plan), request);
  }
  if (request.type != flight::FlightDescriptor::CMD) {
    return arrow::Status::Invalid("descriptor: expected a CMD or PATH descriptor");
  }
  ARROW_ASSIGN_OR_RAISE(Descriptor descriptor, ParseDescriptor(request.cmd));
  arrow::Result<PlannedInfo> plan;
  if (auto* epoch = std::get_if<EpochDescriptor>(&descriptor)) {
    *kind = "epoch";
    plan = planner_.Epoch(*epoch);
  } else if (auto* rows = std::get_if<RowsDescriptor>(&descriptor)) {
    *kind = "rows";
    plan = planner_.Rows(*rows);
  } else {
    *kind = "range";
    plan = planner_.Range(std::get<RangeDescriptor>(descriptor));
  }
  ARROW_RETURN_NOT_OK(plan.status());
  return Encode(std::move(*plan), request);
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

arrow::Status HeadServer::DoAction(const flight::ServerCallContext& context,
                                   const flight::Action& action,
                                   std::unique_ptr<flight::ResultStream>* result) {
  return ToWireStatus(actions_.Run(context, action, result));
}

arrow::Status HeadServer::ListActions(const flight::ServerCallContext&,
                                      std::vector<flight::ActionType>* actions) {
  *actions = HeadActions::Types();
  return arrow::Status::OK();
}

}  // namespace icefloe
