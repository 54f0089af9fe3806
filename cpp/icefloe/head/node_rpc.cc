#include "icefloe/head/node_rpc.h"

#include <arrow/flight/types.h>

#include "icefloe/common/wire_status.h"

namespace icefloe {

namespace {
constexpr const char* kMalformed = " sent a malformed reply to ";
}  // namespace

arrow::Status BadNodeReply(const std::string& node, const std::string& action,
                           const arrow::Status& parse_error) {
  return arrow::flight::MakeFlightError(
      arrow::flight::FlightStatusCode::Failed,
      "node " + node + kMalformed + action + ": " + parse_error.message(), kErrorNodeUnavailable);
}

arrow::Status NodeRpc::Record(const std::string& node, const NodeRecordRequest&, double) {
  return arrow::Status::NotImplemented("node.record to ", node);
}

void NodeRpc::Reconnect(const std::string&) {}

bool IsBadNodeReply(const arrow::Status& status) {
  return IsPeerUnavailable(status) && status.message().find(kMalformed) != std::string::npos;
}

}  // namespace icefloe
