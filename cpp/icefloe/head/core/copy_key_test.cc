// CopyKey: equality over every field, "same but snapshot", and the JSON text
// kept in catalog records (unchanged from the heads that compared it as text).
#include "icefloe/head/core/copy_key.h"

#include <functional>

#include <gtest/gtest.h>

namespace icefloe {
namespace {

using json = nlohmann::json;

CopyKey Sample() {
  CopyKey k;
  k.table = "u-1";
  k.snapshot = 7;
  k.projection = {1, 3};
  k.filter = "x > 1";
  k.batch_rows = 4096;
  k.replication = 2;
  k.transform = json{{"columns", json::array()}};
  k.model_sha256 = {std::string(64, 'a')};
  return k;
}

struct Change {
  const char* field;
  std::function<void(CopyKey&)> apply;
};

// One change of each field but the snapshot.
std::vector<Change> OtherChanges() {
  return {
      {"table", [](CopyKey& k) { k.table = "u-2"; }},
      {"projection",
       [](CopyKey& k) {
         k.projection = {3, 1};
       }},
      {"filter", [](CopyKey& k) { k.filter = "x > 2"; }},
      {"batch_rows", [](CopyKey& k) { k.batch_rows = 8192; }},
      {"replication", [](CopyKey& k) { k.replication = 1; }},
      {"transform",
       [](CopyKey& k) {
         k.transform = json{{"columns", json::array({"y"})}};
       }},
      {"transform (none)", [](CopyKey& k) { k.transform = nullptr; }},
      {"models", [](CopyKey& k) { k.model_sha256 = {std::string(64, 'b')}; }},
  };
}

TEST(CopyKeyTest, EqualKeysAreSameButSnapshotToo) {
  EXPECT_EQ(Sample(), Sample());
  EXPECT_TRUE(Sample().SameButSnapshot(Sample()));
}

TEST(CopyKeyTest, EachFieldCounts) {
  for (const auto& c : OtherChanges()) {
    CopyKey k = Sample();
    c.apply(k);
    EXPECT_NE(k, Sample()) << c.field;
    EXPECT_FALSE(k.SameButSnapshot(Sample())) << c.field;
    EXPECT_FALSE(Sample().SameButSnapshot(k)) << c.field;
  }
}

TEST(CopyKeyTest, SameButSnapshot) {
  for (std::optional<int64_t> snapshot : {std::optional<int64_t>(8), std::optional<int64_t>()}) {
    CopyKey k = Sample();
    k.snapshot = snapshot;
    EXPECT_NE(k, Sample());
    EXPECT_TRUE(k.SameButSnapshot(Sample()));
    EXPECT_TRUE(Sample().SameButSnapshot(k));
    // Another field changed as well: not the same table's copy any more.
    k.filter = "x > 2";
    EXPECT_FALSE(k.SameButSnapshot(Sample()));
  }
}

TEST(CopyKeyTest, OfTakesThePlanAndTheRequest) {
  iceberg::ScanPlan plan;
  plan.metadata_location = "s3://b/t/metadata/v1.metadata.json";
  plan.projection = {2};
  LoadRequest request;
  request.filter = "x > 1";
  request.replication = 3;
  CopyKey k = CopyKey::Of(plan, request, {std::string(64, 'a')});
  EXPECT_EQ(k.table, plan.metadata_location);  // no UUID: its metadata location
  EXPECT_EQ(k.snapshot, std::nullopt);
  EXPECT_EQ(k.projection, plan.projection);
  EXPECT_EQ(k.filter, "x > 1");
  EXPECT_EQ(k.batch_rows, request.batch_rows);
  EXPECT_EQ(k.replication, 3);
  EXPECT_TRUE(k.transform.is_null());
  EXPECT_TRUE(k.model_sha256.empty());  // models count only with a transform
  plan.table_uuid = "u-1";
  plan.snapshot_id = 9;
  request.transform = TransformSpec::FromJson(json{{"keep", {"a"}}}).ValueOrDie();
  k = CopyKey::Of(plan, request, {std::string(64, 'a')});
  EXPECT_EQ(k.table, "u-1");
  EXPECT_EQ(k.snapshot, 9);
  EXPECT_EQ(k.transform, request.transform->ToJson());
  EXPECT_EQ(k.model_sha256, std::vector<std::string>{std::string(64, 'a')});
}

// The text records hold: keys written by earlier heads read back equal.
TEST(CopyKeyTest, TextIsTheRecordedKey) {
  CopyKey k = Sample();
  k.transform = nullptr;
  k.model_sha256.clear();
  k.snapshot.reset();
  EXPECT_EQ(k.ToText(), R"({"batch_rows":4096,"filter":"x > 1","projection":[1,3],"replication":2,)"
                        R"("snapshot":-1,"table":"u-1"})");
  for (const CopyKey& key : {k, Sample()}) {
    auto back = CopyKey::FromText(key.ToText(), "key");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, key);
  }
}

// A load's transform is in the key as the load gave it (defaults spelled
// out and all): the text heads wrote before specs were typed.
TEST(CopyKeyTest, TheKeyHoldsTheTransformAsTheLoadGaveIt) {
  auto spec = TransformSpec::FromJson(json::parse(R"({"keep": ["id"], "columns": [
      {"name": "ids", "tokenize": {"column": "text", "model": "/m/u.model", "bos": false,
                                   "special_tokens": true}}]})"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  LoadRequest request;
  request.transform = *spec;
  iceberg::ScanPlan plan;
  plan.table_uuid = "u-1";
  plan.snapshot_id = 3;
  plan.projection = {1, 2};
  const CopyKey k = CopyKey::Of(plan, request, {std::string(64, 'a')});
  const std::string text =
      R"({"batch_rows":65536,"filter":"","models":[")" + std::string(64, 'a') +
      R"("],"projection":[1,2],"replication":1,"snapshot":3,"table":"u-1","transform":)"
      R"({"columns":[{"name":"ids","tokenize":{"bos":false,"column":"text","model":"/m/u.model",)"
      R"("special_tokens":true}}],"keep":["id"]}})";
  EXPECT_EQ(k.ToText(), text);
  auto back = CopyKey::FromText(text, "key");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, k);
}

TEST(CopyKeyTest, BadTextIsInvalidNamingTheField) {
  const json good = Sample().ToJson();
  struct Case {
    std::function<void(json&)> mutate;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j.erase("table"); }, "'table'"},
      {[](json& j) { j["snapshot"] = "7"; }, "'snapshot'"},
      {[](json& j) { j["projection"] = json::array({"a"}); }, "'projection'"},
      {[](json& j) { j["filter"] = 1; }, "'filter'"},
      {[](json& j) { j["batch_rows"] = -1; }, "'batch_rows'"},
      {[](json& j) { j["replication"] = 1.5; }, "'replication'"},
      {[](json& j) { j["transform"] = json::array(); }, "'transform'"},
      {[](json& j) { j["models"] = json::array({1}); }, "'models'"},
  };
  for (const auto& c : cases) {
    json j = good;
    c.mutate(j);
    auto parsed = CopyKey::FromText(j.dump(), "record 'key'");
    ASSERT_FALSE(parsed.ok()) << j.dump();
    EXPECT_TRUE(parsed.status().IsInvalid()) << parsed.status().ToString();
    EXPECT_NE(parsed.status().message().find(c.needle), std::string::npos)
        << parsed.status().ToString();
    EXPECT_NE(parsed.status().message().find("record 'key'"), std::string::npos)
        << parsed.status().ToString();
  }
  EXPECT_FALSE(CopyKey::FromText("not json", "key").ok());
}

}  // namespace
}  // namespace icefloe
