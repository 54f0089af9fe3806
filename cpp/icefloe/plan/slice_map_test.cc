#include "icefloe/plan/slice_map.h"

#include <algorithm>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace icefloe {
namespace {

std::vector<uint64_t> Flatten(const std::vector<RowRange>& runs) {
  std::vector<uint64_t> rows;
  for (const RowRange& r : runs) {
    for (uint64_t i = r.start; i < r.stop; ++i) rows.push_back(i);
  }
  return rows;
}

// Slices covering [0, n), some empty, on nodes 0..2.
std::vector<SliceOwner> RandomSlices(std::mt19937_64& rng, uint64_t n) {
  std::vector<SliceOwner> slices;
  for (uint64_t start = 0; start < n;) {
    const uint64_t stop = std::min(n, start + rng() % 700);
    slices.push_back({{start, stop}, static_cast<int32_t>(rng() % 3)});
    start = stop;
  }
  return slices;
}

int32_t NodeOf(const std::vector<SliceOwner>& slices, uint64_t row) {
  for (const auto& s : slices) {
    if (s.rows.start <= row && row < s.rows.stop) return s.node;
  }
  return -1;
}

}  // namespace

TEST(GroupRunsByNode, SplitsAtSliceEdgesKeepingReadOrder) {
  const std::vector<SliceOwner> slices = {
      {{0, 10}, 0}, {{10, 20}, 1}, {{20, 30}, 1}, {{30, 40}, 0}};
  const auto groups = *GroupRunsByNode({{5, 25}, {35, 40}, {0, 3}, {12, 14}}, slices);
  ASSERT_EQ(groups.size(), 4u);
  EXPECT_EQ(groups[0].node, 0);
  EXPECT_EQ(groups[0].runs, (std::vector<RowRange>{{5, 10}}));
  EXPECT_EQ(groups[1].node, 1);
  EXPECT_EQ(groups[1].runs, (std::vector<RowRange>{{10, 25}}));
  EXPECT_EQ(groups[2].node, 0);
  EXPECT_EQ(groups[2].runs, (std::vector<RowRange>{{35, 40}, {0, 3}}));
  EXPECT_EQ(groups[3].node, 1);
  EXPECT_EQ(groups[3].runs, (std::vector<RowRange>{{12, 14}}));

  auto missing = GroupRunsByNode({{38, 41}}, slices);
  ASSERT_TRUE(missing.status().IsInvalid());
  EXPECT_NE(missing.status().message().find("row 40 is in no slice"), std::string::npos);
  EXPECT_TRUE(GroupRunsByNode({{0, 1}}, {{{10, 20}, 0}, {{0, 11}, 1}}).status().IsInvalid());
}

TEST(GroupRunsByNode, RandomizedGroupsListTheSameRowsOnTheirNodes) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  for (int iter = 0; iter < 500; ++iter) {
    const uint64_t n = 1 + rng() % 3000;
    const auto slices = RandomSlices(rng, n);
    std::vector<RowRange> runs(rng() % 20);
    for (auto& r : runs) {
      r.start = rng() % n;
      r.stop = r.start + rng() % (n - r.start + 1);
    }
    const auto groups = *GroupRunsByNode(runs, slices);
    std::vector<uint64_t> rows;
    for (size_t i = 0; i < groups.size(); ++i) {
      if (i > 0) {
        ASSERT_NE(groups[i].node, groups[i - 1].node);
      }
      ASSERT_FALSE(groups[i].runs.empty());
      for (uint64_t row : Flatten(groups[i].runs)) {
        ASSERT_EQ(NodeOf(slices, row), groups[i].node) << "row " << row;
        rows.push_back(row);
      }
    }
    ASSERT_EQ(rows, Flatten(runs));
  }
}

TEST(GroupRowsByNode, RandomizedScatterGivesTheRowsBack) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  for (int iter = 0; iter < 500; ++iter) {
    const uint64_t n = 1 + rng() % 3000;
    const auto slices = RandomSlices(rng, n);
    std::vector<uint64_t> rows(rng() % 100);
    for (auto& r : rows) r = rng() % n;
    const auto groups = *GroupRowsByNode(rows, slices);
    std::vector<uint64_t> back(rows.size(), n);
    for (size_t g = 0; g < groups.size(); ++g) {
      if (g > 0) {
        ASSERT_LT(groups[g - 1].node, groups[g].node);
      }
      ASSERT_EQ(groups[g].rows.size(), groups[g].indices.size());
      for (size_t i = 0; i < groups[g].rows.size(); ++i) {
        ASSERT_EQ(NodeOf(slices, groups[g].rows[i]), groups[g].node);
        ASSERT_EQ(back[groups[g].indices[i]], n) << "index given twice";
        back[groups[g].indices[i]] = groups[g].rows[i];
      }
    }
    ASSERT_EQ(back, rows);
  }
}

TEST(GroupRowsByNode, GathersOncePerNodeAndScattersBack) {
  const std::vector<SliceOwner> slices = {{{0, 10}, 2}, {{10, 20}, 0}, {{20, 30}, 2}};
  const std::vector<uint64_t> rows = {25, 3, 11, 3, 19, 0};
  const auto groups = *GroupRowsByNode(rows, slices);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].node, 0);
  EXPECT_EQ(groups[0].rows, (std::vector<uint64_t>{11, 19}));
  EXPECT_EQ(groups[0].indices, (std::vector<uint64_t>{2, 4}));
  EXPECT_EQ(groups[1].node, 2);
  EXPECT_EQ(groups[1].rows, (std::vector<uint64_t>{25, 3, 3, 0}));
  std::vector<uint64_t> back(rows.size(), 999);
  for (const auto& g : groups) {
    for (size_t i = 0; i < g.rows.size(); ++i) back[g.indices[i]] = g.rows[i];
  }
  EXPECT_EQ(back, rows);
  EXPECT_TRUE(GroupRowsByNode({30}, slices).status().IsInvalid());
  EXPECT_TRUE(GroupRowsByNode({}, {}).ok());
}

TEST(AppendRun, MergesContiguousRunsOnly) {
  std::vector<RowRange> runs;
  AppendRun(&runs, 3, 5);
  AppendRun(&runs, 5, 7);
  AppendRun(&runs, 7, 7);
  AppendRun(&runs, 9, 10);
  AppendRun(&runs, 2, 3);
  EXPECT_EQ(runs, (std::vector<RowRange>{{3, 7}, {9, 10}, {2, 3}}));
}

}  // namespace icefloe
