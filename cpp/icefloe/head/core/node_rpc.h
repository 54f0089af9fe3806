// How the head talks to data nodes: one typed call per node action.
//
// FlightNodeRpc (flight_node_rpc.h) is the real one; tests substitute a fake
// to drive the head's decisions (loads, evicts, failures) in-process. Every
// call has a timeout; a node that cannot be reached, or answers with a reply
// that does not parse, gives an error naming the node (IsPeerUnavailable is
// true for both: the head stops using such a node).
//
// Implementations are thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <arrow/result.h>

#include "icefloe/common/thread_pool.h"
#include "icefloe/protocol/messages.h"

namespace icefloe {

class NodeRpc {
 public:
  virtual ~NodeRpc() = default;

  /// node.status: memory, datasets, loads.
  virtual arrow::Result<NodeStatus> Status(const std::string& node, double timeout_s) = 0;
  /// node.load: starts loading in the background; answers at once.
  virtual arrow::Result<NodeLoadState> StartLoad(const std::string& node,
                                                 const NodeLoadRequest& request,
                                                 double timeout_s) = 0;
  /// node.load_status: the load's state after waiting up to request.wait_ms.
  virtual arrow::Result<NodeLoadState> LoadStatus(const std::string& node,
                                                  const NodeLoadStatusRequest& request,
                                                  double timeout_s) = 0;
  /// node.commit: publishes a staged load.
  virtual arrow::Result<NodeCommitResult> Commit(const std::string& node, const NodeCommit& request,
                                                 double timeout_s) = 0;
  /// node.evict: drops (or cancels) a dataset's copy or load.
  virtual arrow::Result<NodeEvictResult> Evict(const std::string& node, const NodeEvict& request,
                                               double timeout_s) = 0;
  /// node.record: the catalog record a node keeps with a copy (head/core/adopter.h).
  /// Not every fake needs it: NotImplemented unless overridden.
  virtual arrow::Status Record(const std::string& node, const NodeRecordRequest& request,
                               double timeout_s);
  /// The node at `node` registered again after the head failed to reach it
  /// (a pod restarted under its old name, maybe at a new IP): forgets any
  /// connection kept to it, so the next call dials afresh instead of waiting
  /// out the old connection's reconnect backoff. Calls in flight finish on
  /// the old one. Default: nothing (fakes keep no connections).
  virtual void Reconnect(const std::string& node);
};

/// The error for a node whose reply to `action` did not parse: names the node
/// and the field; counts as the node being unavailable.
arrow::Status BadNodeReply(const std::string& node, const std::string& action,
                           const arrow::Status& parse_error);
/// True for a BadNodeReply error (the registry then keeps the node out for a while).
bool IsBadNodeReply(const arrow::Status& status);

/// Evicts (storage, generation) on `nodes` (each once) in parallel on
/// `calls`, all within `timeout_s`; returns the nodes that did not confirm
/// (each logged). `how` sets staged_only or stray; its dataset and
/// generation are these.
std::vector<std::string> EvictOnNodes(NodeRpc* rpc, ThreadPool* calls, double timeout_s,
                                      const std::string& storage, uint64_t generation,
                                      const std::vector<std::string>& nodes, NodeEvict how = {});

}  // namespace icefloe
