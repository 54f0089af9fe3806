// The head's Flight service: the catalog of datasets and the front door
// consumers ask for endpoints. It is never on the data path.
//
// Actions (JSON bodies, see docs/protocol.md): load, list, describe, evict,
// status, and node.register from data nodes. GetFlightInfo takes a CMD
// descriptor (a JSON range command) or PATH [name]; GetSchema likewise;
// ListFlights lists ready datasets.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <arrow/flight/server.h>
#include <nlohmann/json.hpp>

#include "icefloe/common/security.h"
#include "icefloe/head/catalog.h"
#include "icefloe/head/registry.h"
#include "icefloe/iceberg/file_io.h"

namespace icefloe {

struct HeadOptions {
  std::vector<std::string> nodes;  ///< static data node locations
  SecurityOptions security;
  iceberg::FileIOOptions io;
  RegistryOptions registry;
  double load_timeout_s = 3600;  ///< per node.load call
  int32_t max_concurrent_loads = 4;
  /// Multiplier from Parquet column bytes to in-memory Arrow bytes for
  /// variable-width columns when estimating whether a dataset fits.
  double size_estimate_factor = 3.0;
  /// Dataset that Kubeflow PATH descriptors [index, total] shard.
  std::string default_dataset;
  /// A dataset to load at start-up (Kubeflow mode), retried with backoff
  /// until `startup_timeout_s`; /ready waits for it.
  std::optional<LoadRequest> startup_load;
  double startup_timeout_s = 600;
};

/// Shared state of one running load (progress, completion).
struct LoadJob;

class HeadServer : public arrow::flight::FlightServerBase {
 public:
  explicit HeadServer(HeadOptions options);
  ~HeadServer() override;

  /// Starts polling nodes. Call after Init().
  void StartBackground();
  /// Stops background work and waits for running loads to finish or fail.
  void StopBackground();

  /// Plans and starts loading a dataset; returns the job to follow. Errors
  /// found before any node loads (bad request, planning, does not fit) are
  /// returned here.
  arrow::Result<std::shared_ptr<LoadJob>> StartLoad(const LoadRequest& request);
  /// Progress of a job as JSON ({"state": "loading", "tasks_done": ..}).
  nlohmann::json Progress(const LoadJob& job) const;

  /// Evicts a dataset: nodes free its memory (unless another name shares it).
  arrow::Result<nlohmann::json> Evict(const std::string& name);
  nlohmann::json ClusterStatus() const;
  /// Ready when at least one node is alive, no static node is missing and the
  /// start-up dataset (if any) is loaded.
  std::pair<bool, std::string> Ready() const;
  /// Loads options.startup_load, retrying with backoff until its deadline.
  /// Returns the final error when it never succeeds.
  arrow::Status RunStartupLoad();

  arrow::Status ListFlights(const arrow::flight::ServerCallContext& context,
                            const arrow::flight::Criteria* criteria,
                            std::unique_ptr<arrow::flight::FlightListing>* listings) override;
  arrow::Status GetFlightInfo(const arrow::flight::ServerCallContext& context,
                              const arrow::flight::FlightDescriptor& request,
                              std::unique_ptr<arrow::flight::FlightInfo>* info) override;
  arrow::Status GetSchema(const arrow::flight::ServerCallContext& context,
                          const arrow::flight::FlightDescriptor& request,
                          std::unique_ptr<arrow::flight::SchemaResult>* schema) override;
  arrow::Status DoAction(const arrow::flight::ServerCallContext& context,
                         const arrow::flight::Action& action,
                         std::unique_ptr<arrow::flight::ResultStream>* result) override;
  arrow::Status ListActions(const arrow::flight::ServerCallContext& context,
                            std::vector<arrow::flight::ActionType>* actions) override;

 private:
  arrow::Result<arrow::flight::FlightInfo> KubeflowInfo(
      const arrow::flight::FlightDescriptor& request) const;
  /// Epoch descriptors (epoch_info.cc): one plan ticket per replica set.
  arrow::Result<arrow::flight::FlightInfo> EpochInfo(
      const nlohmann::json& command, const arrow::flight::FlightDescriptor& request) const;
  /// Row descriptors (epoch_info.cc): one gather per replica set.
  arrow::Result<arrow::flight::FlightInfo> RowsInfo(
      const nlohmann::json& command, const arrow::flight::FlightDescriptor& request) const;
  arrow::Result<arrow::flight::FlightInfo> Info(
      const arrow::flight::FlightDescriptor& request) const;
  arrow::Status RunAction(const arrow::flight::ServerCallContext& context,
                          const arrow::flight::Action& action,
                          std::unique_ptr<arrow::flight::ResultStream>* result);
  void RunLoad(std::shared_ptr<LoadJob> job);
  arrow::Status ExecuteLoad(LoadJob* job);
  arrow::Result<std::shared_ptr<const DatasetEntry>> Lookup(const std::string& name) const;
  arrow::Result<std::shared_ptr<const DatasetEntry>> DatasetOf(
      const arrow::flight::FlightDescriptor& descriptor) const;
  arrow::Result<arrow::flight::FlightInfo> RangeInfo(const DatasetEntry& entry,
                                                     const arrow::flight::FlightDescriptor& d,
                                                     uint64_t start, uint64_t stop) const;
  void EvictStorage(const std::string& storage_name, uint64_t generation,
                    const std::vector<std::string>& nodes);

  HeadOptions options_;
  std::string ticket_key_;
  std::shared_ptr<NodeClients> clients_;
  NodeRegistry registry_;
  iceberg::FileIO io_;
  Catalog catalog_;
  std::atomic<uint64_t> next_generation_;

  mutable std::mutex jobs_mu_;
  std::map<std::string, std::shared_ptr<LoadJob>> jobs_;  // running, by name
  std::vector<std::thread> threads_;
  mutable std::mutex startup_mu_;
  std::string startup_state_ = "not started";
  bool stopping_ = false;
};

}  // namespace icefloe
