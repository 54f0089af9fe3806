// Test-only: a NodeRpc for tests whose registry only hears heartbeats and
// never calls a node: every call is NotImplemented.
#pragma once

#include <string>

#include "icefloe/head/core/node_rpc.h"

namespace icefloe {

class SilentNodeRpc : public NodeRpc {
 public:
  arrow::Result<NodeStatus> Status(const std::string&, double) override { return Refused(); }
  arrow::Result<NodeLoadState> StartLoad(const std::string&, const NodeLoadRequest&,
                                         double) override {
    return Refused();
  }
  arrow::Result<NodeLoadState> LoadStatus(const std::string&, const NodeLoadStatusRequest&,
                                          double) override {
    return Refused();
  }
  arrow::Result<NodeCommitResult> Commit(const std::string&, const NodeCommit&, double) override {
    return Refused();
  }
  arrow::Result<NodeEvictResult> Evict(const std::string&, const NodeEvict&, double) override {
    return Refused();
  }

 private:
  static arrow::Status Refused() { return arrow::Status::NotImplemented("not in this test"); }
};

}  // namespace icefloe
