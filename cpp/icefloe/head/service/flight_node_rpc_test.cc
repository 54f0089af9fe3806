// FlightNodeRpc against a real Flight server on 127.0.0.1 that is shut down
// and started again on the same port, as a node restarted at its old address
// (issue 42, defect 3): the head's next call reaches it at once.
#include "icefloe/head/service/flight_node_rpc.h"

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <arrow/flight/server.h>
#include <gtest/gtest.h>

#include "icefloe/common/wire_status.h"
#include "icefloe/protocol/fields.h"

namespace icefloe {
namespace {

namespace flight = arrow::flight;
using namespace std::chrono_literals;

// A data node that answers node.status only.
class StatusServer : public flight::FlightServerBase {
 public:
  arrow::Status DoAction(const flight::ServerCallContext&, const flight::Action& action,
                         std::unique_ptr<flight::ResultStream>* result) override {
    if (action.type != "node.status") return arrow::Status::NotImplemented(action.type);
    NodeStatus status;
    status.location = "grpc://127.0.0.1";
    *result = std::make_unique<flight::SimpleResultStream>(
        std::vector<flight::Result>{{arrow::Buffer::FromString(Dump(status.ToJson()))}});
    return arrow::Status::OK();
  }
};

arrow::Result<std::unique_ptr<StatusServer>> Serve(int port) {
  ARROW_ASSIGN_OR_RAISE(auto location, flight::Location::ForGrpcTcp("127.0.0.1", port));
  auto server = std::make_unique<StatusServer>();
  ARROW_RETURN_NOT_OK(server->Init(flight::FlightServerOptions(location)));
  return server;
}

arrow::Status Stop(std::unique_ptr<StatusServer> server) {
  ARROW_RETURN_NOT_OK(server->Shutdown());
  return server->Wait();
}

TEST(FlightNodeRpcTest, ANodeRestartedAtItsAddressIsReachedAtOnce) {
  FlightNodeRpc rpc{SecurityOptions{}};
  auto server = Serve(0);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const int port = (*server)->port();
  const std::string node = "grpc://127.0.0.1:" + std::to_string(port);
  ASSERT_TRUE(rpc.Status(node, 5.0).ok());

  ASSERT_TRUE(Stop(std::move(*server)).ok());
  // Down for a while, polled as the head's registry polls it: a cached
  // channel's reconnect backoff grows past a second meanwhile.
  const auto until = std::chrono::steady_clock::now() + 3s;
  int failed = 0;
  while (std::chrono::steady_clock::now() < until) {
    auto down = rpc.Status(node, 5.0);
    ASSERT_FALSE(down.ok());
    EXPECT_TRUE(IsPeerUnavailable(down.status())) << down.status().ToString();
    ++failed;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_GT(failed, 1);

  // Back at the same address: the very next call reaches it.
  auto back = Serve(port);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  auto status = rpc.Status(node, 5.0);
  EXPECT_TRUE(status.ok()) << status.status().ToString();
  ASSERT_TRUE(Stop(std::move(*back)).ok());
}

TEST(FlightNodeRpcTest, ReconnectWithoutAClientIsANoOp) {
  FlightNodeRpc rpc{SecurityOptions{}};
  rpc.Reconnect("grpc://127.0.0.1:1");  // never called: nothing kept, nothing to close
  auto server = Serve(0);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string node = "grpc://127.0.0.1:" + std::to_string((*server)->port());
  ASSERT_TRUE(rpc.Status(node, 5.0).ok());
  rpc.Reconnect(node);  // a registration after a failure: the next call dials afresh
  EXPECT_TRUE(rpc.Status(node, 5.0).ok());
  ASSERT_TRUE(Stop(std::move(*server)).ok());
}

}  // namespace
}  // namespace icefloe
