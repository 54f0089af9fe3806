#include "icefloe/head/service/flight_node_rpc.h"

#include "icefloe/common/wire_status.h"

namespace icefloe {

namespace flight = arrow::flight;

arrow::Result<std::shared_ptr<flight::FlightClient>> FlightNodeRpc::Client(
    const std::string& node) {
  MutexLock lock(&mu_);
  auto it = clients_.find(node);
  if (it != clients_.end()) return it->second;
  ARROW_ASSIGN_OR_RAISE(auto location, flight::Location::Parse(node));
  ARROW_ASSIGN_OR_RAISE(auto client,
                        flight::FlightClient::Connect(location, ClientOptions(security_)));
  std::shared_ptr<flight::FlightClient> shared = std::move(client);
  clients_[node] = shared;
  return shared;
}

void FlightNodeRpc::Drop(const std::string& node,
                         const std::shared_ptr<flight::FlightClient>& client) {
  MutexLock lock(&mu_);
  auto it = clients_.find(node);
  if (it != clients_.end() && it->second == client) clients_.erase(it);
}

void FlightNodeRpc::Reconnect(const std::string& node) {
  std::shared_ptr<flight::FlightClient> old;
  {
    MutexLock lock(&mu_);
    auto it = clients_.find(node);
    if (it == clients_.end()) return;
    old = std::move(it->second);
    clients_.erase(it);
  }
  // Closed here, outside the lock, unless a call in flight still holds it.
}

arrow::Result<std::string> FlightNodeRpc::Call(const std::string& node, const std::string& type,
                                               const std::string& body, double timeout_s) {
  auto client = Client(node);
  if (!client.ok()) return PeerError(client.status(), node);
  auto result = CallOnce(**client, node, type, body, timeout_s);
  if (result.ok()) return result;
  arrow::Status error = PeerError(result.status(), node);
  // Its channel may now sit in a reconnect backoff of seconds: the next call
  // dials afresh.
  if (IsPeerUnavailable(error) && !IsBadNodeReply(error)) Drop(node, *client);
  return error;
}

arrow::Result<std::string> FlightNodeRpc::CallOnce(flight::FlightClient& client,
                                                   const std::string& node, const std::string& type,
                                                   const std::string& body, double timeout_s) {
  auto options = CallOptions(security_, timeout_s);
  if (!key_.empty())
    options.headers.emplace_back(kActionSignatureHeader, SignAction(key_, type, body));
  flight::Action action{type, arrow::Buffer::FromString(body)};
  ARROW_ASSIGN_OR_RAISE(auto stream, client.DoAction(options, action));
  ARROW_ASSIGN_OR_RAISE(auto result, stream->Next());
  ARROW_RETURN_NOT_OK(stream->Drain());
  if (!result || !result->body) {
    return BadNodeReply(node, type, arrow::Status::Invalid("no result"));
  }
  return result->body->ToString();
}

namespace {

// Parses a node's reply; a reply that does not parse is the node's fault.
template <typename T, typename Parse>
arrow::Result<T> Reply(const std::string& node, const std::string& action,
                       arrow::Result<std::string> body, Parse parse) {
  ARROW_ASSIGN_OR_RAISE(std::string text, std::move(body));
  arrow::Result<T> parsed = parse(text);
  if (!parsed.ok()) return BadNodeReply(node, action, parsed.status());
  return parsed;
}

arrow::Result<NodeLoadState> ParseLoadState(std::string_view text) {
  ARROW_ASSIGN_OR_RAISE(auto j, ParseJsonObject(text, "reply"));
  return NodeLoadState::FromJson(j, "reply");
}

}  // namespace

arrow::Result<NodeStatus> FlightNodeRpc::Status(const std::string& node, double timeout_s) {
  return Reply<NodeStatus>(node, "node.status", Call(node, "node.status", "{\"v\": 1}", timeout_s),
                           NodeStatus::Parse);
}

arrow::Result<NodeLoadState> FlightNodeRpc::StartLoad(const std::string& node,
                                                      const NodeLoadRequest& request,
                                                      double timeout_s) {
  return Reply<NodeLoadState>(node, "node.load",
                              Call(node, "node.load", Dump(request.ToJson()), timeout_s),
                              ParseLoadState);
}

arrow::Result<NodeLoadState> FlightNodeRpc::LoadStatus(const std::string& node,
                                                       const NodeLoadStatusRequest& request,
                                                       double timeout_s) {
  return Reply<NodeLoadState>(node, "node.load_status",
                              Call(node, "node.load_status", Dump(request.ToJson()), timeout_s),
                              ParseLoadState);
}

arrow::Result<NodeCommitResult> FlightNodeRpc::Commit(const std::string& node,
                                                      const NodeCommit& request, double timeout_s) {
  return Reply<NodeCommitResult>(node, "node.commit",
                                 Call(node, "node.commit", Dump(request.ToJson()), timeout_s),
                                 NodeCommitResult::Parse);
}

arrow::Result<NodeEvictResult> FlightNodeRpc::Evict(const std::string& node,
                                                    const NodeEvict& request, double timeout_s) {
  return Reply<NodeEvictResult>(node, "node.evict",
                                Call(node, "node.evict", Dump(request.ToJson()), timeout_s),
                                NodeEvictResult::Parse);
}

arrow::Status FlightNodeRpc::Record(const std::string& node, const NodeRecordRequest& request,
                                    double timeout_s) {
  return Call(node, "node.record", Dump(request.ToJson()), timeout_s).status();
}

}  // namespace icefloe
