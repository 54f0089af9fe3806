// NodeRpc over Arrow Flight: one client per node location, the cluster token
// on every call and the head's signature on every node action.
//
// A client is kept only while it reaches its node: one whose call found the
// node unreachable (IsPeerUnavailable: refused, reset, timed out) is dropped,
// and so is the client of a node that registers again after a failure
// (Reconnect). gRPC would otherwise keep the old channel in its reconnect
// backoff, which grows to seconds while a node is down, and answer every call
// Unavailable for that long after the node is back at the same address (a
// Kubernetes pod restarted under its stable name).
#pragma once

#include <map>
#include <memory>
#include <string>

#include <arrow/flight/client.h>

#include "icefloe/common/mutex.h"
#include "icefloe/common/security.h"
#include "icefloe/head/core/node_rpc.h"

namespace icefloe {

class FlightNodeRpc : public NodeRpc {
 public:
  explicit FlightNodeRpc(SecurityOptions security)
      : security_(std::move(security)), key_(security_.TicketKey()) {}

  arrow::Result<NodeStatus> Status(const std::string& node, double timeout_s) override;
  arrow::Result<NodeLoadState> StartLoad(const std::string& node, const NodeLoadRequest& request,
                                         double timeout_s) override;
  arrow::Result<NodeLoadState> LoadStatus(const std::string& node,
                                          const NodeLoadStatusRequest& request,
                                          double timeout_s) override;
  arrow::Result<NodeCommitResult> Commit(const std::string& node, const NodeCommit& request,
                                         double timeout_s) override;
  arrow::Result<NodeEvictResult> Evict(const std::string& node, const NodeEvict& request,
                                       double timeout_s) override;
  arrow::Status Record(const std::string& node, const NodeRecordRequest& request,
                       double timeout_s) override;
  void Reconnect(const std::string& node) override EXCLUDES(mu_);

 private:
  /// Runs `type` with `body` on `node`; its single result's bytes.
  arrow::Result<std::string> Call(const std::string& node, const std::string& type,
                                  const std::string& body, double timeout_s);
  arrow::Result<std::string> CallOnce(arrow::flight::FlightClient& client, const std::string& node,
                                      const std::string& type, const std::string& body,
                                      double timeout_s);
  arrow::Result<std::shared_ptr<arrow::flight::FlightClient>> Client(const std::string& node)
      EXCLUDES(mu_);
  /// Drops `client` as `node`'s client, unless another already replaced it.
  void Drop(const std::string& node, const std::shared_ptr<arrow::flight::FlightClient>& client)
      EXCLUDES(mu_);

  const SecurityOptions security_;
  const std::string key_;
  Mutex mu_;
  std::map<std::string, std::shared_ptr<arrow::flight::FlightClient>> clients_ GUARDED_BY(mu_);
};

}  // namespace icefloe
