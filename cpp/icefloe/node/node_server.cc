#include "icefloe/node/node_server.h"

#include <arrow/flight/types.h>
#include <arrow/record_batch.h>

#include "icefloe/common/ticket.h"

namespace icefloe {

namespace flight = arrow::flight;

void NodeServer::Put(std::shared_ptr<const CachedDataset> dataset) {
  std::lock_guard<std::mutex> lock(mu_);
  datasets_[dataset->name()] = std::move(dataset);
}

arrow::Result<std::shared_ptr<const CachedDataset>> NodeServer::Get(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = datasets_.find(name);
  if (it == datasets_.end())
    return arrow::Status::KeyError("dataset '", name, "' is not cached on this node");
  return it->second;
}

arrow::Result<flight::FlightInfo> NodeServer::Describe(const CachedDataset& dataset) const {
  uint64_t first = dataset.batches().empty() ? 0 : dataset.batches().front().global_start;
  uint64_t last = dataset.batches().empty() ? 0 : dataset.batches().back().global_stop();
  std::string ticket =
      EncodeNativeTicket({TicketKind::kRange, dataset.name(), dataset.generation()},
                         EncodeRangeBody({first, last}), options_.ticket_secret);
  ARROW_ASSIGN_OR_RAISE(auto location, flight::Location::Parse(options_.advertised_location));
  flight::FlightEndpoint endpoint;
  endpoint.ticket.ticket = std::move(ticket);
  endpoint.locations.push_back(location);
  return flight::FlightInfo::Make(*dataset.schema(),
                                  flight::FlightDescriptor::Path({dataset.name()}), {endpoint},
                                  dataset.num_rows(), dataset.nbytes());
}

arrow::Status NodeServer::ListFlights(const flight::ServerCallContext&, const flight::Criteria*,
                                      std::unique_ptr<flight::FlightListing>* listings) {
  std::vector<std::shared_ptr<const CachedDataset>> snapshot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, ds] : datasets_) snapshot.push_back(ds);
  }
  std::vector<flight::FlightInfo> infos;
  for (const auto& ds : snapshot) {
    ARROW_ASSIGN_OR_RAISE(auto info, Describe(*ds));
    infos.push_back(std::move(info));
  }
  *listings = std::make_unique<flight::SimpleFlightListing>(std::move(infos));
  return arrow::Status::OK();
}

arrow::Status NodeServer::DoGet(const flight::ServerCallContext&, const flight::Ticket& request,
                                std::unique_ptr<flight::FlightDataStream>* stream) {
  if (!IsNativeTicket(request.ticket)) {
    ARROW_RETURN_NOT_OK(DecodeKubeflowTicket(request.ticket).status());
    return arrow::Status::NotImplemented("Kubeflow-format tickets are not served by this node yet");
  }
  ARROW_ASSIGN_OR_RAISE(NativeTicket ticket,
                        DecodeNativeTicket(request.ticket, options_.ticket_secret));
  if (ticket.header.kind != TicketKind::kRange) {
    return arrow::Status::NotImplemented("ticket kind ", static_cast<int>(ticket.header.kind),
                                         " is not served yet");
  }
  ARROW_ASSIGN_OR_RAISE(RowRange range, DecodeRangeBody(ticket.body));
  ARROW_ASSIGN_OR_RAISE(auto dataset, Get(ticket.header.dataset));
  if (dataset->generation() != ticket.header.generation) {
    return arrow::Status::Invalid("stale ticket: dataset '", dataset->name(), "' generation ",
                                  ticket.header.generation, " was replaced by generation ",
                                  dataset->generation(), "; ask the head for new endpoints");
  }
  auto batches = dataset->Slice(range);
  ARROW_ASSIGN_OR_RAISE(auto reader,
                        arrow::RecordBatchReader::Make(std::move(batches), dataset->schema()));
  *stream = std::make_unique<flight::RecordBatchStream>(std::move(reader));
  return arrow::Status::OK();
}

}  // namespace icefloe
