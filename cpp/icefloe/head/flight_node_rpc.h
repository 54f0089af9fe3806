// NodeRpc over Arrow Flight: one client per node location, the cluster token
// on every call and the head's signature on every node action.
#pragma once

#include <map>
#include <memory>
#include <string>

#include <arrow/flight/client.h>

#include "icefloe/common/mutex.h"
#include "icefloe/common/security.h"
#include "icefloe/head/node_rpc.h"

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

 private:
  /// Runs `type` with `body` on `node`; its single result's bytes.
  arrow::Result<std::string> Call(const std::string& node, const std::string& type,
                                  const std::string& body, double timeout_s);
  arrow::Result<std::string> CallOnce(const std::string& node, const std::string& type,
                                      const std::string& body, double timeout_s);
  arrow::Result<std::shared_ptr<arrow::flight::FlightClient>> Client(const std::string& node)
      EXCLUDES(mu_);

  const SecurityOptions security_;
  const std::string key_;
  Mutex mu_;
  std::map<std::string, std::shared_ptr<arrow::flight::FlightClient>> clients_ GUARDED_BY(mu_);
};

}  // namespace icefloe
