// The data node's Flight service.
//
// DoGet is stateless: everything needed to serve a request is in the ticket.
// Datasets are published as immutable CachedDataset snapshots; a DoGet keeps
// streaming the copy it started with even if the dataset is evicted or
// replaced meanwhile (the stream holds the snapshot, and so its memory pool).
//
// Node-internal actions (node.load, node.commit, node.evict) come from the
// head; when the cluster has a secret they must carry the head's signature.
// Loads run in two phases: node.load reads the assigned scan tasks into
// staged batches and reports exact row counts; node.commit gives each task
// its first global row id and publishes the dataset.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <arrow/flight/server.h>
#include <nlohmann/json.hpp>

#include "icefloe/common/memory.h"
#include "icefloe/common/security.h"
#include "icefloe/iceberg/file_io.h"
#include "icefloe/loader/task_loader.h"
#include "icefloe/node/dataset.h"

namespace icefloe {

struct NodeOptions {
  std::string advertised_location;  ///< what clients dial (set once the port is known)
  SecurityOptions security;
  int64_t memory_limit_bytes = 0;  ///< 0 = unlimited
  int32_t load_threads = 2;
  iceberg::FileIOOptions io;
  /// Dataset that Kubeflow-format tickets read; when set, /ready waits for it.
  std::string default_dataset;
};

class NodeServer : public arrow::flight::FlightServerBase {
 public:
  explicit NodeServer(NodeOptions options);

  void set_advertised_location(std::string location);
  const std::string& advertised_location() const { return options_.advertised_location; }

  /// Publishes (or replaces) a dataset.
  void Put(std::shared_ptr<const CachedDataset> dataset);
  /// Looks a dataset up; KeyError naming it when absent.
  arrow::Result<std::shared_ptr<const CachedDataset>> Get(const std::string& name) const;
  /// A new pool charging this node's memory budget.
  std::shared_ptr<TrackingPool> NewPool(const std::string& label);

  /// The node's status as JSON: location, memory, datasets and loads.
  nlohmann::json Status() const;
  /// True when no load is staged or running (the node holds what it was given).
  bool Idle() const;
  /// Ready to serve: holds the default dataset when one is configured.
  std::pair<bool, std::string> Ready() const;

  arrow::Status ListFlights(const arrow::flight::ServerCallContext& context,
                            const arrow::flight::Criteria* criteria,
                            std::unique_ptr<arrow::flight::FlightListing>* listings) override;
  arrow::Status DoGet(const arrow::flight::ServerCallContext& context,
                      const arrow::flight::Ticket& request,
                      std::unique_ptr<arrow::flight::FlightDataStream>* stream) override;
  arrow::Status DoAction(const arrow::flight::ServerCallContext& context,
                         const arrow::flight::Action& action,
                         std::unique_ptr<arrow::flight::ResultStream>* result) override;
  arrow::Status ListActions(const arrow::flight::ServerCallContext& context,
                            std::vector<arrow::flight::ActionType>* actions) override;

 private:
  struct StagedLoad {
    uint64_t generation = 0;
    LoadedTasks loaded;
  };

  arrow::Status ServeTicket(const arrow::flight::Ticket& request,
                            std::unique_ptr<arrow::flight::FlightDataStream>* stream);
  arrow::Status RunAction(const arrow::flight::ServerCallContext& context,
                          const arrow::flight::Action& action,
                          std::unique_ptr<arrow::flight::ResultStream>* result);
  arrow::Result<nlohmann::json> HandleLoad(const std::string& body);
  arrow::Result<nlohmann::json> HandleCommit(const std::string& body);
  arrow::Result<nlohmann::json> HandleEvict(const std::string& body);
  arrow::Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> ServeRange(
      const CachedDataset& dataset, RowRange range) const;

  NodeOptions options_;
  std::string ticket_key_;
  std::shared_ptr<MemoryBudget> budget_;
  arrow::MemoryPool* base_pool_;  // jemalloc when built in: returns freed memory to the OS
  iceberg::FileIO io_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const CachedDataset>> datasets_;
  std::map<std::string, StagedLoad> staged_;
  std::map<std::string, std::shared_ptr<LoadProgress>> loading_;
};

}  // namespace icefloe
