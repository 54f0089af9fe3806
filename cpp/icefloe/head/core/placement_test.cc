#include "icefloe/head/core/placement.h"

#include <algorithm>
#include <random>
#include <set>

#include <gtest/gtest.h>

namespace icefloe {

namespace {

std::vector<PlacementNode> Nodes(int k, int64_t each) {
  std::vector<PlacementNode> nodes;
  for (int i = 0; i < k; ++i) nodes.push_back({"grpc://n" + std::to_string(i), each});
  return nodes;
}

}  // namespace

TEST(PlaceTasks, BalancesContiguousRunsWithinOneTask) {
  std::vector<int64_t> tasks(30, 100);
  tasks[7] = 250;
  auto p = *PlaceTasks(tasks, Nodes(3, 1 << 20), 1);
  int64_t total = 0;
  for (auto b : tasks) total += b;
  for (int64_t b : p.node_bytes) {
    EXPECT_LE(std::abs(b - total / 3), 250) << b;
  }
  // Contiguous: node index never decreases along the task order.
  for (size_t t = 1; t < tasks.size(); ++t) EXPECT_LE(p.task_nodes[t - 1][0], p.task_nodes[t][0]);
}

TEST(PlaceTasks, ReplicasLandOnDistinctNodes) {
  std::vector<int64_t> tasks(10, 10);
  auto p = *PlaceTasks(tasks, Nodes(3, 1000), 2);
  for (const auto& nodes : p.task_nodes) {
    ASSERT_EQ(nodes.size(), 2u);
    EXPECT_NE(nodes[0], nodes[1]);
  }
  EXPECT_EQ(p.node_bytes[0] + p.node_bytes[1] + p.node_bytes[2], 200);
}

TEST(PlaceTasks, RefusesWhatDoesNotFitNamingTheBytes) {
  auto r = PlaceTasks({600, 600}, Nodes(2, 500), 1);
  ASSERT_TRUE(r.status().IsOutOfMemory());
  EXPECT_NE(r.status().message().find("needs 1.2 KiB"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("1000 B available"), std::string::npos) << r.status();
  EXPECT_TRUE(PlaceTasks({1}, {}, 1).status().IsInvalid());
  EXPECT_TRUE(PlaceTasks({1}, Nodes(2, 10), 3).status().IsInvalid());
}

TEST(PlaceTasks, RespectsUnevenBudgets) {
  std::vector<PlacementNode> nodes = {{"a", 100}, {"b", 1000}, {"c", 100}};
  std::vector<int64_t> tasks(12, 50);
  auto p = *PlaceTasks(tasks, nodes, 1);
  for (size_t i = 0; i < nodes.size(); ++i) EXPECT_LE(p.node_bytes[i], nodes[i].available_bytes);
}

TEST(PlaceTasks, RandomizedNeverExceedsBudgetsAndPlacesEveryTask) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937 rng(seed);
  for (int iter = 0; iter < 500; ++iter) {
    int k = 1 + rng() % 5;
    int r = 1 + rng() % k;
    std::vector<PlacementNode> nodes;
    for (int i = 0; i < k; ++i) nodes.push_back({"n", static_cast<int64_t>(rng() % 5000)});
    std::vector<int64_t> tasks(rng() % 40);
    for (auto& t : tasks) t = rng() % 300;
    auto p = PlaceTasks(tasks, nodes, r);
    if (!p.ok()) {
      EXPECT_TRUE(p.status().IsOutOfMemory()) << p.status();
      continue;
    }
    for (int i = 0; i < k; ++i) EXPECT_LE(p->node_bytes[i], nodes[i].available_bytes);
    for (const auto& tn : p->task_nodes) {
      EXPECT_EQ(static_cast<int>(std::set<int32_t>(tn.begin(), tn.end()).size()), r);
    }
  }
}

}  // namespace icefloe
