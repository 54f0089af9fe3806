// Adoption decisions over node reports: which copies a restarted head
// adopts, how it builds their slice maps, which contradicting reports it
// refuses, which stale copies it drops, and which records it hands back.
#include "icefloe/head/core/adopt.h"

#include <arrow/type.h>
#include <gtest/gtest.h>

#include "icefloe/head/core/catalog_record.h"

namespace icefloe {
namespace {

const std::string kA = "grpc://a:1", kB = "grpc://b:1", kC = "grpc://c:1";

// A record of `storage` at `generation`: 30 rows in slices [0,10) on A,
// [10,20) on B, [20,30) on C; names `names` (storage's own first).
CatalogRecord Record(const std::string& storage, uint64_t generation,
                     std::vector<std::string> names = {}, int64_t updated_us = 1) {
  CatalogRecord r;
  r.storage_name = storage;
  r.key.table = "k-" + storage;
  r.generation = generation;
  if (names.empty()) names = {storage};
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    LoadRequest q;
    q.name = n;
    q.source = "s3://b/" + storage;
    r.requests.push_back(q);
  }
  r.schema = arrow::schema({arrow::field("x", arrow::int64())});
  r.num_rows = 30;
  r.nbytes = 300;
  r.tasks_total = 3;
  r.slices = {{0, 10, {kA}}, {10, 20, {kB}}, {20, 30, {kC}}};
  r.updated_us = updated_us;
  return r;
}

NodeDatasetInfo Held(const CatalogRecord& r, std::vector<RowRange> ranges,
                     bool with_record = true) {
  NodeDatasetInfo d;
  d.name = r.storage_name;
  d.generation = r.generation;
  d.ranges = std::move(ranges);
  d.bytes = 100;
  if (with_record) d.record = r.ToJson();
  return d;
}

const DatasetEntry* Find(const AdoptionPlan& plan, const std::string& name) {
  for (const auto& e : plan.entries) {
    if (e->name == name) return e.get();
  }
  return nullptr;
}

TEST(AdoptTest, RebuildsTheCatalogFromEveryHolder) {
  const CatalogRecord r = Record("train", 5, {"train", "alias"});
  AdoptionInput in;
  in.first_generation = 100;
  in.reports = {
      {kA, {Held(r, {{0, 10}})}}, {kB, {Held(r, {{10, 20}})}}, {kC, {Held(r, {{20, 30}})}}};
  AdoptionPlan plan = PlanAdoption(in);
  EXPECT_TRUE(plan.refused.empty());
  EXPECT_TRUE(plan.drops.empty());
  ASSERT_EQ(plan.entries.size(), 2u);  // the dedup alias shares the copy
  for (const std::string name : {"train", "alias"}) {
    const DatasetEntry* e = Find(plan, name);
    ASSERT_NE(e, nullptr) << name;
    EXPECT_EQ(e->storage_name, "train");
    EXPECT_EQ(e->generation, 5u);
    EXPECT_EQ(e->state, CopyState::kReady);
    EXPECT_EQ(e->num_rows, 30);
    EXPECT_EQ(e->nbytes, 300);
    EXPECT_EQ(e->nodes, (std::vector<std::string>{kA, kB, kC}));
    ASSERT_EQ(e->slices.size(), 3u);
    EXPECT_EQ(e->slices[1].start, 10u);
    EXPECT_EQ(e->slices[1].nodes, (std::vector<std::string>{kB}));
    EXPECT_EQ(e->request.name, name);
  }
}

TEST(AdoptTest, ASliceWithNoLiveHolderMakesTheDatasetDegraded) {
  const CatalogRecord r = Record("train", 5);
  AdoptionInput in;
  in.first_generation = 100;
  in.reports = {{kA, {Held(r, {{0, 10}})}}, {kC, {Held(r, {{20, 30}})}}};  // B is gone
  AdoptionPlan plan = PlanAdoption(in);
  ASSERT_EQ(plan.entries.size(), 1u);
  const DatasetEntry& e = *plan.entries[0];
  EXPECT_EQ(e.state, CopyState::kDegraded);
  ASSERT_EQ(e.slices.size(), 3u);
  EXPECT_TRUE(e.slices[1].nodes.empty());
  EXPECT_EQ(e.slices[2].nodes, (std::vector<std::string>{kC}));
  EXPECT_EQ(e.nbytes, 200);  // what the live holders hold
}

TEST(AdoptTest, ReplicasAndRangesSpanningSlicesGiveOneHolderListPerSlice) {
  CatalogRecord r = Record("train", 5);
  r.slices = {{0, 10, {kA, kB}}, {10, 30, {kB, kA}}};
  AdoptionInput in;
  in.first_generation = 100;
  // A holds everything in one range; B only the second slice; a third node
  // (not in the record) holds the first slice too.
  in.reports = {{kA, {Held(r, {{0, 30}})}},
                {kB, {Held(r, {{10, 30}})}},
                {kC, {Held(r, {{0, 10}}, /*with_record=*/false)}}};
  AdoptionPlan plan = PlanAdoption(in);
  ASSERT_EQ(plan.entries.size(), 1u);
  const auto& slices = plan.entries[0]->slices;
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(slices[0].nodes, (std::vector<std::string>{kA, kC}));  // record order, then others
  EXPECT_EQ(slices[1].nodes, (std::vector<std::string>{kB, kA}));
  EXPECT_EQ(plan.entries[0]->state, CopyState::kReady);
}

TEST(AdoptTest, TheHighestGenerationOfANameWinsAndOlderCopiesAreDropped) {
  const CatalogRecord old_copy = Record("train", 5);
  const CatalogRecord new_copy = Record("train", 9);
  AdoptionInput in;
  in.first_generation = 100;
  in.reports = {{kA, {Held(old_copy, {{0, 30}})}}, {kB, {Held(new_copy, {{0, 30}})}}};
  AdoptionPlan plan = PlanAdoption(in);
  ASSERT_EQ(plan.entries.size(), 1u);
  EXPECT_EQ(plan.entries[0]->generation, 9u);
  ASSERT_EQ(plan.drops.size(), 1u);
  EXPECT_EQ(plan.drops[0].node, kA);
  EXPECT_EQ(plan.drops[0].generation, 5u);
}

TEST(AdoptTest, AnAliasMovedToANewerCopyLeavesTheOlderCopyItsOtherNames) {
  // "b" aliased "a"'s copy (gen 3), then was loaded on its own (gen 7).
  const CatalogRecord a = Record("a", 3, {"a", "b"});
  const CatalogRecord b = Record("b", 7);
  AdoptionInput in;
  in.first_generation = 100;
  in.reports = {{kA, {Held(a, {{0, 30}}), Held(b, {{0, 30}})}}};
  AdoptionPlan plan = PlanAdoption(in);
  ASSERT_EQ(plan.entries.size(), 2u);
  EXPECT_EQ(Find(plan, "a")->generation, 3u);
  EXPECT_EQ(Find(plan, "b")->generation, 7u);
  EXPECT_EQ(Find(plan, "b")->storage_name, "b");
  EXPECT_TRUE(plan.drops.empty());
}

TEST(AdoptTest, TheLatestRecordOfACopyNamesIt) {
  const CatalogRecord before = Record("a", 3, {"a", "evicted-alias"}, /*updated_us=*/10);
  const CatalogRecord after = Record("a", 3, {"a"}, /*updated_us=*/20);
  AdoptionInput in;
  in.first_generation = 100;
  in.reports = {{kA, {Held(before, {{0, 30}})}}, {kB, {Held(after, {{0, 30}})}}};
  AdoptionPlan plan = PlanAdoption(in);
  ASSERT_EQ(plan.entries.size(), 1u);
  EXPECT_EQ(plan.entries[0]->name, "a");
}

TEST(AdoptTest, ContradictingReportsAreRefusedAndTheRestAdopted) {
  const CatalogRecord r = Record("train", 5);
  CatalogRecord other_rows = r;
  other_rows.num_rows = 40;
  other_rows.slices.back().stop = 40;
  other_rows.updated_us = 0;  // older: the first record wins
  NodeDatasetInfo wrong_copy = Held(Record("other", 6), {{0, 30}});
  wrong_copy.name = "train";  // a record of another copy under this one
  NodeDatasetInfo garbage = Held(r, {{10, 20}});
  garbage.record = {{"storage_name", 5}};
  NodeDatasetInfo outside = Held(r, {{20, 35}});
  AdoptionInput in;
  in.first_generation = 100;
  in.reports = {{kA, {Held(r, {{0, 10}})}},
                {kB, {garbage, Held(other_rows, {{0, 40}})}},
                {kC, {outside}},
                {"grpc://d:1", {wrong_copy}}};
  // B reports the same copy twice (garbage record and other_rows): both lines.
  AdoptionPlan plan = PlanAdoption(in);
  ASSERT_EQ(plan.entries.size(), 1u) << ::testing::PrintToString(plan.refused);
  EXPECT_GE(plan.refused.size(), 4u);
  auto refused = [&](const std::string& needle) {
    for (const auto& line : plan.refused) {
      if (line.find(needle) != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_TRUE(refused("'storage_name'"));
  EXPECT_TRUE(refused("40 rows"));
  EXPECT_TRUE(refused("[20, 35) outside"));
  EXPECT_TRUE(refused("contradicts the copy"));
  const DatasetEntry& e = *plan.entries[0];
  EXPECT_EQ(e.state, CopyState::kDegraded);  // only A's slice has an undisputed holder
  EXPECT_EQ(e.slices[0].nodes, (std::vector<std::string>{kA}));
}

TEST(AdoptTest, KnownReleasedAndRecordlessCopies) {
  const CatalogRecord known = Record("known", 5);
  const CatalogRecord released = Record("released", 6);
  const CatalogRecord orphan = Record("orphan", 7);
  const CatalogRecord ours = Record("ours", 150);
  const CatalogRecord loading = Record("loading", 8);
  AdoptionInput in;
  in.first_generation = 100;
  in.catalog = {EntryOf(known, known.requests[0])};
  in.gone = {{"released", 6}};
  in.loading = {"loading"};
  in.reports = {
      {kA,
       {Held(known, {{0, 30}}, false), Held(released, {{0, 30}}), Held(orphan, {{0, 30}}, false),
        Held(ours, {{0, 30}}, false), Held(loading, {{0, 30}})}}};
  AdoptionPlan plan = PlanAdoption(in);
  EXPECT_TRUE(plan.entries.empty());
  std::set<std::string> dropped;
  for (const auto& d : plan.drops) dropped.insert(d.storage_name);
  // The catalog's copy is left alone, and this head's own (maybe not yet
  // published) load too; the old copy of a name being loaded is stale.
  EXPECT_EQ(dropped, (std::set<std::string>{"released", "orphan", "loading"}));
}

TEST(AdoptTest, RecordsArePushedWhereMissingOrStale) {
  const CatalogRecord r = Record("train", 5, {"train", "alias"});
  auto train = EntryOf(r, r.requests[1]);
  auto alias = EntryOf(r, r.requests[0]);
  const CatalogRecord only_train = Record("train", 5);
  std::vector<NodeReport> reports = {
      {kA, {Held(r, {{0, 10}})}},                         // up to date
      {kB, {Held(r, {{10, 20}}, false)}},                 // none yet
      {kC, {Held(only_train, {{20, 30}})}},               // alias missing
      {"grpc://d:1", {Held(Record("x", 1), {{0, 30}})}},  // not in the catalog
  };
  auto pushes = PlanRecordPushes(reports, {alias, train}, 42);
  ASSERT_EQ(pushes.size(), 2u);
  EXPECT_EQ(pushes[0].node, kB);
  EXPECT_EQ(pushes[1].node, kC);
  EXPECT_EQ(pushes[1].request.dataset, "train");
  EXPECT_EQ(pushes[1].request.generation, 5u);
  auto pushed = CatalogRecord::FromJson(pushes[1].request.record, "pushed");
  ASSERT_TRUE(pushed.ok()) << pushed.status().ToString();
  EXPECT_TRUE(pushed->SameAs(r));
  EXPECT_EQ(pushed->updated_us, 42);
}

}  // namespace
}  // namespace icefloe
