// What the head answers a FlightInfo request with, before it is encoded as
// an arrow::flight::FlightInfo (head_server.cc): plain values, so the
// planning (flight_info_planner.h) is tested without a Flight server.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <arrow/type_fwd.h>

namespace icefloe {

/// One ticket and the nodes that serve it, in the order readers try them
/// (live replicas first). Node locations are URIs ("grpc://host:port").
struct PlannedEndpoint {
  std::string ticket;
  std::vector<std::string> nodes;
  std::string app_metadata;  ///< empty: none
};

/// A FlightInfo's content, less the descriptor it answers.
struct PlannedInfo {
  std::shared_ptr<arrow::Schema> schema;  ///< of the columns the streams send
  std::vector<PlannedEndpoint> endpoints;
  int64_t total_records = -1;  ///< -1: unknown
  int64_t total_bytes = -1;    ///< -1: unknown
  bool ordered = false;        ///< whether the endpoints' rows follow one another
  std::string app_metadata;    ///< empty: none
};

}  // namespace icefloe
