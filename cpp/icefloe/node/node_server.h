// The data node's Flight service: holds cached datasets and serves DoGet.
//
// DoGet is stateless: everything needed to serve a request is in the ticket.
// Datasets are published as immutable CachedDataset snapshots behind a mutex,
// so a DoGet keeps streaming the copy it started with even if the dataset is
// evicted or replaced meanwhile.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <arrow/flight/server.h>

#include "icefloe/node/dataset.h"

namespace icefloe {

struct NodeOptions {
  /// Location clients should dial to reach this node (set after Init, once
  /// the port is known).
  std::string advertised_location;
  /// Cluster secret; when set, native tickets must carry a valid signature.
  std::string ticket_secret;
};

class NodeServer : public arrow::flight::FlightServerBase {
 public:
  explicit NodeServer(NodeOptions options) : options_(std::move(options)) {}

  void set_advertised_location(std::string location) {
    options_.advertised_location = std::move(location);
  }

  /// Publishes (or replaces) a dataset.
  void Put(std::shared_ptr<const CachedDataset> dataset);
  /// Looks a dataset up; KeyError naming it when absent.
  arrow::Result<std::shared_ptr<const CachedDataset>> Get(const std::string& name) const;

  arrow::Status ListFlights(const arrow::flight::ServerCallContext& context,
                            const arrow::flight::Criteria* criteria,
                            std::unique_ptr<arrow::flight::FlightListing>* listings) override;

  arrow::Status DoGet(const arrow::flight::ServerCallContext& context,
                      const arrow::flight::Ticket& request,
                      std::unique_ptr<arrow::flight::FlightDataStream>* stream) override;

 private:
  arrow::Result<arrow::flight::FlightInfo> Describe(const CachedDataset& dataset) const;

  NodeOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const CachedDataset>> datasets_;
};

}  // namespace icefloe
