#include "icefloe/head/registry.h"

#include "icefloe/common/log.h"
#include "icefloe/common/wire_status.h"

namespace icefloe {

namespace flight = arrow::flight;
using json = nlohmann::json;

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

arrow::Result<std::shared_ptr<flight::FlightClient>> NodeClients::Client(
    const std::string& location) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = clients_.find(location);
  if (it != clients_.end()) return it->second;
  ARROW_ASSIGN_OR_RAISE(auto loc, flight::Location::Parse(location));
  ARROW_ASSIGN_OR_RAISE(auto client, flight::FlightClient::Connect(loc, ClientOptions(security_)));
  std::shared_ptr<flight::FlightClient> shared = std::move(client);
  clients_[location] = shared;
  return shared;
}

arrow::Result<json> NodeClients::Call(const std::string& location, const std::string& type,
                                      const json& body, double timeout_s) {
  auto result = CallOnce(location, type, body, timeout_s);
  if (!result.ok()) return PeerError(result.status(), location);
  return result;
}

arrow::Result<json> NodeClients::CallOnce(const std::string& location, const std::string& type,
                                          const json& body, double timeout_s) {
  ARROW_ASSIGN_OR_RAISE(auto client, Client(location));
  std::string payload = body.dump();
  auto options = CallOptions(security_, timeout_s);
  std::string key = security_.TicketKey();
  if (!key.empty())
    options.headers.emplace_back(kActionSignatureHeader, SignAction(key, type, payload));
  flight::Action action{type, arrow::Buffer::FromString(payload)};
  ARROW_ASSIGN_OR_RAISE(auto stream, client->DoAction(options, action));
  ARROW_ASSIGN_OR_RAISE(auto result, stream->Next());
  ARROW_RETURN_NOT_OK(stream->Drain());
  if (!result) return arrow::Status::IOError("node ", location, " returned no result for ", type);
  json j = json::parse(result->body->ToString(), nullptr, false);
  if (j.is_discarded()) return arrow::Status::IOError("node ", location, " returned bad JSON");
  return j;
}

NodeRegistry::NodeRegistry(std::shared_ptr<NodeClients> clients, RegistryOptions options)
    : clients_(std::move(clients)), options_(options) {}

NodeRegistry::~NodeRegistry() { Stop(); }

void NodeRegistry::AddStatic(const std::string& location) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& n = nodes_[location];
  n.location = location;
  n.is_static = true;
}

void NodeRegistry::Update(const std::string& location, const json& status) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& n = nodes_[location];
  n.location = location;
  if (n.state != NodeState::kAlive) LogInfo("node alive", {{"node", location}});
  n.state = NodeState::kAlive;
  n.last_seen = std::chrono::steady_clock::now();
  n.memory_limit_bytes = status.value("memory_limit_bytes", int64_t{0});
  n.memory_used_bytes = status.value("memory_used_bytes", int64_t{0});
  n.last_error.clear();
  n.status = status;
}

void NodeRegistry::Heartbeat(const std::string& location, const json& status) {
  Update(location, status);
}

void NodeRegistry::MarkDead(const std::string& location, const std::string& error) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(location);
  if (it == nodes_.end()) return;
  if (it->second.state != NodeState::kDead) {
    LogWarn("node dead", {{"node", location}, {"error", error}});
  }
  it->second.state = NodeState::kDead;
  it->second.last_error = error;
}

void NodeRegistry::PollAll() {
  std::vector<std::string> locations;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [loc, n] : nodes_) locations.push_back(loc);
  }
  for (const auto& loc : locations) {
    auto status = clients_->Call(loc, "node.status", json::object(), options_.call_timeout_s);
    if (status.ok()) {
      Update(loc, *status);
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    auto& n = nodes_[loc];
    n.last_error = status.status().message();
    auto silent = std::chrono::steady_clock::now() - n.last_seen;
    if (n.state == NodeState::kAlive &&
        silent > std::chrono::duration<double>(options_.dead_after_s)) {
      LogWarn("node dead", {{"node", loc}, {"error", n.last_error}});
      n.state = NodeState::kDead;
    }
  }
}

void NodeRegistry::Start() {
  poller_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      lock.unlock();
      PollAll();
      lock.lock();
      cv_.wait_for(lock, std::chrono::duration<double>(options_.poll_interval_s),
                   [this] { return stopping_; });
    }
  });
}

void NodeRegistry::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (poller_.joinable()) poller_.join();
}

std::vector<NodeInfo> NodeRegistry::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
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

json NodeRegistry::ToJson() const {
  json nodes = json::array();
  auto now = std::chrono::steady_clock::now();
  for (const auto& n : Snapshot()) {
    double ago = n.last_seen.time_since_epoch().count() == 0
                     ? -1
                     : std::chrono::duration<double>(now - n.last_seen).count();
    nodes.push_back({{"location", n.location},
                     {"state", NodeStateName(n.state)},
                     {"memory_limit_bytes", n.memory_limit_bytes},
                     {"memory_used_bytes", n.memory_used_bytes},
                     {"last_seen_s", ago},
                     {"error", n.last_error},
                     {"datasets", n.status.value("datasets", json::array())}});
  }
  return nodes;
}

}  // namespace icefloe
