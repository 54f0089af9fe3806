#include "icefloe/head/core/registry.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "icefloe/common/log.h"
#include "icefloe/common/wire_status.h"

namespace icefloe {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

const char* NodeStateName(NodeState state) {
  switch (state) {
    case NodeState::kAlive:
      return "alive";
    case NodeState::kDead:
      return "dead";
    default:
      return "unknown";
  }
}

int64_t NodeInfo::available_bytes() const {
  if (status.memory_limit_bytes <= 0) return int64_t{1} << 60;
  // The node's own rule for the rows it keeps in memory (the rest go to its
  // tier), not recomputed here: placement and the node agree by construction.
  const int64_t rows = status.row_memory_bytes.value_or(status.memory_limit_bytes);
  return std::max<int64_t>(0, rows - status.memory_used_bytes) + disk_available_bytes();
}

int64_t NodeInfo::disk_available_bytes() const {
  return std::max<int64_t>(0, status.disk_limit_bytes - status.disk_used_bytes);
}

double RefusedPollDelay(const RegistryOptions& options, int refusals) {
  const int doublings = std::clamp(refusals - 1, 0, 30);
  return std::min(options.poll_interval_s * std::ldexp(1.0, doublings),
                  std::max(options.poll_interval_s, options.refused_backoff_max_s));
}

NodeRegistry::NodeRegistry(NodeRpc* rpc, ThreadPool* calls, RegistryOptions options)
    : rpc_(rpc), calls_(calls), options_(options) {}

NodeRegistry::~NodeRegistry() { Stop(); }

void NodeRegistry::AddStatic(const std::string& location) {
  MutexLock lock(&mu_);
  auto& n = nodes_[location];
  n.location = location;
  n.is_static = true;
}

void NodeRegistry::Update(const std::string& location, const NodeStatus& status,
                          Clock::time_point requested_at) {
  MutexLock lock(&mu_);
  auto& n = nodes_[location];
  n.location = location;
  if (Clock::now() < n.quarantined_until) return;  // it answers, but not to be trusted yet
  if (n.refusals > 0) {
    LogInfo("node accepts the head's node actions again", {{"node", location}});
    refusals_logged_.Forget(location);
    n.refused.clear();
    n.refusals = 0;
    n.next_poll_at = {};
  }
  if (n.state != NodeState::kAlive) LogInfo("node alive", {{"node", location}});
  n.state = NodeState::kAlive;
  n.last_seen = Clock::now();
  n.last_error.clear();
  n.status = status;
  n.status_requested_at = requested_at;
}

bool BackAfterFailure(const NodeInfo& before) {
  return before.state == NodeState::kDead || !before.last_error.empty();
}

// A node that registers after the head failed to reach it was restarted (or
// its network healed): the head's old connection to it may be waiting out a
// reconnect backoff, so it is replaced before the node counts as alive.
void NodeRegistry::Heartbeat(const std::string& location, const NodeStatus& status) {
  bool back = false;
  {
    MutexLock lock(&mu_);
    auto it = nodes_.find(location);
    back = it != nodes_.end() && BackAfterFailure(it->second);
  }
  if (back) rpc_->Reconnect(location);
  Update(location, status, Clock::time_point{});
}

void NodeRegistry::MarkDead(const std::string& location, const arrow::Status& error) {
  MutexLock lock(&mu_);
  auto it = nodes_.find(location);
  if (it == nodes_.end()) return;
  NodeInfo& n = it->second;
  if (IsPeerRefusal(error)) {
    Refused(n, error);
    return;
  }
  if (n.state != NodeState::kDead) {
    LogWarn("node dead", {{"node", location}, {"error", error.message()}});
  }
  n.state = NodeState::kDead;
  n.last_error = error.message();
  if (IsBadNodeReply(error)) {
    n.quarantined_until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(options_.quarantine_s));
  }
}

// A failed poll: the node stays alive until silent for dead_after_s, unless
// it answered with garbage (then it is out at once, for a while).
void NodeRegistry::Failed(const std::string& location, const arrow::Status& error) {
  if (IsBadNodeReply(error) || IsPeerRefusal(error)) {
    MarkDead(location, error);
    return;
  }
  MutexLock lock(&mu_);
  auto it = nodes_.find(location);
  if (it == nodes_.end()) return;
  NodeInfo& n = it->second;
  n.last_error = error.message();
  const bool silent =
      Clock::now() - n.last_seen > std::chrono::duration<double>(options_.dead_after_s);
  if (n.state == NodeState::kAlive && silent) {
    LogWarn("node dead", {{"node", location}, {"error", n.last_error}});
    n.state = NodeState::kDead;
  }
}

// A node that refuses the head's node actions answers but does no work for
// it: said at once (once per reason), then asked again with backoff.
void NodeRegistry::Refused(NodeInfo& n, const arrow::Status& error) {
  n.refused = PeerWords(error, n.location);
  n.last_error = error.message();
  n.refusals = std::min(n.refusals + 1, 1000);
  const double retry_s = RefusedPollDelay(options_, n.refusals);
  n.next_poll_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(retry_s));
  if (n.state == NodeState::kAlive) n.state = NodeState::kDead;
  if (refusals_logged_.First(n.location, n.refused)) {
    LogWarn("node refuses the head's node actions",
            {{"node", n.location},
             {"reason", n.refused},
             {"retry_in_s", std::to_string(retry_s)},
             {"hint",
              "every server needs the same cluster secret; a Kubeflow worker without one "
              "takes node actions only from the addresses of LWS_LEADER_ADDRESS"}});
  }
}

void NodeRegistry::PollAll() {
  std::vector<std::string> locations;
  {
    MutexLock lock(&mu_);
    const auto now = Clock::now();
    for (const auto& [loc, n] : nodes_) {
      if (n.refusals == 0 || now >= n.next_poll_at) locations.push_back(loc);
    }
  }
  const double timeout_s = options_.call_timeout_s;
  const auto requested_at = Clock::now();
  NodeRpc* rpc = rpc_;
  auto results = FanOut<NodeStatus>(
      calls_, locations.size(),
      [rpc, locations, timeout_s](size_t i) { return rpc->Status(locations[i], timeout_s); },
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(timeout_s + 1.0)));
  for (size_t i = 0; i < locations.size(); ++i) {
    if (!results[i]) {
      Failed(locations[i],
             arrow::Status::IOError("no answer to node.status within ", timeout_s, "s"));
    } else if (!results[i]->ok()) {
      Failed(locations[i], results[i]->status());
    } else {
      Update(locations[i], **results[i], requested_at);
    }
  }
}

void NodeRegistry::SetAfterPoll(std::function<void()> fn) {
  MutexLock lock(&mu_);
  after_poll_ = std::move(fn);
}

void NodeRegistry::Start() {
  poller_.Start("head poller", BackgroundLoop::Duration(options_.poll_interval_s), [this] {
    std::function<void()> after_poll;
    {
      MutexLock lock(&mu_);
      after_poll = after_poll_;
    }
    PollAll();
    if (after_poll) after_poll();
  });
}

void NodeRegistry::Stop() { poller_.Stop(); }

std::vector<NodeInfo> NodeRegistry::Snapshot() const {
  MutexLock lock(&mu_);
  std::vector<NodeInfo> out;
  for (const auto& [loc, n] : nodes_) out.push_back(n);
  return out;
}

std::vector<NodeInfo> NodeRegistry::Alive() const {
  std::vector<NodeInfo> out;
  for (auto& n : Snapshot()) {
    if (n.state == NodeState::kAlive) out.push_back(std::move(n));
  }
  return out;
}

std::set<std::string> NodeRegistry::AliveLocations() const {
  MutexLock lock(&mu_);
  std::set<std::string> out;
  for (const auto& [loc, n] : nodes_) {
    if (n.state == NodeState::kAlive) out.insert(loc);
  }
  return out;
}

std::vector<ClusterNode> NodeRegistry::Status() const {
  std::vector<ClusterNode> nodes;
  auto now = Clock::now();
  for (const auto& n : Snapshot()) {
    std::optional<double> ago;
    if (n.last_seen.time_since_epoch().count() != 0) {
      ago = std::max(0.0, std::chrono::duration<double>(now - n.last_seen).count());
    }
    json datasets = json::array();
    for (const auto& d : n.status.datasets) {
      json dj = d.ToJson();
      dj.erase("record");  // the head's own catalog record (head/core/adopter.h): noise here
      datasets.push_back(std::move(dj));
    }
    nodes.push_back({n.location, NodeStateName(n.state), n.status.memory_limit_bytes,
                     n.status.memory_used_bytes, ago, n.last_error, n.refused, std::move(datasets),
                     n.status.disk_limit_bytes, n.status.disk_used_bytes, n.status.tier_ram_bytes,
                     n.status.tier_disk_bytes, n.status.prefetch_lead_batches});
  }
  return nodes;
}

}  // namespace icefloe
