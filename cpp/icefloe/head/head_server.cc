#include "icefloe/head/head_server.h"

namespace icefloe {

namespace flight = arrow::flight;

arrow::Status HeadServer::ListFlights(const flight::ServerCallContext&, const flight::Criteria*,
                                      std::unique_ptr<flight::FlightListing>* listings) {
  std::vector<flight::FlightInfo> infos;
  for (const auto& uri : options_.nodes) {
    ARROW_ASSIGN_OR_RAISE(auto location, flight::Location::Parse(uri));
    ARROW_ASSIGN_OR_RAISE(auto client, flight::FlightClient::Connect(location));
    flight::FlightCallOptions call;
    call.timeout = flight::TimeoutDuration{10.0};
    auto listing = client->ListFlights(call, {});
    if (!listing.ok()) {
      return listing.status().WithMessage("listing node ", uri, ": ", listing.status().message());
    }
    while (true) {
      ARROW_ASSIGN_OR_RAISE(auto info, (*listing)->Next());
      if (!info) break;
      infos.push_back(std::move(*info));
    }
  }
  *listings = std::make_unique<flight::SimpleFlightListing>(std::move(infos));
  return arrow::Status::OK();
}

}  // namespace icefloe
