#include "icefloe/head/core/node_rpc.h"

#include <set>

#include <arrow/flight/types.h>

#include "icefloe/common/log.h"
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

std::vector<std::string> EvictOnNodes(NodeRpc* rpc, ThreadPool* calls, double timeout_s,
                                      const std::string& storage, uint64_t generation,
                                      const std::vector<std::string>& nodes, NodeEvict how) {
  std::set<std::string> unique(nodes.begin(), nodes.end());
  const std::vector<std::string> targets(unique.begin(), unique.end());
  NodeEvict req = std::move(how);
  req.dataset = storage;
  req.generation = generation;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_s));
  auto results = FanOut<NodeEvictResult>(
      calls, targets.size(),
      [rpc, targets, req, timeout_s](size_t i) { return rpc->Evict(targets[i], req, timeout_s); },
      deadline);
  std::vector<std::string> unreached;
  for (size_t i = 0; i < targets.size(); ++i) {
    if (results[i] && results[i]->ok()) continue;
    const std::string error =
        results[i] ? results[i]->status().ToString() : "no answer within the evict timeout";
    LogWarn("evict failed", {{"node", targets[i]}, {"dataset", storage}, {"error", error}});
    unreached.push_back(targets[i]);
  }
  return unreached;
}

}  // namespace icefloe
