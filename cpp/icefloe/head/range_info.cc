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
  // One endpoint per node holding rows of the shard, each with the whole
  // shard's ticket: nodes return only the rows they hold.
  const std::string ticket = EncodeKubeflowTicket({shard.first, shard.last});
  std::vector<std::string> nodes;
  for (const auto& s : entry->slices) {
    if (s.stop <= shard.first || s.start > shard.last) continue;
    if (std::find(nodes.begin(), nodes.end(), s.nodes[0]) == nodes.end()) {
      nodes.push_back(s.nodes[0]);
    }
  }
  std::vector<flight::FlightEndpoint> endpoints;
  for (const auto& n : nodes) {
    flight::FlightEndpoint e;
    e.ticket.ticket = ticket;
    e.app_metadata = ticket;
    ARROW_ASSIGN_OR_RAISE(auto loc, flight::Location::Parse(n));
    e.locations.push_back(std::move(loc));
    endpoints.push_back(std::move(e));
  }
  return flight::FlightInfo::Make(*entry->schema, request, endpoints, -1, -1);
}

}  // namespace icefloe
