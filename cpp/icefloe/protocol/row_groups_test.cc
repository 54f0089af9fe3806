#include "icefloe/protocol/row_groups.h"

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "icefloe/protocol/plan_ticket.h"

namespace icefloe {
namespace {

// Slices [0,100) [100,250) [250,250) [250,400) on replica sets 1 0 2 1.
const std::vector<uint64_t> kStops = {100, 250, 250, 400};
const std::vector<uint32_t> kGroups = {1, 0, 2, 1};
const SliceTable kTable{kStops.data(), kGroups.data(), kStops.size(), 3};

struct Grouped {
  RowGroupsError error;
  std::vector<std::string> bodies;  // per replica set; empty: none
};

Grouped Group(const SliceTable& table, const std::vector<uint64_t>& ids) {
  const auto n = static_cast<uint32_t>(ids.size());
  std::vector<uint8_t> out(RowGroupsBytes(table.num_groups, n));
  std::vector<uint32_t> scratch(n);
  std::vector<uint64_t> offsets(table.num_groups), lengths(table.num_groups);
  Grouped g{
      GroupRows(table, ids.data(), n, scratch.data(), out.data(), offsets.data(), lengths.data()),
      {}};
  for (uint32_t k = 0; k < table.num_groups && g.error == RowGroupsError::kOk; ++k) {
    g.bodies.emplace_back(reinterpret_cast<const char*>(out.data() + offsets[k]), lengths[k]);
  }
  return g;
}

TEST(RowGroups, EachRowGoesToTheReplicaSetOfItsSlice) {
  EXPECT_EQ(SliceOfRow(kTable, 0), 0u);
  EXPECT_EQ(SliceOfRow(kTable, 99), 0u);
  EXPECT_EQ(SliceOfRow(kTable, 100), 1u);
  EXPECT_EQ(SliceOfRow(kTable, 250), 3u);  // past the empty slice
  EXPECT_EQ(SliceOfRow(kTable, 399), 3u);
}

// The bodies are rows tickets exactly as EncodeRowsBody writes them, each
// replica set's rows in the order asked, every position once.
TEST(RowGroups, BodiesAreTheRowsTicketsOfEachReplicaSet) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> ids = {399, 5, 150, 5, 260};
  for (int i = 0; i < 200; ++i) ids.push_back(rng() % 400);
  const Grouped g = Group(kTable, ids);
  ASSERT_EQ(g.error, RowGroupsError::kOk);
  ASSERT_EQ(g.bodies.size(), 3u);
  EXPECT_TRUE(g.bodies[2].empty()) << "the empty slice's replica set holds none";
  std::vector<int> seen(ids.size(), 0);
  for (uint32_t set = 0; set < 2; ++set) {
    RowsTicket want{static_cast<uint32_t>(ids.size()), {}, {}};
    for (uint32_t i = 0; i < ids.size(); ++i) {
      if (kGroups[SliceOfRow(kTable, ids[i])] == set) {
        want.positions.push_back(i);
        want.rows.push_back(ids[i]);
      }
    }
    EXPECT_EQ(g.bodies[set], EncodeRowsBody(want)) << "replica set " << set;
    auto back = DecodeRowsBody(g.bodies[set]);
    ASSERT_TRUE(back.ok()) << back.status();
    for (uint32_t p : back->positions) ++seen[p];
  }
  EXPECT_EQ(seen, std::vector<int>(ids.size(), 1));
}

TEST(RowGroups, RefusesRowsOutsideAndMalformedTables) {
  EXPECT_EQ(Group(kTable, {1, 400}).error, RowGroupsError::kRowOutside);
  const std::vector<uint64_t> descending = {100, 50};
  const std::vector<uint32_t> groups = {0, 0};
  EXPECT_EQ(Group({descending.data(), groups.data(), 2, 1}, {1}).error, RowGroupsError::kBadTable);
  const std::vector<uint32_t> beyond = {0, 5};
  EXPECT_EQ(Group({kStops.data(), beyond.data(), 2, 1}, {1}).error, RowGroupsError::kBadTable);
  EXPECT_EQ(Group({nullptr, nullptr, 0, 0}, {0}).error, RowGroupsError::kRowOutside);
  EXPECT_EQ(Group(kTable, {}).error, RowGroupsError::kOk);
}

}  // namespace
}  // namespace icefloe
