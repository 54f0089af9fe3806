// An in-process icefloe cluster for server-path tests: a HeadServer and
// NodeServers in one process on 127.0.0.1, port 0, with a cluster secret,
// real Flight calls between them, and a planner the test controls (tables
// are Parquet files written by the test; no Iceberg metadata needed).
//
// Start() returns once every node answers the head; the destructor stops
// everything. Test-only (built with the tests).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <arrow/flight/client.h>
#include <arrow/result.h>
#include <arrow/table.h>

#include "icefloe/head/service/head_server.h"
#include "icefloe/node/serve/node_server.h"

namespace icefloe::testing {

struct MiniClusterOptions {
  int num_nodes = 2;
  int64_t node_memory_limit_bytes = 0;  ///< 0: unlimited
  std::string secret = "mini cluster secret";
  /// Plans every load; the default plans nothing (set it per test).
  ScanPlanner planner;
  LoadOptions loads;
};

class MiniCluster {
 public:
  static arrow::Result<std::unique_ptr<MiniCluster>> Start(MiniClusterOptions options);
  ~MiniCluster();

  HeadServer& head() { return *head_; }
  NodeServer& node(int i) { return *nodes_[static_cast<size_t>(i)]; }
  const std::string& head_location() const { return head_location_; }
  const std::string& node_location(int i) const { return node_locations_[static_cast<size_t>(i)]; }
  const SecurityOptions& security() const { return security_; }

  /// Shuts node i down (its port stops answering), as a crash would look.
  void StopNode(int i);

  /// Runs an action; its results' bodies. `sign`: with the head's signature.
  arrow::Result<std::vector<std::string>> Action(const std::string& location,
                                                 const std::string& type, const std::string& body,
                                                 bool sign = false);
  arrow::Result<arrow::flight::FlightInfo> Info(const std::string& cmd);
  /// Reads every endpoint of `info` (first location each), in endpoint order.
  arrow::Result<std::shared_ptr<arrow::Table>> ReadAll(const arrow::flight::FlightInfo& info);
  /// Loads through the head's "load" action; the last result (the description).
  arrow::Result<std::string> Load(const std::string& body);

 private:
  MiniCluster() = default;
  arrow::Result<arrow::flight::FlightClient*> Client(const std::string& location);

  SecurityOptions security_;
  std::vector<std::unique_ptr<NodeServer>> nodes_;
  std::vector<std::string> node_locations_;
  std::unique_ptr<HeadServer> head_;
  std::string head_location_;
  std::map<std::string, std::unique_ptr<arrow::flight::FlightClient>> clients_;
};

/// Writes rows with ids [first_id, first_id + rows) (column "id", int64,
/// Parquet field id 1) to `path`; the scan task reading it.
arrow::Result<iceberg::ScanTask> WriteIdFile(const std::string& path, int64_t first_id,
                                             int64_t rows);
/// A plan over `tasks` of the schema WriteIdFile writes.
arrow::Result<iceberg::ScanPlan> IdPlan(const std::string& table,
                                        std::vector<iceberg::ScanTask> tasks);

}  // namespace icefloe::testing
