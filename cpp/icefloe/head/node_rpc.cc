#include "icefloe/head/node_rpc.h"

#include <arrow/flight/types.h>

#include "icefloe/common/wire_status.h"

namespace icefloe {

arrow::Status BadNodeReply(const std::string& node, const std::string& action,
                           const arrow::Status& parse_error) {
  return arrow::flight::MakeFlightError(
      arrow::flight::FlightStatusCode::Failed,
      "node " + node + " sent a malformed reply to " + action + ": " + parse_error.message(),
      kErrorNodeUnavailable);
}

}  // namespace icefloe
