// GetFlightInfo for row ranges (native) and Kubeflow shards.
#include <algorithm>

#include <arrow/flight/types.h>

#include "icefloe/common/kubeflow.h"
#include "icefloe/head/head_server.h"
#include "icefloe/head/projection.h"
#include "icefloe/protocol/ticket.h"

namespace icefloe {

namespace flight = arrow::flight;

arrow::Result<flight::FlightInfo> HeadServer::RangeInfo(
    const DatasetEntry& entry, const flight::FlightDescriptor& d, uint64_t start, uint64_t stop,
    const std::vector<std::string>& columns) const {
  ARROW_ASSIGN_OR_RAISE(Projection projection, Project(entry.schema, columns, "range descriptor"));
  std::vector<flight::FlightEndpoint> endpoints;
  for (const auto& s : entry.slices) {
    uint64_t from = std::max(start, s.start), to = std::min(stop, s.stop);
    if (from >= to) continue;
    flight::FlightEndpoint e;
    e.ticket.ticket = EncodeNativeTicket(
        {TicketKind::kRange, entry.storage_name, entry.generation, projection.columns},
        EncodeRangeBody({from, to}), ticket_key_);
    for (const auto& n : s.nodes) {
      ARROW_ASSIGN_OR_RAISE(auto loc, flight::Location::Parse(n));
      e.locations.push_back(std::move(loc));
    }
    endpoints.push_back(std::move(e));
  }
  const double share = entry.num_rows > 0
                           ? static_cast<double>(stop - start) / static_cast<double>(entry.num_rows)
                           : 0.0;
  const int64_t bytes =
      static_cast<int64_t>(static_cast<double>(entry.nbytes) / entry.request.replication * share);
  return flight::FlightInfo::Make(*projection.schema, d, endpoints,
                                  static_cast<int64_t>(stop - start), bytes, /*ordered=*/true);
}

arrow::Result<flight::FlightInfo> HeadServer::KubeflowInfo(
    const flight::FlightDescriptor& request) const {
  if (options_.default_dataset.empty()) {
    return arrow::Status::Invalid(
        "this head has no default dataset for PATH [index, total] "
        "descriptors (start it with --default-dataset)");
  }
  ARROW_ASSIGN_OR_RAISE(auto entry, Lookup(options_.default_dataset));
  ARROW_ASSIGN_OR_RAISE(KubeflowShard shard,
                        KubeflowShardOf(request.path, static_cast<uint64_t>(entry->num_rows)));
  // One endpoint per slice (adjacent slices with the same replicas merged)
  // whose ticket is that slice's part of the shard, listing every replica,
  // live first. Kubeflow's client reads locations[0] of each endpoint in
  // order and so gets exactly its shard; a reader can also resume a broken
  // stream on another replica from the row it reached (the bounds are global
  // row ids), which one endpoint per node with the whole shard's ticket, as
  // Kubeflow's own cache answers, does not allow.
  struct Part {
    KubeflowTicket rows;
    const std::vector<std::string>* nodes;
  };
  std::vector<Part> parts;
  for (const auto& s : entry->slices) {
    if (s.stop <= shard.first || s.start > shard.last || s.nodes.empty()) continue;
    const uint64_t first = std::max(s.start, shard.first);
    const uint64_t last = std::min(s.stop - 1, shard.last);
    if (!parts.empty() && parts.back().rows.end + 1 == first && *parts.back().nodes == s.nodes) {
      parts.back().rows.end = last;
    } else {
      parts.push_back({{first, last}, &s.nodes});
    }
  }
  std::vector<flight::FlightEndpoint> endpoints;
  for (const auto& part : parts) {
    flight::FlightEndpoint e;
    e.ticket.ticket = EncodeKubeflowTicket(part.rows);
    e.app_metadata = e.ticket.ticket;
    for (const auto& n : *part.nodes) {
      ARROW_ASSIGN_OR_RAISE(auto loc, flight::Location::Parse(n));
      e.locations.push_back(std::move(loc));
    }
    endpoints.push_back(std::move(e));
  }
  return flight::FlightInfo::Make(*entry->schema, request, endpoints, -1, -1);
}

}  // namespace icefloe
