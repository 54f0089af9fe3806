// The head's view of its data nodes: who they are, whether they are alive,
// and what they last reported (memory, datasets, loads).
//
// Nodes come from a static list (flags/environment) or register themselves
// (action "node.register", repeated as a heartbeat). A poller thread asks
// every known node for node.status in parallel every poll_interval_s, each
// call bounded by call_timeout_s; a node not heard from for dead_after_s, or
// whose reply does not parse, is not alive and receives no new work.
//
// A node that refuses the head's node actions (Unauthorized: no or another
// cluster secret; a Kubeflow worker that does not take this head for its
// leader) answers, but is of no use: the registry logs it at once, one line
// per node per distinct reason, keeps the node's words for /ready, and polls
// it again with exponential backoff (poll_interval_s doubling up to
// refused_backoff_max_s) until it accepts.
//
// Thread-safe. Owns one thread (the poller) between Start() and Stop().
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "icefloe/common/background_loop.h"
#include "icefloe/common/log_once.h"
#include "icefloe/common/mutex.h"
#include "icefloe/common/thread_pool.h"
#include "icefloe/head/core/node_rpc.h"
#include "icefloe/protocol/messages.h"
#include "icefloe/protocol/replies.h"

namespace icefloe {

enum class NodeState { kUnknown, kAlive, kDead };
const char* NodeStateName(NodeState state);

struct NodeInfo {
  std::string location;
  NodeState state = NodeState::kUnknown;
  NodeStatus status;  ///< the node's last good report
  std::chrono::steady_clock::time_point last_seen{};
  /// When the head asked for `status` (a poll's start; zero after a
  /// self-sent heartbeat, whose age is unknown): datasets published after
  /// that may be missing from it without being lost (heal).
  std::chrono::steady_clock::time_point status_requested_at{};
  std::string last_error;
  bool is_static = false;
  /// A node that sent a malformed reply stays out until then, whatever its polls say.
  std::chrono::steady_clock::time_point quarantined_until{};
  /// Why the node refuses the head's node actions, in its words (empty: it
  /// does not, or has not been asked yet).
  std::string refused;
  int refusals = 0;  ///< refused polls in a row
  /// A refusing node is not polled again before then (backoff).
  std::chrono::steady_clock::time_point next_poll_at{};

  /// Bytes this node can still take, in memory and on its disk tier (a large
  /// number when it has no memory limit): in memory, what its status says a
  /// load fills with rows (row_memory_bytes) less what it uses.
  int64_t available_bytes() const;
  /// Of those, on its disk tier.
  int64_t disk_available_bytes() const;
};

struct RegistryOptions {
  double poll_interval_s = 1.0;
  double dead_after_s = 5.0;
  double call_timeout_s = 5.0;
  double quarantine_s = 60.0;          ///< how long a node that sent a malformed reply stays out
  double refused_backoff_max_s = 8.0;  ///< longest wait between polls of a refusing node
};

/// Whether a heartbeat from a node the registry holds as `before` is a
/// re-registration after a failure (it was dead, or a poll or call failed
/// since its last good report): the head then reconnects to it
/// (NodeRpc::Reconnect).
bool BackAfterFailure(const NodeInfo& before);

/// Seconds before polling again a node that refused `refusals` polls in a row
/// (>= 1): poll_interval_s doubled each time, at most refused_backoff_max_s.
double RefusedPollDelay(const RegistryOptions& options, int refusals);

class NodeRegistry {
 public:
  /// `rpc` and `calls` (the pool node calls run on) outlive the registry.
  NodeRegistry(NodeRpc* rpc, ThreadPool* calls, RegistryOptions options);
  ~NodeRegistry();

  /// Adds a node the head should poll (static list).
  void AddStatic(const std::string& location) EXCLUDES(mu_);
  /// Records a node's (already parsed) self-registration or heartbeat; one
  /// back after a failure (BackAfterFailure) gets a new connection first.
  void Heartbeat(const std::string& location, const NodeStatus& status) EXCLUDES(mu_);
  /// Marks a node dead at once (a call to it failed); a malformed reply also
  /// keeps it out for quarantine_s.
  void MarkDead(const std::string& location, const arrow::Status& error) EXCLUDES(mu_);

  /// Polls every node once now, in parallel (also done by the poller); a
  /// refusing node only when its backoff has passed.
  void PollAll() EXCLUDES(mu_);
  /// Runs `fn` on the poller thread after each of its polls (the head's heal
  /// check). Set before Start().
  void SetAfterPoll(std::function<void()> fn) EXCLUDES(mu_);
  void Start() EXCLUDES(mu_);
  void Stop() EXCLUDES(mu_);

  std::vector<NodeInfo> Snapshot() const EXCLUDES(mu_);
  std::vector<NodeInfo> Alive() const EXCLUDES(mu_);
  /// Locations of the alive nodes (cheap: no statuses copied).
  std::set<std::string> AliveLocations() const EXCLUDES(mu_);
  /// Every node, as status reports it.
  std::vector<ClusterNode> Status() const EXCLUDES(mu_);

 private:
  void Update(const std::string& location, const NodeStatus& status,
              std::chrono::steady_clock::time_point requested_at) EXCLUDES(mu_);
  void Failed(const std::string& location, const arrow::Status& error) EXCLUDES(mu_);
  // Records a refusal: logs it once per reason, backs the next poll off.
  void Refused(NodeInfo& n, const arrow::Status& error) REQUIRES(mu_);

  NodeRpc* const rpc_;
  ThreadPool* const calls_;
  const RegistryOptions options_;
  mutable Mutex mu_;
  std::map<std::string, NodeInfo> nodes_ GUARDED_BY(mu_);
  std::function<void()> after_poll_ GUARDED_BY(mu_);
  LogOnce refusals_logged_;
  BackgroundLoop poller_;  // last: stops before what its polls use
};

}  // namespace icefloe
