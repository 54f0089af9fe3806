// The head's Flight service: the catalog of datasets and the front door
// consumers ask for endpoints. It is never on the data path.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <arrow/flight/client.h>
#include <arrow/flight/server.h>

namespace icefloe {

struct HeadOptions {
  /// Data node locations (grpc://host:port), from flags or the environment.
  std::vector<std::string> nodes;
};

class HeadServer : public arrow::flight::FlightServerBase {
 public:
  explicit HeadServer(HeadOptions options) : options_(std::move(options)) {}

  /// Lists every dataset the data nodes hold, one FlightInfo per dataset and
  /// node, each with that node's endpoint.
  arrow::Status ListFlights(const arrow::flight::ServerCallContext& context,
                            const arrow::flight::Criteria* criteria,
                            std::unique_ptr<arrow::flight::FlightListing>* listings) override;

 private:
  HeadOptions options_;
};

}  // namespace icefloe
