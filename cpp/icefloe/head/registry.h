// The head's view of its data nodes: who they are, whether they are alive,
// and how much memory they have.
//
// Nodes come from a static list (flags/environment) or register themselves
// (action "node.register", repeated as a heartbeat). A background thread polls
// every known node's status with a bounded timeout; a node not heard from for
// `dead_after_s` is marked dead and receives no new work.
//
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <arrow/flight/client.h>
#include <nlohmann/json.hpp>

#include "icefloe/common/security.h"

namespace icefloe {

enum class NodeState { kUnknown, kAlive, kDead };
const char* NodeStateName(NodeState state);

struct NodeInfo {
  std::string location;
  NodeState state = NodeState::kUnknown;
  int64_t memory_limit_bytes = 0;
  int64_t memory_used_bytes = 0;
  std::chrono::steady_clock::time_point last_seen{};
  std::string last_error;
  nlohmann::json status;  ///< the node's last reported status
  bool is_static = false;
};

struct RegistryOptions {
  double poll_interval_s = 1.0;
  double dead_after_s = 5.0;
  double call_timeout_s = 5.0;
};

/// Calls actions on data nodes: keeps one Flight client per node, adds the
/// token and, for node-internal actions, the head's signature.
class NodeClients {
 public:
  explicit NodeClients(SecurityOptions security) : security_(std::move(security)) {}

  /// Runs `type` on the node at `location` and parses its single JSON result.
  arrow::Result<nlohmann::json> Call(const std::string& location, const std::string& type,
                                     const nlohmann::json& body, double timeout_s);

 private:
  arrow::Result<nlohmann::json> CallOnce(const std::string& location, const std::string& type,
                                         const nlohmann::json& body, double timeout_s);
  arrow::Result<std::shared_ptr<arrow::flight::FlightClient>> Client(const std::string& location);

  SecurityOptions security_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<arrow::flight::FlightClient>> clients_;
};

class NodeRegistry {
 public:
  NodeRegistry(std::shared_ptr<NodeClients> clients, RegistryOptions options);
  ~NodeRegistry();

  /// Adds a node the head should poll (static list).
  void AddStatic(const std::string& location);
  /// Records a node's self-registration / heartbeat with its status.
  void Heartbeat(const std::string& location, const nlohmann::json& status);
  /// Marks a node dead at once (e.g. a call to it failed).
  void MarkDead(const std::string& location, const std::string& error);

  /// Polls every node once now (also done periodically by Start()).
  void PollAll();
  void Start();
  void Stop();

  std::vector<NodeInfo> Snapshot() const;
  std::vector<NodeInfo> Alive() const;
  nlohmann::json ToJson() const;

 private:
  void Update(const std::string& location, const nlohmann::json& status);

  std::shared_ptr<NodeClients> clients_;
  RegistryOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, NodeInfo> nodes_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread poller_;
};

}  // namespace icefloe
