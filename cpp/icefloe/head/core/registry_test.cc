// NodeRegistry against a node that refuses the head's node actions: the
// refusal is kept in the node's words, polls back off exponentially (and
// boundedly), and a node that accepts again is alive at its next poll.
#include "icefloe/head/core/registry.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <arrow/flight/types.h>
#include <gtest/gtest.h>

#include "icefloe/common/wire_status.h"

namespace icefloe {
namespace {

constexpr const char* kNode = "grpc://10.0.0.7:50051";
constexpr const char* kWords =
    "action 'node.status' is only accepted from job-cache-0.job-cache.ns (this worker's leader, "
    "LWS_LEADER_ADDRESS; it has no cluster secret), which resolves to 10.0.0.5, but the call "
    "came from 10.0.0.9";

// One node whose node.status is refused (as a Kubeflow worker refuses a head
// it does not take for its leader) until accept() is called.
class RefusingNode : public NodeRpc {
 public:
  std::atomic<int> calls{0};
  std::atomic<bool> accepting{false};

  arrow::Result<NodeStatus> Status(const std::string& node, double) override {
    ++calls;
    if (!accepting) {
      // What FlightNodeRpc makes of the worker's answer.
      return PeerError(
          arrow::flight::MakeFlightError(arrow::flight::FlightStatusCode::Unauthorized,
                                         std::string(kWords) + ". Detail: Unauthorized"),
          node);
    }
    NodeStatus s;
    s.location = node;
    return s;
  }
  arrow::Result<NodeLoadState> StartLoad(const std::string&, const NodeLoadRequest&,
                                         double) override {
    return arrow::Status::NotImplemented("not in this test");
  }
  arrow::Result<NodeLoadState> LoadStatus(const std::string&, const NodeLoadStatusRequest&,
                                          double) override {
    return arrow::Status::NotImplemented("not in this test");
  }
  arrow::Result<NodeCommitResult> Commit(const std::string&, const NodeCommit&, double) override {
    return arrow::Status::NotImplemented("not in this test");
  }
  arrow::Result<NodeEvictResult> Evict(const std::string&, const NodeEvict&, double) override {
    return arrow::Status::NotImplemented("not in this test");
  }
};

// A node that can be taken down and brought back: while down, node.status
// fails as FlightNodeRpc reports a refused connection. Counts reconnects.
class RestartingNode : public RefusingNode {
 public:
  std::atomic<bool> down{false};
  std::atomic<int> reconnects{0};

  arrow::Result<NodeStatus> Status(const std::string& node, double) override {
    if (down) {
      return PeerError(arrow::flight::MakeFlightError(arrow::flight::FlightStatusCode::Unavailable,
                                                      "failed to connect: Connection refused"),
                       node);
    }
    NodeStatus s;
    s.location = node;
    return s;
  }
  void Reconnect(const std::string&) override { ++reconnects; }
};

TEST(BackAfterFailureTest, ADeadNodeOrOneWithAFailureSinceItsLastReport) {
  NodeInfo n;
  n.state = NodeState::kAlive;
  EXPECT_FALSE(BackAfterFailure(n));  // a heartbeat of a healthy node
  n.last_error = "node grpc://n:1 is unreachable: Connection refused";
  EXPECT_TRUE(BackAfterFailure(n));  // back before the head held it dead
  n.last_error.clear();
  n.state = NodeState::kDead;
  EXPECT_TRUE(BackAfterFailure(n));
  n.state = NodeState::kUnknown;  // a static node never heard from
  EXPECT_FALSE(BackAfterFailure(n));
}

// Issue 42, defect 3: a node restarted at its old address registers again;
// the head drops its connection to it then (not at every heartbeat).
TEST(RegistryReconnectTest, ANodeRegisteringAfterAFailureIsReconnected) {
  RestartingNode rpc;
  ThreadPool calls("calls", 2, 16);
  NodeRegistry registry(&rpc, &calls, RegistryOptions{});
  NodeStatus status;
  status.location = kNode;
  registry.Heartbeat(kNode, status);  // first registration: nothing to reset
  registry.PollAll();
  registry.Heartbeat(kNode, status);  // healthy heartbeats: the connection stays
  EXPECT_EQ(rpc.reconnects.load(), 0);

  rpc.down = true;  // SIGKILLed: the head's poll fails
  registry.PollAll();
  EXPECT_FALSE(registry.Snapshot()[0].last_error.empty());
  rpc.down = false;  // restarted at the same address: it registers again
  registry.Heartbeat(kNode, status);
  EXPECT_EQ(rpc.reconnects.load(), 1);
  auto n = registry.Snapshot()[0];
  EXPECT_EQ(n.state, NodeState::kAlive);
  EXPECT_TRUE(n.last_error.empty());
  registry.Heartbeat(kNode, status);  // its next heartbeat is an ordinary one
  EXPECT_EQ(rpc.reconnects.load(), 1);

  // A node held dead (a load's call failed) is reconnected when it is back.
  registry.MarkDead(kNode, arrow::Status::IOError("node.load failed"));
  registry.Heartbeat(kNode, status);
  EXPECT_EQ(rpc.reconnects.load(), 2);
}

TEST(RefusedPollDelayTest, DoublesFromThePollIntervalUpToTheBound) {
  RegistryOptions options;
  options.poll_interval_s = 1.0;
  options.refused_backoff_max_s = 8.0;
  EXPECT_DOUBLE_EQ(RefusedPollDelay(options, 1), 1.0);
  EXPECT_DOUBLE_EQ(RefusedPollDelay(options, 2), 2.0);
  EXPECT_DOUBLE_EQ(RefusedPollDelay(options, 3), 4.0);
  EXPECT_DOUBLE_EQ(RefusedPollDelay(options, 4), 8.0);
  EXPECT_DOUBLE_EQ(RefusedPollDelay(options, 5), 8.0);
  EXPECT_DOUBLE_EQ(RefusedPollDelay(options, 1000000), 8.0);  // no overflow
  options.refused_backoff_max_s = 0.1;                        // never below the poll interval
  EXPECT_DOUBLE_EQ(RefusedPollDelay(options, 3), 1.0);
}

TEST(RegistryRefusalTest, KeepsTheNodesWordsAndBacksOff) {
  RefusingNode rpc;
  ThreadPool calls("calls", 2, 16);
  RegistryOptions options;
  options.poll_interval_s = 1.0;  // the first retry waits at least this long
  NodeRegistry registry(&rpc, &calls, options);
  registry.AddStatic(kNode);

  registry.PollAll();
  auto nodes = registry.Snapshot();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].refused, kWords);  // the worker's words, no gRPC preamble
  EXPECT_EQ(nodes[0].refusals, 1);
  EXPECT_NE(nodes[0].state, NodeState::kAlive);
  EXPECT_EQ(registry.Status()[0].refused, kWords);

  // Polls within the backoff do not call the refusing node again.
  for (int i = 0; i < 20; ++i) registry.PollAll();
  EXPECT_EQ(rpc.calls.load(), 1);
  nodes = registry.Snapshot();
  EXPECT_GT(nodes[0].next_poll_at - std::chrono::steady_clock::now(),
            std::chrono::milliseconds(500));
}

TEST(RegistryRefusalTest, ANodeThatAcceptsAgainIsAliveAtItsNextPoll) {
  RefusingNode rpc;
  ThreadPool calls("calls", 2, 16);
  RegistryOptions options;
  options.poll_interval_s = 0.01;
  options.refused_backoff_max_s = 0.04;
  NodeRegistry registry(&rpc, &calls, options);
  registry.AddStatic(kNode);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  // Refused polls in a row grow the backoff up to its bound.
  while (registry.Snapshot()[0].refusals < 5) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    registry.PollAll();
    std::this_thread::yield();
  }
  EXPECT_FALSE(registry.Snapshot()[0].refused.empty());
  rpc.accepting = true;
  while (registry.Snapshot()[0].state != NodeState::kAlive) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    registry.PollAll();
    std::this_thread::yield();
  }
  auto n = registry.Snapshot()[0];
  EXPECT_TRUE(n.refused.empty());
  EXPECT_EQ(n.refusals, 0);
}

TEST(RegistryRefusalTest, ARefusedLoadCallCountsAsARefusal) {
  RefusingNode rpc;
  rpc.accepting = true;
  ThreadPool calls("calls", 2, 16);
  NodeRegistry registry(&rpc, &calls, RegistryOptions{});
  registry.AddStatic(kNode);
  registry.PollAll();
  ASSERT_EQ(registry.Snapshot()[0].state, NodeState::kAlive);
  // A load phase's call refused (e.g. a node restarted with another secret).
  registry.MarkDead(kNode, PeerError(arrow::flight::MakeFlightError(
                                         arrow::flight::FlightStatusCode::Unauthorized,
                                         std::string("gRPC returned unauthorized error, with "
                                                     "message: ") +
                                             kWords),  // gRPC's own words, without Flight's
                                     kNode));
  auto n = registry.Snapshot()[0];
  EXPECT_EQ(n.state, NodeState::kDead);
  EXPECT_EQ(n.refused, kWords);
}

// Placement counts a tier node's memory as the node's own rule does: the
// rows it keeps in memory (row_memory_bytes, its limit less what it keeps
// free for serving and read-ahead), not its whole limit; the rest goes to disk.
TEST(NodeCapacityTest, ATierNodeOffersTheRowsItKeepsInMemoryAndItsFreeDisk) {
  NodeInfo n;
  n.status.memory_limit_bytes = 16 << 20;
  n.status.row_memory_bytes = 10 << 20;
  n.status.memory_used_bytes = 4 << 20;
  n.status.disk_limit_bytes = 3 << 20;
  n.status.disk_used_bytes = 1 << 20;
  EXPECT_EQ(n.disk_available_bytes(), 2 << 20);
  EXPECT_EQ(n.available_bytes(), (6 << 20) + (2 << 20));
  n.status.memory_used_bytes = 12 << 20;  // past its rows' share (serving, a gather)
  EXPECT_EQ(n.available_bytes(), 2 << 20);
}

// A node that does not say (one of a version before row_memory_bytes) keeps
// rows in all of its memory, as such nodes did.
TEST(NodeCapacityTest, ANodeThatDoesNotSayOffersItsWholeFreeMemory) {
  NodeInfo n;
  n.status.memory_limit_bytes = 16 << 20;
  n.status.memory_used_bytes = 4 << 20;
  EXPECT_EQ(n.available_bytes(), 12 << 20);
  n.status.memory_limit_bytes = 0;  // no limit
  EXPECT_EQ(n.available_bytes(), int64_t{1} << 60);
}

// The field as a node sends it reaches the registry.
TEST(NodeCapacityTest, RowMemoryBytesTravelsInTheNodesStatus) {
  NodeStatus s;
  s.memory_limit_bytes = 16 << 20;
  s.row_memory_bytes = 10 << 20;
  auto back = NodeStatus::Parse(s.ToJson().dump());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->row_memory_bytes, 10 << 20);
  auto old = NodeStatus::Parse(R"({"memory_limit_bytes": 100})");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_FALSE(old->row_memory_bytes.has_value());
  EXPECT_FALSE(NodeStatus::Parse(R"({"row_memory_bytes": -1})").ok());
}

}  // namespace
}  // namespace icefloe
