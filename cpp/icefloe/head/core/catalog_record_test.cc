// Catalog records: a round trip keeps every field; a bad record (as a broken
// or hostile node could send) is Invalid naming the field, never a crash.
#include "icefloe/head/core/catalog_record.h"

#include <arrow/type.h>
#include <gtest/gtest.h>

namespace icefloe {
namespace {

using json = nlohmann::json;

CatalogRecord Sample() {
  CatalogRecord r;
  r.storage_name = "train";
  r.key.table = "u-1";
  r.key.snapshot = 7;
  r.generation = 1'700'000'000'000'001;
  LoadRequest a;
  a.name = "alias";
  a.source = "s3://b/t";
  a.columns = {"x"};
  LoadRequest t = a;
  t.name = "train";
  t.replication = 2;
  r.requests = {a, t};
  r.metadata_location = "s3://b/t/metadata/v3.metadata.json";
  r.snapshot_id = 7;
  r.schema = arrow::schema({arrow::field("x", arrow::int64()), arrow::field("s", arrow::utf8())});
  r.num_rows = 30;
  r.nbytes = 4096;
  r.tasks_total = 3;
  r.estimated_bytes = 5000;
  r.load_seconds = 1.25;
  r.scan.data_files_total = 3;
  r.scan.row_groups_read = 2;
  r.scan.planning_ms = 4.5;
  r.slices = {{0, 10, {"grpc://a:1", "grpc://b:1"}}, {10, 30, {"grpc://b:1"}}};
  r.task_rows = {10, 15, 5};
  r.updated_us = 123;
  return r;
}

TEST(CatalogRecordTest, RoundTripKeepsEveryField) {
  const CatalogRecord r = Sample();
  auto back = CatalogRecord::FromJson(json::parse(Dump(r.ToJson())), "record");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->SameAs(r));
  EXPECT_EQ(back->updated_us, 123);
  EXPECT_EQ(back->generation, r.generation);
  EXPECT_EQ(back->requests, r.requests);
  EXPECT_EQ(back->snapshot_id, std::optional<int64_t>(7));
  EXPECT_TRUE(back->schema->Equals(*r.schema));
  EXPECT_EQ(back->load_seconds, 1.25);
  EXPECT_EQ(back->scan.planning_ms, 4.5);
  EXPECT_EQ(back->scan.row_groups_read, 2);
  ASSERT_EQ(back->slices.size(), 2u);
  EXPECT_EQ(back->slices[0].nodes, (std::vector<std::string>{"grpc://a:1", "grpc://b:1"}));
  EXPECT_EQ(back->slices[1].stop, 30u);
  EXPECT_EQ(back->task_rows, (std::vector<int64_t>{10, 15, 5}));

  CatalogRecord other = r;
  other.requests.pop_back();
  EXPECT_FALSE(other.SameAs(r));
  other = r;
  other.updated_us = 999;
  EXPECT_TRUE(other.SameAs(r));
}

TEST(CatalogRecordTest, EntriesGiveTheRecordAndBack) {
  const CatalogRecord r = Sample();
  auto train = EntryOf(r, r.requests[1]);
  auto alias = EntryOf(r, r.requests[0]);
  EXPECT_EQ(train->name, "train");
  EXPECT_EQ(train->state, CopyState::kReady);
  EXPECT_EQ(alias->storage_name, "train");
  EXPECT_EQ(train->nodes, (std::vector<std::string>{"grpc://a:1", "grpc://b:1"}));
  // The task map comes back without the plan (a restarted head re-plans).
  EXPECT_EQ(train->task_rows, (std::vector<int64_t>{10, 15, 5}));
  EXPECT_EQ(train->task_starts, (std::vector<uint64_t>{0, 10, 25}));
  EXPECT_EQ(train->plan, nullptr);
  CatalogRecord again = RecordOf({alias, train}, 5);
  EXPECT_TRUE(again.SameAs(r));
  EXPECT_EQ(again.updated_us, 5);
}

// Each mutation of a good record, and the text its error must hold.
TEST(CatalogRecordTest, BadRecordsAreInvalidNamingTheField) {
  const json good = Sample().ToJson();
  struct Case {
    std::function<void(json&)> mutate;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j.erase("storage_name"); }, "'storage_name'"},
      {[](json& j) { j["storage_name"] = ""; }, "'storage_name'"},
      {[](json& j) { j["storage_name"] = "a b"; }, "'name'"},
      {[](json& j) { j["generation"] = 0; }, "'generation'"},
      {[](json& j) { j["generation"] = -3; }, "'generation'"},
      {[](json& j) { j["generation"] = "5"; }, "'generation'"},
      {[](json& j) { j["rows"] = -1; }, "'rows'"},
      {[](json& j) { j["rows"] = 1.5; }, "'rows'"},
      {[](json& j) { j["bytes"] = nullptr; }, "'bytes'"},
      {[](json& j) { j.erase("requests"); }, "'requests'"},
      {[](json& j) { j["requests"] = json::array(); }, "'requests'"},
      {[](json& j) { j["requests"] = "x"; }, "'requests'"},
      {[](json& j) { j["requests"][0]["source"] = 5; }, "'requests'[0]"},
      {[](json& j) { j["requests"][1] = j["requests"][0]; }, "sorted"},
      {[](json& j) { j.erase("schema"); }, "'schema'"},
      {[](json& j) { j["schema"] = "bm90IGEgc2NoZW1h"; }, "'schema'"},
      {[](json& j) { j["load_seconds"] = "fast"; }, "'load_seconds'"},
      {[](json& j) { j["scan"] = 3; }, "'scan'"},
      {[](json& j) { j["scan"]["planning_ms"] = -1; }, "'planning_ms'"},
      {[](json& j) { j["scan"]["delete_files"] = -1; }, "'delete_files'"},
      {[](json& j) { j["slices"] = 1; }, "'slices'"},
      {[](json& j) { j["slices"][0] = 1; }, "'slices'"},
      {[](json& j) { j["slices"][0].erase("stop"); }, "'stop'"},
      {[](json& j) { j["slices"][0]["stop"] = -1; }, "'start/stop'"},
      {[](json& j) { j["slices"][1]["start"] = 11; }, "contiguous"},
      {[](json& j) { j["slices"][0]["stop"] = 0; }, "contiguous"},
      {[](json& j) { j["slices"][1]["stop"] = 29; }, "cover rows"},
      {[](json& j) {
         j["task_rows"] = json::array({10, 15});
       },
       "'task_rows' add up to 25"},
      {[](json& j) { j["task_rows"][0] = -1; }, "'task_rows'"},
      {[](json& j) { j["rows"] = 31; }, "cover rows"},
      {[](json& j) { j["slices"][0]["nodes"] = "grpc://a:1"; }, "'nodes'"},
      {[](json& j) { j["slices"][0]["nodes"] = json::array({""}); }, "'nodes'"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    json bad = good;
    cases[i].mutate(bad);
    auto r = CatalogRecord::FromJson(bad, "node n record");
    ASSERT_FALSE(r.ok()) << "case " << i;
    EXPECT_TRUE(r.status().IsInvalid()) << "case " << i << ": " << r.status().ToString();
    EXPECT_NE(r.status().message().find(cases[i].needle), std::string::npos)
        << "case " << i << ": " << r.status().ToString();
    EXPECT_NE(r.status().message().find("node n record"), std::string::npos) << "case " << i;
  }
  for (const json& not_object : {json(1), json("x"), json::array(), json(nullptr)}) {
    EXPECT_TRUE(CatalogRecord::FromJson(not_object, "r").status().IsInvalid());
  }
}

}  // namespace
}  // namespace icefloe
