// The head's Flight service: the front door consumers ask for endpoints, and
// the admin actions. It is never on the data path.
//
// A thin adapter: requests are parsed by protocol/ (typed messages), loads
// and evictions are decided by LoadCoordinator, node liveness is
// NodeRegistry's, and datasets live in the Catalog. GetFlightInfo takes a CMD
// descriptor (range, epoch or rows), PATH [name] or Kubeflow's PATH [index,
// total], and encodes what FlightInfoPlanner plans for it. Actions (JSON
// bodies, docs/protocol.md) are HeadActions'; the start-up load (Kubeflow
// mode) is StartupLoad's; how tables are read is table_access.h's.
//
// The catalog lives on the nodes too (head/core/adopter.h): a restarted head
// adopts what its nodes hold, and answers catalog reads and loads with
// Unavailable while it is still recovering (at most adopter.recover_s).
//
// With follow.period_s (--follow), a Follower (head/core/follow.h) reloads datasets
// whose table has a new snapshot.
//
// Threads it owns (ARCHITECTURE.md): the node-call pool, the registry's
// poller, the adopter's thread, the follower's thread, the coordinator's load
// pool. StartBackground() starts the poller, the adopter and the follower;
// StopBackground() (also the destructor) cancels loads and joins them all.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <arrow/flight/server.h>
#include <nlohmann/json.hpp>

#include "icefloe/common/security.h"
#include "icefloe/common/thread_pool.h"
#include "icefloe/head/core/adopter.h"
#include "icefloe/head/core/catalog.h"
#include "icefloe/head/core/flight_info_planner.h"
#include "icefloe/head/core/follow.h"
#include "icefloe/head/core/jobs.h"
#include "icefloe/head/core/load_coordinator.h"
#include "icefloe/head/core/node_rpc.h"
#include "icefloe/head/core/registry.h"
#include "icefloe/head/core/startup_load.h"
#include "icefloe/head/service/head_actions.h"
#include "icefloe/head/service/head_metrics.h"
#include "icefloe/iceberg/file_io.h"
#include "icefloe/protocol/messages.h"

namespace icefloe {

struct HeadOptions {
  std::vector<std::string> nodes;  ///< static data node locations
  SecurityOptions security;
  iceberg::FileIOOptions io;
  RegistryOptions registry;
  LoadOptions loads;
  /// Catalog recovery from the nodes; recover_s 0 (a new cluster) serves at once.
  AdopterOptions adopter;
  /// Threads for calls to nodes (polls, load fan-outs, evicts), and how many
  /// calls may wait for one.
  int32_t node_call_threads = 16;
  int32_t max_queued_node_calls = 4096;
  /// Bounds of the per-job stall table (job.report).
  JobOptions jobs;
  /// Dataset that Kubeflow PATH descriptors [index, total] shard.
  std::string default_dataset;
  /// A dataset to load at start-up (Kubeflow mode), retried with backoff
  /// until `startup_timeout_s`; /ready waits for it.
  std::optional<LoadRequest> startup_load;
  double startup_timeout_s = 600;
  /// Following tables (--follow): period_s 0 is off.
  FollowOptions follow;
  /// Reads a table's followed snapshot; empty: its metadata.json over `io`.
  TableProbe table_probe;
  /// Plans scans; empty: iceberg::PlanScan over `io` (tests substitute one).
  ScanPlanner planner;
  /// Calls nodes; empty: FlightNodeRpc with `security` (tests substitute one).
  std::shared_ptr<NodeRpc> rpc;
};

class HeadServer : public arrow::flight::FlightServerBase {
 public:
  explicit HeadServer(HeadOptions options);
  ~HeadServer() override;

  /// Polls the nodes once, then starts the poller. Call after Init().
  void StartBackground();
  /// Cancels running loads and joins every background thread. Idempotent.
  void StopBackground();

  /// Starts (or joins) a load; see LoadCoordinator::Load.
  arrow::Result<std::shared_ptr<LoadJob>> Load(const LoadRequest& request);
  /// Loads the newest snapshot of the table cached as `name` with the
  /// arguments it was loaded with (a pinned snapshot or time dropped, a
  /// branch followed; a metadata.json source moves to the table's newest
  /// metadata file): only what changed is read (head/core/refresh.h). KeyError for
  /// an unknown name.
  arrow::Result<std::shared_ptr<LoadJob>> Refresh(const std::string& name);
  /// Loads options.startup_load, retrying with backoff until its deadline.
  /// Returns the final error when it never succeeds.
  arrow::Status RunStartupLoad() { return startup_.Run(); }

  /// Nodes, datasets (with slices per node), loads running and recently
  /// finished, jobs reading (job.report), readiness.
  nlohmann::json ClusterStatus() const;
  /// The status page (GET /): ClusterStatus() as HTML (status_page.h).
  std::string StatusPage() const;
  /// Ready when at least one node is alive, no static node is missing and the
  /// start-up dataset (if any) is loaded.
  std::pair<bool, std::string> Ready() const;
  /// Prometheus text for /metrics (head_metrics.h).
  std::string Metrics() const;
  const NodeRegistry& registry() const { return registry_; }

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
  /// `kind` names the descriptor for metrics.
  arrow::Result<arrow::flight::FlightInfo> Info(const arrow::flight::FlightDescriptor& request,
                                                const char** kind) const;
  void RefreshMetrics() const;
  arrow::Result<std::shared_ptr<const DatasetEntry>> DatasetOf(
      const arrow::flight::FlightDescriptor& descriptor) const;

  const HeadOptions options_;
  const std::string ticket_key_;
  const uint64_t first_generation_;  // this head's first: newer than any before a restart
  iceberg::FileIO io_;
  Catalog catalog_;
  // Metrics and job reports change on const paths (a scrape, a status).
  mutable HeadMetrics metrics_;
  mutable JobTable jobs_;
  // Declaration order is destruction order in reverse: the coordinator and
  // the registry use the pool and the rpc, so they go first.
  std::shared_ptr<NodeRpc> rpc_;
  ThreadPool calls_;
  NodeRegistry registry_;
  LoadCoordinator coordinator_;
  CatalogAdopter adopter_;
  Follower follower_;  // after the coordinator: it stops first
  FlightInfoPlanner planner_;
  HeadActions actions_;
  StartupLoad startup_;
};

}  // namespace icefloe
