// The head's DoAction: one typed message per action (protocol/actions.h,
// protocol/messages.h, docs/protocol.md), answered from the catalog, the
// coordinator, the registry and the FlightInfo planner: load, refresh, list,
// describe, slice_map, evict, status, job.report and node.register (signed,
// from data nodes). Catalog reads and loads answer Unavailable while the
// head recovers its catalog.
//
// Thread-safe (each part is); every pointer in Parts outlives it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <arrow/flight/server.h>
#include <nlohmann/json.hpp>

#include "icefloe/head/core/adopter.h"
#include "icefloe/head/core/catalog.h"
#include "icefloe/head/core/flight_info_planner.h"
#include "icefloe/head/core/jobs.h"
#include "icefloe/head/core/load_coordinator.h"
#include "icefloe/head/core/registry.h"
#include "icefloe/head/service/head_metrics.h"

namespace icefloe {

class HeadActions {
 public:
  /// What the actions read and change.
  struct Parts {
    std::string ticket_key;  ///< checks node.register's signature
    const CatalogAdopter* adopter = nullptr;
    const Catalog* catalog = nullptr;
    LoadCoordinator* coordinator = nullptr;
    NodeRegistry* registry = nullptr;
    JobTable* jobs = nullptr;
    HeadMetrics* metrics = nullptr;
    const FlightInfoPlanner* planner = nullptr;
    /// Starts (or joins) a load (HeadServer::Load).
    std::function<arrow::Result<std::shared_ptr<LoadJob>>(const LoadRequest&)> load;
    /// Reloads a cached dataset's table (HeadServer::Refresh).
    std::function<arrow::Result<std::shared_ptr<LoadJob>>(const std::string&)> refresh;
    /// The "status" action's answer (HeadServer::ClusterStatus).
    std::function<nlohmann::json()> status;
  };

  explicit HeadActions(Parts parts) : parts_(std::move(parts)) {}

  /// ListActions' answer: every action with its body.
  static std::vector<arrow::flight::ActionType> Types();
  /// Runs `action`; NotImplemented for an unknown one. Errors are not yet
  /// wire statuses (DoAction makes them so).
  arrow::Status Run(const arrow::flight::ServerCallContext& context,
                    const arrow::flight::Action& action,
                    std::unique_ptr<arrow::flight::ResultStream>* result) const;

 private:
  arrow::Status Register(const arrow::flight::ServerCallContext& context,
                         const std::string& body) const;
  arrow::Status ReportJob(const std::string& body) const;

  const Parts parts_;
};

}  // namespace icefloe
