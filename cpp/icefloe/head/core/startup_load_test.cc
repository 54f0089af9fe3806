// StartupLoad without a server: nothing to load, an error that retrying
// cannot heal, a deadline passed, and a stop while waiting for the nodes.
#include "icefloe/head/core/startup_load.h"

#include <gtest/gtest.h>

#include "icefloe/head/core/silent_node_rpc.h"

namespace icefloe {
namespace {

constexpr const char* kNode = "grpc://10.0.0.1:50051";

class StartupLoadTest : public ::testing::Test {
 protected:
  void NodeAlive() {
    NodeStatus status;
    status.location = kNode;
    registry_.Heartbeat(kNode, status);
  }

  // A start-up load of "d" whose every try fails with `error`.
  StartupLoad Failing(
      arrow::Status error, double timeout_s = 600,
      StartupLoad::WhyWaitingFn why_waiting = [] { return "no node"; }) {
    LoadRequest request;
    request.name = "d";
    request.source = "file:///tables/d";
    return StartupLoad(
        request, timeout_s, &registry_, &adopter_,
        [this, error](const LoadRequest&) -> arrow::Result<std::shared_ptr<LoadJob>> {
          ++tries_;
          return error;
        },
        std::move(why_waiting));
  }

  SilentNodeRpc rpc_;
  ThreadPool calls_{"startup-test calls", 1, 16};
  NodeRegistry registry_{&rpc_, &calls_, RegistryOptions{}};
  Catalog catalog_;
  // recover_s 0: a new cluster, never recovering.
  CatalogAdopter adopter_{AdopterOptions{},
                          &rpc_,
                          &calls_,
                          &registry_,
                          &catalog_,
                          [](const std::string&) { return false; },
                          1};
  int tries_ = 0;
};

TEST_F(StartupLoadTest, NothingToLoad) {
  StartupLoad startup(std::nullopt, 600, &registry_, &adopter_, nullptr, nullptr);
  EXPECT_TRUE(startup.Run().ok());
  EXPECT_EQ(startup.state(), "not started");
}

TEST_F(StartupLoadTest, AnErrorInTheRequestIsFinalAtOnce) {
  NodeAlive();
  auto startup = Failing(arrow::Status::Invalid("no table at file:///tables/d"));
  EXPECT_EQ(startup.Run().ToString(), "Invalid: no table at file:///tables/d");
  EXPECT_EQ(tries_, 1);
  EXPECT_EQ(startup.state(), "failed: Invalid: no table at file:///tables/d");
}

TEST_F(StartupLoadTest, AFlakyStoragePastTheDeadlineFailsNamingTheDataset) {
  NodeAlive();
  auto startup = Failing(arrow::Status::IOError("storage timed out"), /*timeout_s=*/0);
  EXPECT_EQ(startup.Run().ToString(),
            "IOError: start-up load of 'd' did not succeed within 0.000000s: storage timed out");
  EXPECT_EQ(tries_, 1);
  EXPECT_EQ(startup.state(), "failed: IOError: storage timed out");
}

TEST_F(StartupLoadTest, StopWhileWaitingForTheNodesCancels) {
  // No node is alive: the load waits for them, asking why; a stop comes then.
  StartupLoad* self = nullptr;
  auto startup = Failing(arrow::Status::IOError("never tried"), 600, [&self] {
    self->Stop();
    return std::string("no data node registered");
  });
  self = &startup;
  EXPECT_EQ(startup.Run().ToString(), "Cancelled: shutting down");
  EXPECT_EQ(tries_, 0);
  EXPECT_EQ(startup.state(), "waiting for every data node to answer");
}

}  // namespace
}  // namespace icefloe
