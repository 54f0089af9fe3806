#include "icefloe/protocol/messages.h"

#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "icefloe/client/assemble.h"
#include "icefloe/client/merge.h"
#include "icefloe/plan/plan.h"
#include "icefloe/protocol/data_file_json.h"
#include "icefloe/protocol/piece.h"
#include "icefloe/protocol/plan_ticket.h"

namespace icefloe {
namespace {

using json = nlohmann::json;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(MessagesTest, LoadRoundTripsAndJoinsOnEquality) {
  LoadRequest r;
  r.name = "a/b.c-d_e";
  r.source = "s3://bucket/t";
  r.snapshot_id = -42;
  r.columns = {"x", "y"};
  r.filter = "x > 1";
  r.batch_rows = 7;
  r.replication = 3;
  auto back = LoadRequest::Parse(Dump(r.ToJson()));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  back->filter = "x > 2";
  EXPECT_FALSE(*back == r);
}

TEST(MessagesTest, DescriptorsRoundTrip) {
  EpochDescriptor e;
  e.dataset = "d";
  e.seed = UINT64_MAX;
  e.shuffle = "sample";
  e.block_rows = 9;
  e.world_size = 4;
  e.rank = 3;
  e.batch_size = 16;
  e.drop_last = false;
  e.start = 100;
  auto parsed = ParseDescriptor(Dump(e.ToJson()));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const auto& back = std::get<EpochDescriptor>(*parsed);
  EXPECT_EQ(back.seed, UINT64_MAX);
  EXPECT_EQ(back.block_rows, 9u);
  EXPECT_EQ(back.rank, 3u);
  EXPECT_FALSE(back.drop_last);
  EXPECT_EQ(DescriptorDataset(*parsed), "d");

  RangeDescriptor r{"d", 5, std::nullopt};
  parsed = ParseDescriptor(Dump(r.ToJson()));
  ASSERT_TRUE(parsed.ok());
  EXPECT_FALSE(std::get<RangeDescriptor>(*parsed).stop.has_value());
  RowsDescriptor rows{"d", {3, 1, 3}};
  parsed = ParseDescriptor(Dump(rows.ToJson()));
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(std::get<RowsDescriptor>(*parsed).rows, rows.rows);
  // A projection round-trips in order; none is written as no field at all.
  EXPECT_FALSE(rows.ToJson().contains("columns"));
  RowsDescriptor projected{"d", {1}, {"b", "a"}};
  parsed = ParseDescriptor(Dump(projected.ToJson()));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(DescriptorColumns(*parsed), (std::vector<std::string>{"b", "a"}));
  // No kind: a range.
  parsed = ParseDescriptor(R"({"dataset": "d"})");
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(std::holds_alternative<RangeDescriptor>(*parsed));
}

TEST(MessagesTest, ALengthsRangeNamesItsEpochWholeOrNotAtAll) {
  RangeDescriptor r{"d", 0, std::nullopt, {}, "input_ids"};
  r.seed = 3;
  r.epoch = 1;
  r.world_size = 2;
  auto parsed = ParseDescriptor(Dump(r.ToJson()));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const auto& back = std::get<RangeDescriptor>(*parsed);
  EXPECT_EQ(back.seed, 3u);
  EXPECT_EQ(back.epoch, 1u);
  EXPECT_EQ(back.world_size, 2u);
  auto error = [](std::string_view cmd) { return ParseDescriptor(cmd).status().ToString(); };
  EXPECT_EQ(error(R"({"dataset": "d", "lengths": "x", "seed": 3, "world_size": 2})"),
            "Invalid: range descriptor: 'seed', 'epoch' and 'world_size' name one epoch "
            "together; 'epoch' missing");
  EXPECT_EQ(error(R"({"dataset": "d", "seed": 3, "epoch": 0, "world_size": 2})"),
            "Invalid: range descriptor: 'seed', 'epoch' and 'world_size' bind the epoch a "
            "lengths request plans; they need 'lengths'");
  EXPECT_EQ(error(R"({"dataset": "d", "lengths": "x", "seed": 3, "epoch": 0, "world_size": 0})")
                .substr(0, 8),
            "Invalid:");
}

TEST(MessagesTest, NodeMessagesRoundTrip) {
  NodeStatus s;
  s.location = "grpc://h:1";
  s.memory_limit_bytes = 100;
  s.datasets.push_back(
      {"d", 3, 10, 80, {{0, 5}, {7, 12}}, {{8, 12}}, 2, json{{"storage_name", "d"}}});
  s.datasets.push_back({"e", 4, 0, 0, {}, {}, 0, nullptr});
  NodeLoadState loading;
  loading.dataset = "e";
  loading.generation = 4;
  loading.state = LoadState::kLoading;
  loading.tasks_total = 2;
  s.loads.push_back(loading);
  RegisterRequest reg{"grpc://h:1", s};
  auto back = RegisterRequest::Parse(Dump(reg.ToJson()));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->status.datasets[0].ranges[1], (RowRange{7, 12}));
  EXPECT_EQ(back->status.datasets[0].disk_ranges, (std::vector<RowRange>{{8, 12}}));
  EXPECT_TRUE(back->status.datasets[1].disk_ranges.empty());
  EXPECT_EQ(back->status.datasets[0].readers, 2);
  EXPECT_EQ(back->status.datasets[0].record, (json{{"storage_name", "d"}}));
  EXPECT_TRUE(back->status.datasets[1].record.is_null());  // none kept: none sent
  EXPECT_EQ(back->status.loads[0].state, LoadState::kLoading);

  NodeLoadRequest load;
  load.dataset = "d";
  load.generation = 9;
  load.schema = json::parse(
      R"({"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "required": true, "type": "long"}]})");
  load.projection = {1};
  iceberg::ScanTask task;
  task.data_file.file_path = "file:///a.parquet";
  task.data_file.record_count = 5;
  iceberg::DataFile del;
  del.content = iceberg::FileContent::kEqualityDeletes;
  del.file_path = "file:///d.parquet";
  del.equality_ids = {1};
  task.deletes.push_back(del);
  load.tasks.push_back({0, task});
  auto load_back = NodeLoadRequest::Parse(Dump(load.ToJson()));
  ASSERT_TRUE(load_back.ok()) << load_back.status().ToString();
  EXPECT_EQ(load_back->tasks[0].task.deletes[0].equality_ids, std::vector<int32_t>{1});
  EXPECT_EQ(load_back->tasks[0].task.deletes[0].content, iceberg::FileContent::kEqualityDeletes);
  EXPECT_TRUE(load_back->tasks[0].task.whole_file());
  // A part of a split file keeps its row groups; a bad range is refused by name.
  load.tasks[0].task.first_row_group = 3;
  load.tasks[0].task.row_groups = 2;
  load_back = NodeLoadRequest::Parse(Dump(load.ToJson()));
  ASSERT_TRUE(load_back.ok()) << load_back.status().ToString();
  EXPECT_EQ(load_back->tasks[0].task.first_row_group, 3);
  EXPECT_EQ(load_back->tasks[0].task.row_groups, 2);
  json bad = load.ToJson();
  bad["tasks"][0]["row_groups"] = 0;
  auto refused = NodeLoadRequest::Parse(Dump(bad));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("row_groups"), std::string::npos) << refused.status();
  bad["tasks"][0]["row_groups"] = 1;
  bad["tasks"][0]["first_row_group"] = int64_t{1} << 31;
  refused = NodeLoadRequest::Parse(Dump(bad));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("first_row_group"), std::string::npos)
      << refused.status();
  // A refresh's reused task names its rows in the held copy the request names.
  EXPECT_FALSE(load_back->tasks[0].reused());
  load.tasks[0].task.first_row_group = 0;
  load.tasks[0].task.row_groups = -1;
  load.tasks[0].reuse_start = 1000;
  load.tasks[0].reuse_rows = 5;
  load.reuse_dataset = "d@3";
  load.reuse_generation = 3;
  load_back = NodeLoadRequest::Parse(Dump(load.ToJson()));
  ASSERT_TRUE(load_back.ok()) << load_back.status().ToString();
  ASSERT_TRUE(load_back->tasks[0].reused());
  EXPECT_EQ(load_back->tasks[0].reuse_start, 1000u);
  EXPECT_EQ(load_back->tasks[0].reuse_rows, 5);
  EXPECT_EQ(load_back->reuse_dataset, "d@3");
  EXPECT_EQ(load_back->reuse_generation, 3u);
  for (const char* missing : {"reuse_dataset", "reuse_generation"}) {
    bad = load.ToJson();
    bad.erase(missing);
    if (std::string(missing) == "reuse_generation") bad["reuse_generation"] = 0;
    refused = NodeLoadRequest::Parse(Dump(bad));
    ASSERT_FALSE(refused.ok()) << missing;
    EXPECT_NE(refused.status().message().find(missing), std::string::npos) << refused.status();
  }
  bad = load.ToJson();
  bad["tasks"][0].erase("reuse_start");
  refused = NodeLoadRequest::Parse(Dump(bad));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("reuse_start"), std::string::npos) << refused.status();
  bad = load.ToJson();
  bad["extend"] = true;
  refused = NodeLoadRequest::Parse(Dump(bad));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("extend"), std::string::npos) << refused.status();
  load.tasks[0].reuse_rows = -1;
  load.reuse_dataset.clear();
  load.reuse_generation = 0;

  NodeLoadState st;
  st.dataset = "d";
  st.generation = 9;
  st.state = LoadState::kStaged;
  st.task_rows = {5};
  auto st_back = NodeLoadState::FromJson(st.ToJson(), "reply");
  ASSERT_TRUE(st_back.ok());
  EXPECT_EQ(st_back->task_rows, st.task_rows);
  EXPECT_TRUE(st_back->finished());
}

DatasetDescription SampleDescription() {
  DatasetDescription d;
  d.name = "d";
  d.state = "ready";
  d.source = "file:///t";
  d.metadata_location = "file:///t/metadata/v1.metadata.json";
  d.snapshot_id = -3;
  d.columns = {"a"};
  d.generation = 7;
  d.rows = 10;
  d.bytes = 800;
  d.load_seconds = 0.25;
  d.scan.manifests_total = 1;
  d.scan.planning_ms = 2.5;
  d.transform = TransformSpec::FromJson(json{{"keep", {"a"}}}).ValueOrDie();
  d.model_sha256 = {std::string(64, 'a')};
  d.model_kind = {"tokenizer.json WordPiece"};
  d.schema = "c2NoZW1h";
  d.refresh = RefreshSummary{6, std::nullopt, 1, 2, 0, 10, 20, 0, 1, 0};
  d.heal_seconds = 1.5;
  d.files = std::vector<FileRun>{{"p", 0, 10}};
  d.slices = std::vector<ReplySlice>{{0, 10, {"grpc://a:1"}, std::vector<uint64_t>{4}},
                                     {10, 10, {}, std::vector<uint64_t>{}}};
  return d;
}

// Every reply of the head's actions, as the head writes it.
std::vector<std::pair<std::string, json>> SampleReplies() {
  DatasetDescription loading;  // what the head sends while a load plans
  loading.name = "e";
  loading.state = "loading";
  LoadProgressReply progress;
  progress.name = "e";
  progress.phase = "planning";
  progress.seconds = 0.5;
  SliceMapReply slice_map{
      "d", "d", 7, "ready", 10, "c2NoZW1h", {{0, 10, {"grpc://a:1"}, std::nullopt}}, "Z3I="};
  StatusReply status;
  status.datasets = {SampleDescription(), loading};
  status.datasets[0].slices_per_node = std::vector<NodeSlices>{{"grpc://a:1", 1}};
  status.loads = {progress};
  status.ready = true;
  status.nodes = {{"grpc://a:1", "alive", 1 << 20, 1 << 10, 0.5, "", "", json::array()},
                  {"grpc://b:1", "unknown", 0, 0, std::nullopt, "", "", json::array()}};
  status.jobs = {{"j",
                  {"d"},
                  {"grpc://a:1"},
                  2,
                  2,
                  0.25,
                  1000,
                  1,
                  0.5,
                  0.1,
                  100,
                  10,
                  1,
                  4,
                  {{"d", 100, 10, 1000}}}};
  status.retired = {{"d", 6, 7, 800, 1.5, 0.5}};
  status.recent_loads = {{"d", "ready", 10, 800, 0.25, "", 3}};
  FollowedDataset followed;
  followed.name = "d";
  followed.state = "following";
  followed.followed = true;
  followed.snapshot_id = -5;  // snapshot ids are any int64
  followed.lag_s = 0.5;
  status.follow = {30, {followed}};
  EpochShapeReply shape{10, 2, "window", 3, 3, 9, 3, 3, 1, 0, 0, 0, 7, 4, 128};
  return {{"dataset description", SampleDescription().ToJson()},
          {"dataset description", loading.ToJson()},
          {"load progress", progress.ToJson()},
          {"evict reply", EvictReply{"d", 800, false, {"grpc://b:1"}}.ToJson()},
          {"evict reply", EvictReply{"d", 0, true, {}}.ToJson()},
          {"slice_map reply", slice_map.ToJson()},
          {"ok reply", OkReply{}.ToJson()},
          {"status reply", status.ToJson()},
          {"epoch shape", shape.ToJson()},
          {"shared file", SharedFileReply{42, 7, 99, 4096, {2, 0}, "d", 3, {0, 10}}.ToJson()},
          {"slice", ReplySlice{3, 5, {"grpc://a:1"}, std::vector<uint64_t>{2}}.ToJson()}};
}

TEST(MessagesTest, RepliesRoundTrip) {
  for (const auto& [message, j] : SampleReplies()) {
    EXPECT_TRUE(ParseMessage(message, Dump(j)).ok())
        << message << " " << Dump(j) << " -> " << ParseMessage(message, Dump(j));
  }
  DatasetDescription d = SampleDescription();
  auto back = DatasetDescription::Parse(Dump(d.ToJson()));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(Dump(back->ToJson()), Dump(d.ToJson()));
  EXPECT_EQ(back->slices->at(0), (ReplySlice{0, 10, {"grpc://a:1"}, std::vector<uint64_t>{4}}));
  EXPECT_EQ(back->heal_seconds, 1.5);
  // No snapshot, no transform, no slices: those fields are left out.
  DatasetDescription bare;
  bare.name = "b";
  bare.state = "ready";
  json j = bare.ToJson();
  for (const char* absent :
       {"snapshot_id", "model_sha256", "model_kind", "transform", "slices", "files"}) {
    EXPECT_FALSE(j.contains(absent)) << absent;
  }
  EvictReply evict{"d", 5, false, {"grpc://a:1"}};
  auto evict_back = EvictReply::Parse(Dump(evict.ToJson()));
  ASSERT_TRUE(evict_back.ok()) << evict_back.status();
  EXPECT_EQ(*evict_back, evict);
  LoadProgressReply progress;
  progress.name = "p";
  progress.seconds = 2.5;
  auto progress_back = LoadProgressReply::Parse(Dump(progress.ToJson()));
  ASSERT_TRUE(progress_back.ok()) << progress_back.status();
  EXPECT_EQ(*progress_back, progress);
  SliceMapReply slice_map{"d", "d@1", 1, "degraded", 4, "cw==", {{0, 4, {}, std::nullopt}}, "Zw=="};
  auto slice_map_back = SliceMapReply::Parse(Dump(slice_map.ToJson()));
  ASSERT_TRUE(slice_map_back.ok()) << slice_map_back.status();
  EXPECT_EQ(*slice_map_back, slice_map);
  auto status_back = StatusReply::Parse(Dump(SampleReplies()[7].second));
  ASSERT_TRUE(status_back.ok()) << status_back.status();
  EXPECT_EQ(status_back->datasets[1].state, "loading");
  EXPECT_EQ(status_back->loads[0].phase, "planning");
}

// A reply missing a required field, or with a field of the wrong type, is
// refused naming the field: for every field of every reply.
TEST(MessagesTest, RepliesRefuseMissingAndWrongTypedFields) {
  std::map<std::string, MessageSpec> specs;
  for (auto& spec : AllMessageSpecs()) specs[std::string(spec.name)] = spec;
  int checked = 0;
  for (const auto& [message, sample] : SampleReplies()) {
    ASSERT_TRUE(specs.count(message)) << message;
    for (const FieldSpec& f : specs[message].fields) {
      const std::string name(f.name);
      const std::string needle = "'" + name + "'";
      if (f.required) {
        json bad = sample;
        bad.erase(name);
        arrow::Status st = ParseMessage(message, Dump(bad));
        ASSERT_FALSE(st.ok()) << message << " without " << name;
        EXPECT_TRUE(st.IsInvalid()) << st;
        EXPECT_NE(st.message().find(needle), std::string::npos) << st;
      }
      json bad = sample;
      bad[name] = f.type == FieldType::kString ? json(5) : json("x");
      arrow::Status st = ParseMessage(message, Dump(bad));
      ASSERT_FALSE(st.ok()) << message << " with a string " << name;
      EXPECT_TRUE(st.IsInvalid()) << st;
      EXPECT_NE(st.message().find(needle), std::string::npos) << st;
      bad[name] = nullptr;  // null is no value of any field
      EXPECT_FALSE(ParseMessage(message, Dump(bad)).ok()) << message << " " << name;
      ++checked;
    }
  }
  EXPECT_GT(checked, 80);
  // Nested replies name their place; cross-field rules hold.
  json status = SampleReplies()[7].second;
  status["datasets"][1]["rows"] = -1;
  arrow::Status st = ParseMessage("status reply", Dump(status));
  EXPECT_NE(st.message().find("status reply 'datasets'[1]: 'rows'"), std::string::npos) << st;
  json slice_map = SampleReplies()[5].second;
  slice_map["slices"][0]["stop"] = 0;
  slice_map["slices"][0]["start"] = 1;
  st = ParseMessage("slice_map reply", Dump(slice_map));
  EXPECT_NE(st.message().find("'stop' 0 is before 'start' 1"), std::string::npos) << st;
  // A description's disk rows: one count per node, none beyond the slice.
  json described = SampleReplies()[7].second["datasets"][0];
  described["slices"][0]["disk_rows"] = {4, 1};
  st = ParseMessage("dataset description", Dump(described));
  EXPECT_NE(st.message().find("'disk_rows' has 2 counts for 1 nodes"), std::string::npos) << st;
  described["slices"][0]["disk_rows"] = {11};
  st = ParseMessage("dataset description", Dump(described));
  EXPECT_NE(st.message().find("'disk_rows' 11 is more than the slice's 10 rows"), std::string::npos)
      << st;
  json progress = SampleReplies()[2].second;
  progress["seconds"] = true;
  st = ParseMessage("load progress", Dump(progress));
  EXPECT_NE(st.message().find("'seconds' must be a number"), std::string::npos) << st;
}

// The shared vectors: every case here is also checked by the Python client's
// encoder and against a running cluster (tests/test_protocol_vectors.py).
TEST(MessagesTest, SharedVectors) {
  json doc = json::parse(ReadFile(ICEFLOE_PROTOCOL_TESTDATA "/vectors.json"), nullptr, false);
  ASSERT_TRUE(doc.is_object());
  int checked = 0;
  for (const auto& c : doc["cases"]) {
    const std::string message = c["message"].get<std::string>();
    const std::string body = c.contains("text") ? c["text"].get<std::string>() : Dump(c["body"]);
    arrow::Status st = ParseMessage(message, body);
    const std::string where = message + " " + body.substr(0, 200);
    if (c.contains("error_text")) {
      ASSERT_FALSE(st.ok()) << where;
      EXPECT_NE(st.message().find(c["error_text"].get<std::string>()), std::string::npos)
          << where << " -> " << st.ToString();
    } else if (c["error"].is_null()) {
      EXPECT_TRUE(st.ok()) << where << " -> " << st.ToString();
    } else {
      ASSERT_FALSE(st.ok()) << where;
      EXPECT_TRUE(st.IsInvalid()) << where << " -> " << st.ToString();
      std::string field = "'" + c["error"].get<std::string>() + "'";
      EXPECT_NE(st.message().find(field), std::string::npos) << where << " -> " << st.ToString();
    }
    ++checked;
  }
  EXPECT_GT(checked, 150);
}

// The constants both languages need, from their C++ definitions.
json SharedConstants() {
  json errors = json::object();
  const std::pair<const char*, PieceError> named[] = {{"truncated", PieceError::kTruncated},
                                                      {"bad_magic", PieceError::kBadMagic},
                                                      {"bad_version", PieceError::kBadVersion},
                                                      {"unknown_flags", PieceError::kUnknownFlags},
                                                      {"reserved", PieceError::kReserved},
                                                      {"bad_count", PieceError::kBadCount},
                                                      {"bad_last_size", PieceError::kBadLastSize},
                                                      {"too_many_rows", PieceError::kTooManyRows},
                                                      {"whole_entries", PieceError::kWholeEntries},
                                                      {"stray_sources", PieceError::kStraySources},
                                                      {"length", PieceError::kLength}};
  for (const auto& [name, error] : named) errors[name] = PieceErrorText(error);
  json piece = {{"magic", std::string(kPieceMagic)},
                {"version", kPieceVersion},
                {"header_bytes", kPieceHeaderBytes},
                {"flags",
                 {{"positions", kPiecePositions},
                  {"whole", kPieceWhole},
                  {"span", kPieceSpan},
                  {"by_reference", kPieceByReference}}},
                {"errors", errors}};
  // The client library's C ABI (client/merge.h, client/assemble.h), which
  // Python calls through ctypes.
  json client = {{"merge_steps",
                  {{"error", ICEFLOE_MERGE_ERROR},
                   {"need", ICEFLOE_MERGE_NEED},
                   {"batch", ICEFLOE_MERGE_BATCH},
                   {"chunk", ICEFLOE_MERGE_CHUNK},
                   {"done", ICEFLOE_MERGE_DONE}}},
                 {"merge_flags", {{"copy", ICEFLOE_MERGE_COPY}}},
                 {"rows", {{"carried", ICEFLOE_ROWS_CARRIED}, {"in_file", ICEFLOE_ROWS_IN_FILE}}},
                 {"assemble_results",
                  {{"ok", kIcefloeAssembleOk},
                   {"malformed", kIcefloeAssembleMalformed},
                   {"outside", kIcefloeAssembleOutside},
                   {"twice", kIcefloeAssembleTwice},
                   {"count", kIcefloeAssembleCount},
                   {"no_memory", kIcefloeAssembleNoMemory},
                   {"outside_source", kIcefloeAssembleOutsideSource},
                   {"unsupported", kIcefloeAssembleUnsupported},
                   {"bad_offsets", kIcefloeAssembleBadOffsets}}}};
  return {{"epoch_order_version", kEpochOrderVersion},
          {"max_take_rows", kMaxTicketRows},
          {"piece", piece},
          {"client", client}};
}

// python/icefloe/_fields.json is what the Python client encodes from: the
// same list as the C++ tables. Regenerate it with the file this test writes.
TEST(MessagesTest, PythonFieldListMatches) {
  json specs = json::array();
  for (const auto& spec : AllMessageSpecs()) specs.push_back(SpecToJson(spec));
  json expected = {{"comment",
                    "Generated from the C++ field tables (cpp/icefloe/protocol); "
                    "protocol_test checks it. Do not edit by hand."},
                   {"version", kProtocolVersion},
                   {"constants", SharedConstants()},
                   {"messages", specs}};
  // One field per line, so reviews of the file read like the tables.
  std::string text = "{\"comment\": " + Dump(expected["comment"]) +
                     ",\n \"version\": " + Dump(expected["version"]) +
                     ",\n \"constants\": " + Dump(expected["constants"]) + ",\n \"messages\": [";
  for (size_t m = 0; m < specs.size(); ++m) {
    text += std::string(m ? "," : "") + "\n  {\"message\": " + Dump(specs[m]["message"]) +
            ", \"fields\": [";
    const auto& fields = specs[m]["fields"];
    for (size_t f = 0; f < fields.size(); ++f) {
      text += std::string(f ? "," : "") + "\n    " + Dump(fields[f]);
    }
    text += "]}";
  }
  text += "\n]}\n";
  const std::string fresh = "_fields.json.expected";
  std::ofstream(fresh) << text;
  json actual = json::parse(ReadFile(ICEFLOE_FIELDS_JSON), nullptr, false);
  EXPECT_EQ(actual, expected) << "python/icefloe/_fields.json is out of date: copy " << fresh
                              << " (in the test's working directory) over it";
}

}  // namespace
}  // namespace icefloe

namespace icefloe {
namespace {

// Each counter its own value, set by its name (not through kLoadCounters,
// the list under test).
iceberg::LoadCounters SampleCounters() {
  iceberg::LoadCounters c;
  c.row_groups_total = 11;
  c.row_groups_read = 12;
  c.pack_documents = 13;
  c.pack_tokens = 14;
  c.pack_pad_tokens = 15;
  c.pack_rows = 16;
  c.pack_overlong_split = 17;
  c.pack_overlong_dropped = 18;
  c.pack_tail_dropped_tokens = 19;
  c.transform_rows_dropped = 20;
  return c;
}

// The load's counters on the wire, pinned to the bytes: the node's load
// state and describe's `scan` carry each counter under its own name, flat, as
// every earlier version wrote them (catalog records kept by nodes and clients
// reading describe()["scan"] depend on it). Each counter has its own value,
// so a counter written under another's name fails too.
TEST(MessagesTest, LoadCountersKeepTheirWireNamesAndValues) {
  NodeLoadState s;
  s.dataset = "d";
  s.generation = 3;
  s.state = LoadState::kStaged;
  s.bytes_read = 10;
  s.counters() = SampleCounters();
  const std::string node_wire =
      R"({"bytes":0,"bytes_read":10,"dataset":"d","error":"","error_kind":"","generation":3,)"
      R"("pack_documents":13,"pack_overlong_dropped":18,"pack_overlong_split":17,)"
      R"("pack_pad_tokens":15,"pack_rows":16,"pack_tail_dropped_tokens":19,"pack_tokens":14,)"
      R"("row_groups_read":12,"row_groups_total":11,"rows":0,"state":"staged","task_rows":[],)"
      R"("tasks_done":0,"tasks_total":0,"transform_rows_dropped":20,"v":1})";
  EXPECT_EQ(Dump(s.ToJson()), node_wire);
  auto node_back = NodeLoadState::FromJson(json::parse(node_wire), "node.load_status reply");
  ASSERT_TRUE(node_back.ok()) << node_back.status();
  EXPECT_EQ(Dump(node_back->ToJson()), node_wire);

  iceberg::ScanMetrics scan;
  scan.manifests_total = 1;
  scan.manifests_pruned = 2;
  scan.manifests_cached = 3;
  scan.data_files_total = 4;
  scan.data_files_pruned_by_partition = 5;
  scan.data_files_pruned_by_bounds = 6;
  scan.delete_files = 7;
  scan.counters() = SampleCounters();
  scan.planning_ms = 2.5;
  const std::string scan_wire =
      R"({"data_files_pruned_by_bounds":6,"data_files_pruned_by_partition":5,)"
      R"("data_files_total":4,"delete_files":7,"manifests_cached":3,"manifests_pruned":2,)"
      R"("manifests_total":1,"pack_documents":13,"pack_overlong_dropped":18,)"
      R"("pack_overlong_split":17,"pack_pad_tokens":15,"pack_rows":16,)"
      R"("pack_tail_dropped_tokens":19,"pack_tokens":14,"planning_ms":2.5,"row_groups_read":12,)"
      R"("row_groups_total":11,"transform_rows_dropped":20})";
  EXPECT_EQ(Dump(ScanMetricsToJson(scan)), scan_wire);
  auto scan_back = ScanMetricsFromJson(json::parse(scan_wire), "scan");
  ASSERT_TRUE(scan_back.ok()) << scan_back.status();
  EXPECT_EQ(Dump(ScanMetricsToJson(*scan_back)), scan_wire);
  // A record from before a counter existed reads it as 0.
  auto old = ScanMetricsFromJson(json{{"manifests_total", 1}, {"row_groups_read", 2}}, "scan");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->row_groups_read, 2);
  EXPECT_EQ(old->pack_tail_dropped_tokens, 0);
  EXPECT_EQ(old->transform_rows_dropped, 0);
}

// Every counter of the one list, whichever is added next, travels in both
// messages under its name and reads back as written.
TEST(MessagesTest, EveryLoadCounterTravelsInBothMessages) {
  NodeLoadState s;
  s.dataset = "d";
  iceberg::ScanMetrics scan;
  for (size_t k = 0; k < std::size(iceberg::kLoadCounters); ++k) {
    const iceberg::LoadCounter& c = iceberg::kLoadCounters[k];
    s.*c.member = static_cast<int64_t>(100 + k);
    scan.*c.member = static_cast<int64_t>(200 + k);
  }
  const json node_json = s.ToJson();
  const json scan_json = ScanMetricsToJson(scan);
  auto node_back = NodeLoadState::FromJson(node_json, "node.load_status reply");
  auto scan_back = ScanMetricsFromJson(scan_json, "scan");
  ASSERT_TRUE(node_back.ok()) << node_back.status();
  ASSERT_TRUE(scan_back.ok()) << scan_back.status();
  EXPECT_EQ(node_back->counters(), s.counters());
  EXPECT_EQ(scan_back->counters(), scan.counters());
  for (size_t k = 0; k < std::size(iceberg::kLoadCounters); ++k) {
    const std::string name(iceberg::kLoadCounters[k].name);
    EXPECT_EQ(node_json[name], 100 + k) << name;
    EXPECT_EQ(scan_json[name], 200 + k) << name;
  }
}

}  // namespace
}  // namespace icefloe
