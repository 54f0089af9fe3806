#include "icefloe/iceberg/metadata.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

#include <arrow/util/compression.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace icefloe::iceberg {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// A v2 table: schema 0 (id, ts) then 1 (adds `note`); spec 0 unpartitioned,
// spec 1 bucket + day; snapshots 101 <- 102 <- 103 (current) plus 201 on
// branch "dev"; tag "first" at 101.
const char* kV2 = R"J({
  "format-version": 2,
  "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1",
  "location": "s3://bucket/warehouse/db/t",
  "last-sequence-number": 4,
  "last-updated-ms": 1700000400000,
  "last-column-id": 3,
  "current-schema-id": 1,
  "schemas": [
    {"type": "struct", "schema-id": 0, "fields": [
      {"id": 1, "name": "id", "required": true, "type": "long"},
      {"id": 2, "name": "ts", "required": false, "type": "timestamp"}]},
    {"type": "struct", "schema-id": 1, "identifier-field-ids": [1], "fields": [
      {"id": 1, "name": "id", "required": true, "type": "long"},
      {"id": 2, "name": "ts", "required": false, "type": "timestamp"},
      {"id": 3, "name": "note", "required": false, "type": "string"}]}
  ],
  "default-spec-id": 1,
  "partition-specs": [
    {"spec-id": 0, "fields": []},
    {"spec-id": 1, "fields": [
      {"name": "id_bucket", "transform": "bucket[16]", "source-id": 1, "field-id": 1000},
      {"name": "ts_day", "transform": "day", "source-id": 2, "field-id": 1001}]}
  ],
  "last-partition-id": 1001,
  "default-sort-order-id": 0,
  "sort-orders": [{"order-id": 0, "fields": []}],
  "properties": {"write.format.default": "parquet", "owner": "test"},
  "current-snapshot-id": 103,
  "snapshots": [
    {"snapshot-id": 101, "sequence-number": 1, "timestamp-ms": 1700000100000,
     "manifest-list": "s3://bucket/warehouse/db/t/metadata/snap-101.avro",
     "summary": {"operation": "append", "added-records": "10"}, "schema-id": 0},
    {"snapshot-id": 102, "parent-snapshot-id": 101, "sequence-number": 2,
     "timestamp-ms": 1700000200000,
     "manifest-list": "s3://bucket/warehouse/db/t/metadata/snap-102.avro",
     "summary": {"operation": "append"}, "schema-id": 0},
    {"snapshot-id": 201, "parent-snapshot-id": 102, "sequence-number": 4,
     "timestamp-ms": 1700000350000,
     "manifest-list": "s3://bucket/warehouse/db/t/metadata/snap-201.avro",
     "summary": {"operation": "overwrite"}, "schema-id": 1},
    {"snapshot-id": 103, "parent-snapshot-id": 102, "sequence-number": 3,
     "timestamp-ms": 1700000300000,
     "manifest-list": "s3://bucket/warehouse/db/t/metadata/snap-103.avro",
     "summary": {"operation": "append"}}
  ],
  "snapshot-log": [
    {"timestamp-ms": 1700000100000, "snapshot-id": 101},
    {"timestamp-ms": 1700000200000, "snapshot-id": 102},
    {"timestamp-ms": 1700000300000, "snapshot-id": 103}
  ],
  "metadata-log": [
    {"timestamp-ms": 1700000000000,
     "metadata-file": "s3://bucket/warehouse/db/t/metadata/v1.metadata.json"}
  ],
  "refs": {
    "main": {"snapshot-id": 103, "type": "branch"},
    "dev": {"snapshot-id": 201, "type": "branch", "max-ref-age-ms": 1000},
    "first": {"snapshot-id": 101, "type": "tag"}
  },
  "statistics": [],
  "partition-statistics": []
})J";

// A v1 table as old Java writers leave it: one `schema`, one `partition-spec`
// without field ids, snapshots without sequence numbers, one listing its
// manifests inline.
const char* kV1 = R"J({
  "format-version": 1,
  "location": "/warehouse/db/old",
  "last-updated-ms": 1600000200000,
  "last-column-id": 2,
  "schema": {"type": "struct", "fields": [
    {"id": 1, "name": "id", "required": true, "type": "int"},
    {"id": 2, "name": "data", "required": false, "type": "string"}]},
  "partition-spec": [
    {"name": "data_trunc", "transform": "truncate[4]", "source-id": 2},
    {"name": "id_bucket", "transform": "bucket[8]", "source-id": 1}],
  "properties": {},
  "current-snapshot-id": 2,
  "snapshots": [
    {"snapshot-id": 1, "timestamp-ms": 1600000100000,
     "manifests": ["/warehouse/db/old/metadata/m1.avro", "/warehouse/db/old/metadata/m2.avro"]},
    {"snapshot-id": 2, "parent-snapshot-id": 1, "timestamp-ms": 1600000200000,
     "manifest-list": "/warehouse/db/old/metadata/snap-2.avro"}
  ]
})J";

TableMetadata MustParse(const std::string& text) {
  auto m = ParseTableMetadata(text, "test.metadata.json");
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : TableMetadata{};
}

/// kV2 with `edit` applied to its JSON, as text.
std::string EditV2(const std::function<void(json&)>& edit) {
  json j = json::parse(kV2);
  edit(j);
  return j.dump();
}

void ExpectError(const arrow::Status& st, arrow::StatusCode code,
                 std::vector<std::string> needles) {
  EXPECT_EQ(st.code(), code) << st;
  for (const auto& n : needles) {
    EXPECT_NE(st.message().find(n), std::string::npos) << "'" << n << "' not in: " << st;
  }
}

/// A fresh directory, removed with everything in it at the end of the test.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    dir_ = fs::temp_directory_path() / ("icefloe-metadata-test-" + std::to_string(rd()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void Write(const fs::path& path, const std::string& contents) {
    fs::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary);
    out << contents;
  }
  fs::path dir_;
  FileIO io_;
};

}  // namespace

TEST(TableMetadata, ParsesV2) {
  TableMetadata m = MustParse(kV2);
  EXPECT_EQ(m.format_version, 2);
  EXPECT_EQ(m.table_uuid, "9c12d441-03fe-4693-9a96-a0705ddf69c1");
  EXPECT_EQ(m.location, "s3://bucket/warehouse/db/t");
  EXPECT_EQ(m.last_sequence_number, 4);
  EXPECT_EQ(m.last_updated_ms, 1700000400000);
  EXPECT_EQ(m.last_column_id, 3);
  ASSERT_EQ(m.schemas.size(), 2u);
  EXPECT_EQ(m.CurrentSchema().schema_id, 1);
  EXPECT_EQ(m.CurrentSchema().fields.back().name, "note");
  EXPECT_EQ(m.FindSchema(0)->fields.size(), 2u);
  EXPECT_EQ(m.FindSchema(7), nullptr);

  EXPECT_EQ(m.default_spec_id, 1);
  EXPECT_TRUE(m.FindSpec(0)->is_unpartitioned());
  const PartitionSpec& spec = m.DefaultSpec();
  ASSERT_EQ(spec.fields.size(), 2u);
  EXPECT_EQ(spec.fields[0].transform, (Transform{Transform::kBucket, 16}));
  EXPECT_EQ(spec.fields[1].name, "ts_day");
  EXPECT_EQ(spec.fields[1].field_id, 1001);
  EXPECT_EQ(m.FindSpec(9), nullptr);

  EXPECT_EQ(m.properties.at("owner"), "test");
  EXPECT_EQ(m.current_snapshot_id, 103);
  ASSERT_EQ(m.snapshots.size(), 4u);
  const Snapshot* s101 = m.FindSnapshot(101);
  ASSERT_NE(s101, nullptr);
  EXPECT_FALSE(s101->parent_snapshot_id.has_value());
  EXPECT_EQ(s101->operation(), "append");
  EXPECT_EQ(s101->summary.at("added-records"), "10");
  EXPECT_EQ(s101->schema_id, 0);
  EXPECT_EQ(m.CurrentSnapshot()->manifest_list,
            "s3://bucket/warehouse/db/t/metadata/snap-103.avro");
  EXPECT_EQ(m.CurrentSnapshot()->sequence_number, 3);
  EXPECT_EQ(m.CurrentSnapshot()->parent_snapshot_id, 102);
  EXPECT_EQ(m.snapshot_log.size(), 3u);
  ASSERT_EQ(m.metadata_log.size(), 1u);
  EXPECT_EQ(m.metadata_log[0].metadata_file,
            "s3://bucket/warehouse/db/t/metadata/v1.metadata.json");
  ASSERT_EQ(m.refs.size(), 3u);
  EXPECT_EQ(m.refs.at("first").kind, SnapshotRef::Kind::kTag);
  EXPECT_EQ(m.refs.at("dev").kind, SnapshotRef::Kind::kBranch);
  EXPECT_EQ(m.refs.at("dev").snapshot_id, 201);
}

TEST(TableMetadata, ParsesV1WithDefaults) {
  TableMetadata m = MustParse(kV1);
  EXPECT_EQ(m.format_version, 1);
  EXPECT_EQ(m.table_uuid, "");
  EXPECT_EQ(m.last_sequence_number, 0);
  ASSERT_EQ(m.schemas.size(), 1u);
  EXPECT_EQ(m.current_schema_id, 0);
  EXPECT_EQ(m.CurrentSchema().fields[1].name, "data");
  ASSERT_EQ(m.partition_specs.size(), 1u);
  EXPECT_EQ(m.default_spec_id, 0);
  EXPECT_EQ(m.DefaultSpec().fields[0].field_id, 1000);
  EXPECT_EQ(m.DefaultSpec().fields[1].field_id, 1001);
  EXPECT_EQ(m.DefaultSpec().fields[0].transform, (Transform{Transform::kTruncate, 4}));
  const Snapshot* first = m.FindSnapshot(1);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->sequence_number, 0);
  EXPECT_TRUE(first->manifest_list.empty());
  EXPECT_EQ(first->manifests.size(), 2u);
  EXPECT_EQ(m.CurrentSnapshot()->manifest_list, "/warehouse/db/old/metadata/snap-2.avro");
  // Without refs, "main" is the current snapshot.
  EXPECT_EQ(m.refs.at("main").snapshot_id, 2);
  EXPECT_EQ((*SelectSnapshot(m, SnapshotSelector::Ref("main")))->snapshot_id, 2);
}

TEST(TableMetadata, V1WithSchemasAndSpecsLists) {
  json j = json::parse(kV1);
  j["schemas"] = json::array({j["schema"]});
  j["schemas"][0]["schema-id"] = 5;
  j["current-schema-id"] = 5;
  j["partition-specs"] = json::array({{{"spec-id", 2}, {"fields", j["partition-spec"]}}});
  j["default-spec-id"] = 2;
  TableMetadata m = MustParse(j.dump());
  EXPECT_EQ(m.CurrentSchema().schema_id, 5);
  EXPECT_EQ(m.DefaultSpec().spec_id, 2);
}

TEST(TableMetadata, ToleratesV3) {
  TableMetadata m = MustParse(EditV2([](json& j) {
    j["format-version"] = 3;
    j["next-row-id"] = 1000;
    j["encryption-keys"] = json::array();
    j["snapshots"][0]["first-row-id"] = 0;
    j["snapshots"][0]["added-rows"] = 10;
    j["schemas"][1]["fields"][2]["initial-default"] = "none";
  }));
  EXPECT_EQ(m.format_version, 3);
  EXPECT_EQ(m.snapshots.size(), 4u);
}

TEST(TableMetadata, EmptyTable) {
  for (const char* current : {"-1", "null", ""}) {
    TableMetadata m = MustParse(EditV2([&](json& j) {
      j["snapshots"] = json::array();
      j["snapshot-log"] = json::array();
      j["refs"] = json::object();
      if (std::string(current).empty()) {
        j.erase("current-snapshot-id");
      } else {
        j["current-snapshot-id"] = json::parse(current);
      }
    }));
    SCOPED_TRACE(current);
    EXPECT_FALSE(m.current_snapshot_id.has_value());
    EXPECT_EQ(m.CurrentSnapshot(), nullptr);
    EXPECT_EQ(*SelectSnapshot(m, SnapshotSelector::Current()), nullptr);
    EXPECT_EQ(*SelectSnapshot(m, SnapshotSelector::Ref("main")), nullptr);
    EXPECT_TRUE(SelectSnapshot(m, SnapshotSelector::AsOf(1700000300000)).status().IsKeyError());
  }
}

TEST(SelectSnapshot, ByIdAndRef) {
  TableMetadata m = MustParse(kV2);
  auto id = [&](const SnapshotSelector& sel) -> int64_t {
    auto s = SelectSnapshot(m, sel);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() && *s != nullptr ? (*s)->snapshot_id : -1;
  };
  EXPECT_EQ(id(SnapshotSelector::Current()), 103);
  EXPECT_EQ(id(SnapshotSelector::Id(102)), 102);
  EXPECT_EQ(id(SnapshotSelector::Ref("main")), 103);
  EXPECT_EQ(id(SnapshotSelector::Ref("dev")), 201);
  EXPECT_EQ(id(SnapshotSelector::Ref("first")), 101);
  ExpectError(SelectSnapshot(m, SnapshotSelector::Id(999)).status(), arrow::StatusCode::KeyError,
              {"999"});
  ExpectError(SelectSnapshot(m, SnapshotSelector::Ref("nope")).status(),
              arrow::StatusCode::KeyError, {"'nope'", "dev", "first"});
}

TEST(SelectSnapshot, AsOfTimestamp) {
  TableMetadata m = MustParse(kV2);
  auto as_of = [&](int64_t ms) -> int64_t {
    auto s = SelectSnapshot(m, SnapshotSelector::AsOf(ms));
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? (*s)->snapshot_id : -1;
  };
  EXPECT_EQ(as_of(1700000100000), 101);  // exactly at a commit
  EXPECT_EQ(as_of(1700000250000), 102);
  EXPECT_EQ(as_of(1700000300000), 103);
  EXPECT_EQ(as_of(1800000000000), 103);  // 201 is on a branch, never in the log
  auto before = SelectSnapshot(m, SnapshotSelector::AsOf(1700000099999));
  ExpectError(before.status(), arrow::StatusCode::KeyError,
              {"2023-11-14T22:14:59.999Z", "1700000099999"});

  // Without a snapshot log: the current snapshot's ancestors by timestamp.
  m.snapshot_log.clear();
  EXPECT_EQ(as_of(1700000250000), 102);
  EXPECT_EQ(as_of(1700000300000), 103);
  EXPECT_TRUE(SelectSnapshot(m, SnapshotSelector::AsOf(1)).status().IsKeyError());

  // A log entry whose snapshot has since expired is an error, not an older snapshot.
  m.snapshot_log = {{1700000150000, 42}, {1700000200000, 102}};
  ExpectError(SelectSnapshot(m, SnapshotSelector::AsOf(1700000160000)).status(),
              arrow::StatusCode::KeyError, {"42", "expired"});
}

TEST(SelectSnapshot, SchemaForTimeTravel) {
  TableMetadata m = MustParse(kV2);
  EXPECT_EQ((*m.SchemaFor(*m.FindSnapshot(101)))->schema_id, 0);
  EXPECT_EQ((*m.SchemaFor(*m.FindSnapshot(201)))->schema_id, 1);
  EXPECT_EQ((*m.SchemaFor(*m.FindSnapshot(103)))->schema_id, 1);  // no schema-id: current
  Snapshot orphan;
  orphan.snapshot_id = 7;
  orphan.schema_id = 9;
  ExpectError(m.SchemaFor(orphan).status(), arrow::StatusCode::KeyError, {"schema 9"});
  EXPECT_EQ(SnapshotSelector::Ref("x").ToString(), "ref 'x'");
  EXPECT_EQ(SnapshotSelector::Id(5).ToString(), "snapshot 5");
}

TEST(TableMetadata, Errors) {
  ExpectError(ParseTableMetadata("{\"format-version\": 2,,}", "s3://b/t/v3.metadata.json").status(),
              arrow::StatusCode::Invalid,
              {"s3://b/t/v3.metadata.json", "malformed JSON", "byte 22"});
  ExpectError(ParseTableMetadata("", "x.json").status(), arrow::StatusCode::Invalid,
              {"x.json", "byte"});
  ExpectError(ParseTableMetadata("[1]", "x.json").status(), arrow::StatusCode::Invalid,
              {"not a JSON object"});
  ExpectError(ParseTableMetadata(EditV2([](json& j) { j["format-version"] = 4; })).status(),
              arrow::StatusCode::NotImplemented, {"format-version 4"});
  ExpectError(ParseTableMetadata(EditV2([](json& j) { j["format-version"] = 0; })).status(),
              arrow::StatusCode::Invalid, {"format-version 0"});
  ExpectError(ParseTableMetadata(EditV2([](json& j) { j["format-version"] = "2"; })).status(),
              arrow::StatusCode::Invalid, {"'format-version'"});

  for (const char* field :
       {"format-version", "table-uuid", "location", "last-sequence-number", "last-updated-ms",
        "schemas", "current-schema-id", "partition-specs", "default-spec-id"}) {
    SCOPED_TRACE(field);
    auto st = ParseTableMetadata(EditV2([&](json& j) { j.erase(field); }), "m.json").status();
    ExpectError(st, arrow::StatusCode::Invalid, {"m.json", "missing", std::string("'") + field});
  }
  ExpectError(
      ParseTableMetadata(EditV2([](json& j) { j["snapshots"][1].erase("timestamp-ms"); })).status(),
      arrow::StatusCode::Invalid, {"snapshot 102", "'timestamp-ms'"});
  ExpectError(ParseTableMetadata(EditV2([](json& j) {
                j["snapshots"][1].erase("manifest-list");
              })).status(),
              arrow::StatusCode::Invalid, {"snapshot 102", "'manifest-list'"});
  ExpectError(ParseTableMetadata(EditV2([](json& j) {
                j["snapshots"][0].erase("sequence-number");
              })).status(),
              arrow::StatusCode::Invalid, {"'sequence-number'"});
  ExpectError(
      ParseTableMetadata(EditV2([](json& j) { j["snapshots"][0].erase("snapshot-id"); })).status(),
      arrow::StatusCode::Invalid, {"snapshots[0]", "'snapshot-id'"});
  ExpectError(ParseTableMetadata(EditV2([](json& j) { j["current-snapshot-id"] = 5; })).status(),
              arrow::StatusCode::Invalid, {"current-snapshot-id 5"});
  ExpectError(ParseTableMetadata(EditV2([](json& j) { j["current-schema-id"] = 8; })).status(),
              arrow::StatusCode::Invalid, {"current-schema-id 8"});
  ExpectError(ParseTableMetadata(EditV2([](json& j) { j["default-spec-id"] = 8; })).status(),
              arrow::StatusCode::Invalid, {"default-spec-id 8"});
  ExpectError(
      ParseTableMetadata(EditV2([](json& j) { j["refs"]["dev"]["snapshot-id"] = 5; })).status(),
      arrow::StatusCode::Invalid, {"ref 'dev'", "snapshot 5"});
  ExpectError(
      ParseTableMetadata(EditV2([](json& j) { j["refs"]["dev"]["type"] = "twig"; })).status(),
      arrow::StatusCode::Invalid, {"ref 'dev'", "twig"});
  ExpectError(
      ParseTableMetadata(EditV2([](json& j) { j["refs"]["main"]["snapshot-id"] = 102; })).status(),
      arrow::StatusCode::Invalid, {"'main'", "102"});
  ExpectError(ParseTableMetadata(EditV2([](json& j) {
                j["partition-specs"][1]["fields"][0]["transform"] = "bucket[0]";
              })).status(),
              arrow::StatusCode::Invalid, {"partition-specs[1]", "bucket[0]"});
  ExpectError(ParseTableMetadata(EditV2([](json& j) {
                j["schemas"][0]["fields"][0]["type"] = "varchar";
              })).status(),
              arrow::StatusCode::NotImplemented, {"schemas[0]", "varchar"});
  // v1 needs `schema` when it has no `schemas`, and `partition-spec` likewise.
  json v1 = json::parse(kV1);
  v1.erase("schema");
  ExpectError(ParseTableMetadata(v1.dump()).status(), arrow::StatusCode::Invalid, {"'schema'"});
  v1 = json::parse(kV1);
  v1.erase("partition-spec");
  ExpectError(ParseTableMetadata(v1.dump()).status(), arrow::StatusCode::Invalid,
              {"'partition-spec'"});
  v1 = json::parse(kV1);
  v1["snapshots"][0].erase("manifests");
  ExpectError(ParseTableMetadata(v1.dump()).status(), arrow::StatusCode::Invalid,
              {"snapshot 1", "'manifest-list'"});
}

using LoadTest = TempDirTest;

TEST_F(LoadTest, ReadsAMetadataFile) {
  Write(dir_ / "t" / "metadata" / "v1.metadata.json", kV1);
  auto m = LoadTableMetadata(io_, (dir_ / "t" / "metadata" / "v1.metadata.json").string());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->format_version, 1);
  EXPECT_EQ(m->metadata_location, (dir_ / "t" / "metadata" / "v1.metadata.json").string());
  // The same through a file:// URI.
  auto uri = LoadTableMetadata(io_, "file://" + (dir_ / "t/metadata/v1.metadata.json").string());
  ASSERT_TRUE(uri.ok()) << uri.status();
}

TEST_F(LoadTest, VersionHint) {
  const fs::path table = dir_ / "t";
  Write(table / "metadata" / "v1.metadata.json", kV1);
  Write(table / "metadata" / "v2.metadata.json", kV2);
  Write(table / "metadata" / "version-hint.text", "1\n");
  auto loc = ResolveMetadataLocation(io_, table.string());
  ASSERT_TRUE(loc.ok()) << loc.status();
  EXPECT_EQ(*loc, (table / "metadata" / "v1.metadata.json").string());
  auto m = LoadTableMetadata(io_, table.string() + "/");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->format_version, 1);

  Write(table / "metadata" / "version-hint.text", "v2.metadata.json");
  EXPECT_EQ(*ResolveMetadataLocation(io_, table.string()),
            (table / "metadata" / "v2.metadata.json").string());
  Write(table / "metadata" / "version-hint.text", (table / "metadata/v1.metadata.json").string());
  EXPECT_EQ(*ResolveMetadataLocation(io_, table.string()),
            (table / "metadata" / "v1.metadata.json").string());

  Write(table / "metadata" / "version-hint.text", "7");
  ExpectError(ResolveMetadataLocation(io_, table.string()).status(), arrow::StatusCode::IOError,
              {"version-hint.text", "v7.metadata.json"});
  Write(table / "metadata" / "version-hint.text", "  ");
  ExpectError(ResolveMetadataLocation(io_, table.string()).status(), arrow::StatusCode::Invalid,
              {"version-hint.text", "empty"});
}

TEST_F(LoadTest, TheNewestMetadataOfATableItsOldMetadataFileNames) {
  const fs::path table = dir_ / "t";
  Write(table / "metadata" / "00001-a.metadata.json", kV1);
  const std::string first = (table / "metadata" / "00001-a.metadata.json").string();
  EXPECT_EQ(*NewestMetadataLocation(io_, first), first);
  Write(table / "metadata" / "00002-b.metadata.json", kV2);
  const std::string second = (table / "metadata" / "00002-b.metadata.json").string();
  EXPECT_EQ(*NewestMetadataLocation(io_, first), second);
  EXPECT_EQ(*NewestMetadataLocation(io_, "file://" + first), "file://" + second);
  EXPECT_EQ(*NewestMetadataLocation(io_, table.string()), second);
  EXPECT_EQ(TableOfMetadataFile(first), table.string());
  EXPECT_FALSE(TableOfMetadataFile(table.string()));
  // A metadata file outside a table's metadata directory stays as it is.
  Write(dir_ / "loose" / "00001-c.metadata.json", kV1);
  const std::string loose = (dir_ / "loose" / "00001-c.metadata.json").string();
  EXPECT_EQ(*NewestMetadataLocation(io_, loose), loose);
  EXPECT_FALSE(TableOfMetadataFile(loose));
}

TEST_F(LoadTest, ScansTheMetadataDirectory) {
  const fs::path table = dir_ / "t";
  for (const char* name : {"v1.metadata.json", "v2.metadata.json", "v10.metadata.json"}) {
    Write(table / "metadata" / name, kV2);
  }
  Write(table / "metadata" / "snap-1.avro", "x");
  EXPECT_EQ(*ResolveMetadataLocation(io_, table.string()),
            (table / "metadata" / "v10.metadata.json").string());

  const fs::path catalog_table = dir_ / "c";
  for (const char* name : {"00000-6a8e4a5c-0b1d-4d0e-9e43-0d1b1d6c3a01.metadata.json",
                           "00009-1f0c1f1e-5a7b-4b1a-8d8f-9b7a0c3b2e11.metadata.json",
                           "00010-0e7e3c9a-2f4e-4d7e-a3c4-7b9e8d1f0a22.metadata.json"}) {
    Write(catalog_table / "metadata" / name, kV2);
  }
  auto loc = ResolveMetadataLocation(io_, "file://" + catalog_table.string());
  ASSERT_TRUE(loc.ok()) << loc.status();
  EXPECT_EQ(*loc, "file://" + (catalog_table / "metadata").string() +
                      "/00010-0e7e3c9a-2f4e-4d7e-a3c4-7b9e8d1f0a22.metadata.json");
  auto m = LoadTableMetadata(io_, catalog_table.string());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->table_uuid, "9c12d441-03fe-4693-9a96-a0705ddf69c1");

  // Two files with the highest sequence number (a lost commit race): ambiguous.
  Write(catalog_table / "metadata" / "00010-ffffffff-2f4e-4d7e-a3c4-7b9e8d1f0a22.metadata.json",
        kV2);
  ExpectError(ResolveMetadataLocation(io_, catalog_table.string()).status(),
              arrow::StatusCode::Invalid, {"00010-", "share version 10"});
}

TEST_F(LoadTest, MissingFilesAreIOErrors) {
  const std::string missing_file = (dir_ / "nope" / "v1.metadata.json").string();
  ExpectError(LoadTableMetadata(io_, missing_file).status(), arrow::StatusCode::IOError,
              {missing_file});
  const std::string missing_table = (dir_ / "nope").string();
  ExpectError(LoadTableMetadata(io_, missing_table).status(), arrow::StatusCode::IOError,
              {missing_table});
  Write(dir_ / "empty" / "metadata" / "readme.txt", "x");
  ExpectError(LoadTableMetadata(io_, (dir_ / "empty").string()).status(),
              arrow::StatusCode::IOError, {"no metadata.json"});
  ExpectError(LoadTableMetadata(io_, "hdfs://nn/t").status(), arrow::StatusCode::Invalid,
              {"hdfs://nn/t/metadata"});
}

TEST_F(LoadTest, MalformedFileNamesItself) {
  const fs::path file = dir_ / "bad.metadata.json";
  Write(file, "{\n  \"format-version\": 2,\n  oops\n}");
  ExpectError(LoadTableMetadata(io_, file.string()).status(), arrow::StatusCode::Invalid,
              {file.string(), "byte 28", "line 3"});
}

TEST_F(LoadTest, InflatesGzipMetadata) {
  auto codec = arrow::util::Codec::Create(arrow::Compression::GZIP);
  ASSERT_TRUE(codec.ok()) << codec.status();
  std::string text = kV2;
  std::string compressed((*codec)->MaxCompressedLen(text.size(), nullptr), '\0');
  auto n = (*codec)->Compress(text.size(), reinterpret_cast<const uint8_t*>(text.data()),
                              compressed.size(), reinterpret_cast<uint8_t*>(compressed.data()));
  ASSERT_TRUE(n.ok()) << n.status();
  compressed.resize(*n);
  const fs::path table = dir_ / "gz";
  Write(table / "metadata" / "v3.gz.metadata.json", compressed);
  auto m = LoadTableMetadata(io_, table.string());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->snapshots.size(), 4u);
  EXPECT_EQ(m->metadata_location, (table / "metadata" / "v3.gz.metadata.json").string());
}

// A table written by pyiceberg (an independent writer): two appends, a column
// added, a third append.
using PyIcebergTest = TempDirTest;

TEST_F(PyIcebergTest, LoadsPyIcebergTable) {
  const std::string python = ICEFLOE_PYTHON_EXECUTABLE;
  if (std::system((python + " -c 'import pyiceberg.catalog.sql' 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "pyiceberg is not importable by " << python;
  }
  const std::string script = std::string(ICEFLOE_TESTDATA_DIR) + "/make_pyiceberg_table.py";
  const std::string log = (dir_ / "script.log").string();
  const std::string command =
      python + " " + script + " " + (dir_ / "warehouse").string() + " 2>" + log;
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), pipe)) out.append(buf, n);
  int rc = ::pclose(pipe);
  std::ifstream err(log);
  std::stringstream err_text;
  err_text << err.rdbuf();
  ASSERT_EQ(rc, 0) << command << "\n" << out << err_text.str();
  json result = json::parse(out);
  const std::string metadata_location = result["metadata_location"].get<std::string>();

  auto m = LoadTableMetadata(io_, metadata_location);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->format_version, 2);
  ASSERT_EQ(m->snapshots.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(m->snapshots[i].snapshot_id, result["snapshot_ids"][i].get<int64_t>());
    EXPECT_EQ(m->snapshots[i].sequence_number, static_cast<int64_t>(i + 1));
    EXPECT_EQ(m->snapshots[i].operation(), "append");
  }
  EXPECT_EQ(m->current_snapshot_id, result["current_snapshot_id"].get<int64_t>());
  EXPECT_EQ(m->current_schema_id, result["current_schema_id"].get<int32_t>());
  ASSERT_EQ(m->schemas.size(), 2u);
  EXPECT_EQ(m->schemas[0].schema_id, 0);
  EXPECT_EQ(m->schemas[1].schema_id, 1);
  const NestedField* note = m->CurrentSchema().FindByName("note");
  ASSERT_NE(note, nullptr);
  EXPECT_EQ(note->id, 4);
  EXPECT_EQ(note->type->ToString(), "string");
  EXPECT_FALSE(note->required);
  EXPECT_EQ(m->DefaultSpec().fields.at(0).transform.kind, Transform::kIdentity);
  EXPECT_EQ(m->DefaultSpec().fields.at(0).source_id, 3);

  // Time travel to the first append reads with the schema it was written with.
  auto first = SelectSnapshot(*m, SnapshotSelector::Id(m->snapshots[0].snapshot_id));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ((*m->SchemaFor(**first))->FindByName("note"), nullptr);
  auto as_of = SelectSnapshot(*m, SnapshotSelector::AsOf(m->snapshots[1].timestamp_ms));
  ASSERT_TRUE(as_of.ok()) << as_of.status();
  EXPECT_EQ((*as_of)->snapshot_id, m->snapshots[1].snapshot_id);

  const Snapshot* current = m->CurrentSnapshot();
  ASSERT_NE(current, nullptr);
  auto exists = io_.Exists(current->manifest_list);
  ASSERT_TRUE(exists.ok()) << exists.status();
  EXPECT_TRUE(*exists) << current->manifest_list;

  // The table directory resolves to the same, newest, metadata file.
  auto by_dir = ResolveMetadataLocation(io_, m->location);
  ASSERT_TRUE(by_dir.ok()) << by_dir.status();
  EXPECT_EQ(*by_dir, metadata_location);
}

}  // namespace icefloe::iceberg
