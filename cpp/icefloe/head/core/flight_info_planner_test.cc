// FlightInfoPlanner without a server: the range, epoch, rows, Kubeflow and
// slice-map answers for a small catalog entry, the copy an epoch is bound
// to, live replicas first, and each error's words.
#include "icefloe/head/core/flight_info_planner.h"

#include <set>

#include <arrow/type.h>
#include <arrow/util/base64.h>
#include <gtest/gtest.h>

#include "icefloe/head/core/silent_node_rpc.h"
#include "icefloe/protocol/plan_ticket.h"
#include "icefloe/protocol/ticket.h"

namespace icefloe {
namespace {

constexpr const char* kA = "grpc://10.0.0.1:50051";
constexpr const char* kB = "grpc://10.0.0.2:50051";
constexpr const char* kKey = "planner-test-secret";

// Dataset "d": 10 rows of (id, text), generation 7, stored as "d-store",
// replicated twice: [0, 4) on A then B, [4, 7) on B then A, [7, 10) on A then B.
std::shared_ptr<DatasetEntry> Entry(uint64_t generation = 7) {
  auto e = std::make_shared<DatasetEntry>();
  e->name = "d";
  e->storage_name = "d-store";
  e->generation = generation;
  e->state = CopyState::kReady;
  e->request.name = "d";
  e->request.replication = 2;
  e->schema = arrow::schema(
      {arrow::field("id", arrow::int64(), false), arrow::field("text", arrow::utf8())});
  e->num_rows = 10;
  e->nbytes = 2000;
  e->slices = {{0, 4, {kA, kB}}, {4, 7, {kB, kA}}, {7, 10, {kA, kB}}};
  e->nodes = {kA, kB};
  return e;
}

class FlightInfoPlannerTest : public ::testing::Test {
 protected:
  FlightInfoPlannerTest() {
    for (const char* n : {kA, kB}) Alive(n);
    catalog_.Put(Entry());
  }

  void Alive(const std::string& node) {
    NodeStatus status;
    status.location = node;
    registry_.Heartbeat(node, status);
  }

  FlightInfoPlanner Planner(std::string default_dataset = "d") {
    return FlightInfoPlanner(
        &catalog_, &registry_, [this](const std::string& n) { return loading_.count(n) > 0; }, kKey,
        std::move(default_dataset));
  }

  static NativeTicket Ticket(const PlannedEndpoint& e) {
    auto t = DecodeNativeTicket(e.ticket, kKey);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? *t : NativeTicket{};
  }

  SilentNodeRpc rpc_;  // the registry only hears heartbeats here
  ThreadPool calls_{"planner-test calls", 1, 16};
  NodeRegistry registry_{&rpc_, &calls_, RegistryOptions{}};
  Catalog catalog_;
  std::set<std::string> loading_;
};

// `status`'s code and message, e.g. "Key error: unknown dataset 'x'".
std::string Error(const arrow::Status& status) { return status.ToString(); }

TEST_F(FlightInfoPlannerTest, RangeHasOneEndpointPerSliceItTouches) {
  auto info = Planner().Range({"d", 2, 8});
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  ASSERT_EQ(info->endpoints.size(), 3u);
  const std::vector<RowRange> rows = {{2, 4}, {4, 7}, {7, 8}};
  const std::vector<std::vector<std::string>> nodes = {{kA, kB}, {kB, kA}, {kA, kB}};
  for (size_t i = 0; i < 3; ++i) {
    const NativeTicket t = Ticket(info->endpoints[i]);
    EXPECT_TRUE(t.signed_);
    EXPECT_EQ(t.header.kind, TicketKind::kRange);
    EXPECT_EQ(t.header.dataset, "d-store");
    EXPECT_EQ(t.header.generation, 7u);
    EXPECT_TRUE(t.header.columns.empty());
    auto range = DecodeRangeBody(t.body);
    ASSERT_TRUE(range.ok());
    EXPECT_EQ(range->start, rows[i].start);
    EXPECT_EQ(range->stop, rows[i].stop);
    EXPECT_EQ(info->endpoints[i].nodes, nodes[i]);
    EXPECT_TRUE(info->endpoints[i].app_metadata.empty());
  }
  EXPECT_EQ(info->total_records, 6);
  // 2000 bytes over 2 replicas, 6 of 10 rows.
  EXPECT_EQ(info->total_bytes, 600);
  EXPECT_TRUE(info->ordered);
  EXPECT_TRUE(info->schema->Equals(*Entry()->schema));
  EXPECT_TRUE(info->app_metadata.empty());
}

TEST_F(FlightInfoPlannerTest, RangeWithoutStopReadsToTheEndAndProjects) {
  RangeDescriptor d{"d", 6, std::nullopt, {"text"}};
  auto info = Planner().Range(d);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  ASSERT_EQ(info->endpoints.size(), 2u);
  EXPECT_EQ(info->total_records, 4);
  ASSERT_EQ(info->schema->num_fields(), 1);
  EXPECT_EQ(info->schema->field(0)->name(), "text");
  EXPECT_EQ(Ticket(info->endpoints[0]).header.columns, std::vector<uint16_t>{1});
}

TEST_F(FlightInfoPlannerTest, RangeErrors) {
  auto planner = Planner();
  EXPECT_EQ(Error(planner.Range({"d", 0, 11}).status()),
            "Index error: range [0, 11) is outside dataset 'd' of 10 rows");
  EXPECT_EQ(Error(planner.Range({"d", 11, std::nullopt}).status()),
            "Index error: range [11, 10) is outside dataset 'd' of 10 rows");
  EXPECT_EQ(Error(planner.Range({"nope", 0, 1}).status()), "Key error: unknown dataset 'nope'");
  loading_.insert("soon");
  EXPECT_EQ(Error(planner.Range({"soon", 0, 1}).status()),
            "Invalid: dataset 'soon' is still loading");
  EXPECT_EQ(Error(planner.Range({"d", 0, 1, {"text", "text"}}).status()),
            "Invalid: range descriptor: 'columns'[1]: column 'text' is asked for twice");
  auto failed = Entry();
  failed->name = "f";
  failed->state = CopyState::kFailed;
  failed->error = "the table is gone";
  catalog_.Put(failed);
  EXPECT_EQ(Error(planner.Range({"f", 0, 1}).status()),
            "Invalid: dataset 'f' is failed: the table is gone");
}

TEST_F(FlightInfoPlannerTest, LiveReplicasComeFirst) {
  // A registry that has heard only from B: A's slices list B first.
  NodeRegistry only_b(&rpc_, &calls_, RegistryOptions{});
  NodeStatus status;
  status.location = kB;
  only_b.Heartbeat(kB, status);
  FlightInfoPlanner planner(
      &catalog_, &only_b, [](const std::string&) { return false; }, kKey, "");
  auto info = planner.Whole("d");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  ASSERT_EQ(info->endpoints.size(), 3u);
  for (const auto& e : info->endpoints) {
    EXPECT_EQ(e.nodes, (std::vector<std::string>{kB, kA}));
  }
  EXPECT_EQ(info->total_records, 10);
  // The catalog's entry keeps its order.
  EXPECT_EQ(catalog_.Find("d")->slices[0].nodes, (std::vector<std::string>{kA, kB}));
}

TEST_F(FlightInfoPlannerTest, PathNamesADatasetOrAKubeflowShard) {
  auto planner = Planner();
  EXPECT_TRUE(planner.NamesDataset({"d"}));
  EXPECT_FALSE(planner.NamesDataset({"e"}));
  EXPECT_FALSE(planner.NamesDataset({"0", "2"}));
  EXPECT_FALSE(planner.NamesDataset({}));
}

TEST_F(FlightInfoPlannerTest, KubeflowShardHasOneEndpointPerSliceWithTheTicketAsMetadata) {
  // Shard 1 of 2 of 10 rows: rows 5..9, in the slices [4, 7) and [7, 10).
  auto info = Planner().Kubeflow({"1", "2"});
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  ASSERT_EQ(info->endpoints.size(), 2u);
  auto first = DecodeKubeflowTicket(info->endpoints[0].ticket);
  auto second = DecodeKubeflowTicket(info->endpoints[1].ticket);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->start, 5u);
  EXPECT_EQ(first->end, 6u);
  EXPECT_EQ(second->start, 7u);
  EXPECT_EQ(second->end, 9u);
  EXPECT_EQ(info->endpoints[0].nodes, (std::vector<std::string>{kB, kA}));
  EXPECT_EQ(info->endpoints[0].app_metadata, info->endpoints[0].ticket);
  EXPECT_EQ(info->total_records, -1);
  EXPECT_EQ(info->total_bytes, -1);
  EXPECT_FALSE(info->ordered);
}

TEST_F(FlightInfoPlannerTest, KubeflowErrors) {
  EXPECT_EQ(Error(Planner("").Kubeflow({"0", "2"}).status()),
            "Invalid: this head has no default dataset for PATH [index, total] descriptors "
            "(start it with --default-dataset)");
  EXPECT_EQ(Error(Planner("nope").Kubeflow({"0", "2"}).status()),
            "Key error: unknown dataset 'nope'");
  EXPECT_EQ(Error(Planner().Kubeflow({"2", "2"}).status()), "Index error: Invalid partition range");
}

EpochDescriptor Epoch(uint64_t epoch = 0) {
  EpochDescriptor d;
  d.dataset = "d";
  d.seed = 11;
  d.epoch = epoch;
  d.batch_size = 3;
  return d;
}

TEST_F(FlightInfoPlannerTest, EpochHasOnePlanTicketPerReplicaSetAndItsShape) {
  auto info = Planner().Epoch(Epoch());
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  // Replica sets {A, B} (slices [0, 4) and [7, 10)) and {B, A} ([4, 7)).
  ASSERT_EQ(info->endpoints.size(), 2u);
  EXPECT_EQ(info->endpoints[0].nodes, (std::vector<std::string>{kA, kB}));
  EXPECT_EQ(info->endpoints[1].nodes, (std::vector<std::string>{kB, kA}));
  const NativeTicket t = Ticket(info->endpoints[0]);
  EXPECT_EQ(t.header.kind, TicketKind::kPlan);
  EXPECT_EQ(t.header.dataset, "d-store");
  EXPECT_EQ(t.header.generation, 7u);
  auto plan = DecodePlanBody(t.body);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->owned, (std::vector<RowRange>{{0, 4}, {7, 10}}));
  EXPECT_EQ(plan->params.order.seed, 11u);
  EXPECT_EQ(plan->batch_begin, 0u);
  EXPECT_EQ(plan->batch_end, 3u);
  // 10 rows in batches of 3, the last short one dropped.
  auto shape = EpochShapeReply::Parse(info->app_metadata);
  ASSERT_TRUE(shape.ok()) << shape.status().ToString();
  EXPECT_EQ(shape->num_rows, 10);
  EXPECT_EQ(shape->order_version, kEpochOrderVersion);
  EXPECT_EQ(shape->shuffle, "window");
  EXPECT_EQ(shape->steps, 3u);
  EXPECT_EQ(shape->worker_batches, 3u);
  EXPECT_EQ(shape->worker_rows, 9u);
  EXPECT_EQ(shape->batch_size, 3u);
  EXPECT_EQ(shape->dropped_rows, 1u);
  EXPECT_EQ(shape->generation, 7u);
  EXPECT_EQ(info->total_records, 9);
  EXPECT_EQ(info->total_bytes, -1);
  EXPECT_FALSE(info->ordered);
}

TEST_F(FlightInfoPlannerTest, AnEpochReadsTheGenerationItWasBoundTo) {
  auto planner = Planner();
  ASSERT_TRUE(planner.Epoch(Epoch(0)).ok());
  // A reload publishes generation 8 and keeps 7 for its readers.
  auto old = catalog_.Find("d");
  ASSERT_TRUE(catalog_.Replace(old, Entry(8)));
  catalog_.Retire(old, 8, std::chrono::steady_clock::now());
  auto generation_of = [&planner](const EpochDescriptor& d) -> uint64_t {
    auto info = planner.Epoch(d);
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    if (!info.ok()) return 0;
    return EpochShapeReply::Parse(info->app_metadata)->generation;
  };
  EXPECT_EQ(generation_of(Epoch(0)), 7u);  // the same epoch: the copy it started on
  EXPECT_EQ(generation_of(Epoch(1)), 8u);  // the next: the newest
  EpochDescriptor gone = Epoch(0);
  gone.generation = 5;
  EXPECT_EQ(Error(planner.Epoch(gone).status()),
            "Invalid: dataset 'd' generation 5 is no longer cached: it was replaced by "
            "generation 8 and freed (a replaced copy is kept while it has readers, up to "
            "--retain-s); start the epoch again on generation 8");
}

TEST_F(FlightInfoPlannerTest, EpochErrors) {
  auto planner = Planner();
  EpochDescriptor d = Epoch();
  d.order_version = 1;
  EXPECT_EQ(Error(planner.Epoch(d).status()),
            "Invalid: epoch descriptor: 'order_version': order version 1 is not this head's " +
                std::to_string(kEpochOrderVersion) + " (the state was saved by another release)");
  d = Epoch();
  d.first_batch = 4;
  EXPECT_EQ(Error(planner.Epoch(d).status()),
            "Invalid: epoch descriptor: 'first_batch' 4 is past this worker's 3 batches");
  d = Epoch();
  d.resume_steps = 1;
  EXPECT_EQ(Error(planner.Epoch(d).status()),
            "Invalid: epoch descriptor: 'resume_steps' needs 'resume_world_size' and "
            "'resume_batch_size'");
  d = Epoch();
  d.columns = {"label"};
  EXPECT_EQ(Error(planner.Epoch(d).status()),
            "Invalid: epoch descriptor: 'columns'[0]: no column 'label' in the dataset (2 "
            "columns: id, text)");
  d = Epoch();
  d.dataset = "nope";
  EXPECT_EQ(Error(planner.Epoch(d).status()), "Key error: unknown dataset 'nope'");
}

TEST_F(FlightInfoPlannerTest, RowsHaveOneTicketPerReplicaSetHoldingSome) {
  RowsDescriptor d{"d", {9, 0, 5, 0}, {}};
  auto info = Planner().Rows(d);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  ASSERT_EQ(info->endpoints.size(), 2u);
  EXPECT_EQ(info->total_records, 4);
  EXPECT_EQ(info->endpoints[0].nodes, (std::vector<std::string>{kA, kB}));
  auto a = DecodeRowsBody(Ticket(info->endpoints[0]).body);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->total, 4u);
  EXPECT_EQ(a->rows, (std::vector<uint64_t>{9, 0, 0}));
  EXPECT_EQ(a->positions, (std::vector<uint32_t>{0, 1, 3}));
  auto b = DecodeRowsBody(Ticket(info->endpoints[1]).body);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->rows, (std::vector<uint64_t>{5}));
  EXPECT_EQ(b->positions, (std::vector<uint32_t>{2}));
  EXPECT_EQ(Ticket(info->endpoints[1]).header.kind, TicketKind::kRows);
}

TEST_F(FlightInfoPlannerTest, RowsErrors) {
  auto planner = Planner();
  EXPECT_EQ(Error(planner.Rows({"d", {3, 10}, {}}).status()),
            "Invalid: rows descriptor: 'rows'[1] = 10 is outside dataset 'd' of 10 rows");
  // Slices that leave a gap cannot answer every row.
  auto gap = Entry();
  gap->name = "gap";
  gap->slices = {{0, 4, {kA}}, {5, 10, {kB}}};
  catalog_.Put(gap);
  EXPECT_EQ(Error(planner.Rows({"gap", {1}, {}}).status()),
            "Unknown error: dataset 'gap': its slices do not tile [0, 10) (a gap at row 4)");
}

TEST_F(FlightInfoPlannerTest, SliceMapListsTheSlicesAndGrantsTheCopy) {
  auto reply = Planner().SliceMap("d", {"text"});
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->name, "d");
  EXPECT_EQ(reply->storage, "d-store");
  EXPECT_EQ(reply->generation, 7u);
  EXPECT_EQ(reply->state, "ready");
  EXPECT_EQ(reply->rows, 10);
  ASSERT_EQ(reply->slices.size(), 3u);
  EXPECT_EQ(reply->slices[1].start, 4u);
  EXPECT_EQ(reply->slices[1].stop, 7u);
  EXPECT_EQ(reply->slices[1].nodes, (std::vector<std::string>{kB, kA}));
  EXPECT_FALSE(reply->slices[1].disk_rows.has_value());
  EXPECT_EQ(reply->schema, SchemaToBase64(*arrow::schema({arrow::field("text", arrow::utf8())})));
  // The grant is a read grant on the copy with the projection, signed.
  auto grant = arrow::util::base64_decode(reply->grant);
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  auto granted =
      DecodeNativeTicket(EncodeGrantedRowsTicket(*grant, EncodeRowsBody({1, {0}, {3}})), kKey);
  ASSERT_TRUE(granted.ok()) << granted.status().ToString();
  EXPECT_EQ(granted->header.kind, TicketKind::kGrantedRows);
  EXPECT_EQ(granted->header.dataset, "d-store");
  EXPECT_EQ(granted->header.generation, 7u);
  EXPECT_EQ(granted->header.columns, std::vector<uint16_t>{1});
}

TEST_F(FlightInfoPlannerTest, SliceMapErrors) {
  auto planner = Planner();
  EXPECT_EQ(Error(planner.SliceMap("nope", {}).status()), "Key error: unknown dataset 'nope'");
  EXPECT_EQ(Error(planner.SliceMap("d", {"label"}).status()),
            "Invalid: slice_map: 'columns'[0]: no column 'label' in the dataset (2 columns: "
            "id, text)");
}

TEST_F(FlightInfoPlannerTest, SliceMapOfAGenerationMapsTheCopyARefreshReplaced) {
  auto planner = Planner();
  // A refresh publishes generation 8 and keeps 7 for its readers.
  auto old = catalog_.Find("d");
  ASSERT_TRUE(catalog_.Replace(old, Entry(8)));
  const auto retired_at = std::chrono::steady_clock::now() - std::chrono::seconds(60);
  catalog_.Retire(old, 8, retired_at);
  auto grant_generation = [](const SliceMapReply& reply) -> uint64_t {
    auto grant = arrow::util::base64_decode(reply.grant);
    auto granted =
        DecodeNativeTicket(EncodeGrantedRowsTicket(*grant, EncodeRowsBody({1, {0}, {3}})), kKey);
    EXPECT_TRUE(granted.ok()) << granted.status().ToString();
    return granted.ok() ? granted->header.generation : 0;
  };
  auto current = planner.SliceMap("d", {});
  ASSERT_TRUE(current.ok()) << current.status().ToString();
  EXPECT_EQ(current->generation, 8u);
  auto kept = planner.SliceMap("d", {}, 7);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(kept->generation, 7u);
  EXPECT_EQ(grant_generation(*kept), 7u);  // its grant reads the replaced copy
  // Asking for it counts as a use: the head keeps it for this reader.
  ASSERT_EQ(catalog_.Retired().size(), 1u);
  EXPECT_GT(catalog_.Retired()[0].last_used, retired_at);
  // A range (the lengths a token-budget plan is made from) of the kept copy.
  RangeDescriptor range;
  range.dataset = "d";
  range.generation = 7;
  auto ranged = planner.Range(range);
  ASSERT_TRUE(ranged.ok()) << ranged.status().ToString();
  ASSERT_FALSE(ranged->endpoints.empty());
  auto ticket = DecodeNativeTicket(ranged->endpoints[0].ticket, kKey);
  ASSERT_TRUE(ticket.ok()) << ticket.status().ToString();
  EXPECT_EQ(ticket->header.generation, 7u);
  range.generation = 5;
  EXPECT_EQ(Error(planner.Range(range).status()).substr(0, 46),
            "Invalid: dataset 'd' generation 5 is no longer");
  auto same = planner.SliceMap("d", {}, 8);
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(grant_generation(*same), 8u);
  EXPECT_EQ(Error(planner.SliceMap("d", {}, 5).status()),
            "Invalid: dataset 'd' generation 5 is no longer cached: it was replaced by "
            "generation 8 and freed (a replaced copy is kept while it has readers, up to "
            "--retain-s); start the epoch again on generation 8");
}

TEST_F(FlightInfoPlannerTest, ListHasEveryReadyDatasetWhole) {
  auto loading = Entry();
  loading->name = "l";
  loading->state = CopyState::kLoading;
  catalog_.Put(loading);
  auto list = Planner().List();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].first, "d");
  EXPECT_EQ((*list)[0].second.total_records, 10);
  EXPECT_EQ((*list)[0].second.endpoints.size(), 3u);
}

}  // namespace
}  // namespace icefloe

namespace icefloe {
namespace {

TEST_F(FlightInfoPlannerTest, LengthsOfAListInt32ColumnAreLengthsTicketsOfThatColumn) {
  auto tokens = Entry();
  tokens->name = "tok";
  tokens->schema = arrow::schema({arrow::field("id", arrow::int64(), false),
                                  arrow::field("input_ids", arrow::list(arrow::int32()))});
  catalog_.Put(tokens);
  auto planner = Planner();
  RangeDescriptor d{"tok", 0, std::nullopt, {}, "input_ids"};
  auto info = planner.Range(d);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  ASSERT_EQ(info->endpoints.size(), 3u);
  EXPECT_EQ(info->total_records, 10);
  EXPECT_TRUE(
      info->schema->Equals(*arrow::schema({arrow::field("input_ids", arrow::uint32(), false)})));
  for (const auto& e : info->endpoints) {
    const NativeTicket t = Ticket(e);
    EXPECT_TRUE(t.header.lengths);
    EXPECT_EQ(t.header.columns, std::vector<uint16_t>{1});
  }
  EXPECT_EQ(Error(planner.Range({"tok", 0, 1, {}, "id"}).status()),
            "Invalid: range descriptor 'lengths': column 'id' of dataset 'tok' is int64, not "
            "list<int32>");
  EXPECT_EQ(Error(planner.Range({"tok", 0, 1, {}, "nope"}).status()),
            "Key error: range descriptor 'lengths': no column 'nope' in dataset 'tok'");
}

// A token-budget epoch's lengths request names its epoch (seed, epoch,
// world_size): every rank plans it from the copy its first request bound,
// even when a refresh published a newer one between the ranks' requests.
TEST_F(FlightInfoPlannerTest, ALengthsRequestOfAnEpochReadsTheGenerationItWasBoundTo) {
  auto tokens = [](uint64_t generation) {
    auto e = Entry(generation);
    e->name = "tok";
    e->schema = arrow::schema({arrow::field("id", arrow::int64(), false),
                               arrow::field("input_ids", arrow::list(arrow::int32()))});
    return e;
  };
  catalog_.Put(tokens(7));
  auto planner = Planner();
  auto lengths_of = [](uint64_t epoch) {
    RangeDescriptor d{"tok", 0, std::nullopt, {}, "input_ids"};
    d.seed = 3;
    d.epoch = epoch;
    d.world_size = 2;
    return d;
  };
  auto generation_of = [&planner](const RangeDescriptor& d) -> uint64_t {
    auto info = planner.Range(d);
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    if (!info.ok() || info->endpoints.empty()) return 0;
    return Ticket(info->endpoints[0]).header.generation;
  };
  EXPECT_EQ(generation_of(lengths_of(0)), 7u);  // rank 0 binds epoch 0
  // A refresh publishes generation 8 and keeps 7 for its readers.
  auto old = catalog_.Find("tok");
  ASSERT_TRUE(catalog_.Replace(old, tokens(8)));
  catalog_.Retire(old, 8, std::chrono::steady_clock::now());
  EXPECT_EQ(generation_of(lengths_of(0)), 7u);  // rank 1: the copy epoch 0 is bound to
  EXPECT_EQ(generation_of(lengths_of(1)), 8u);  // the next epoch: the newest
  RangeDescriptor unkeyed{"tok", 0, std::nullopt, {}, "input_ids"};
  EXPECT_EQ(generation_of(unkeyed), 8u);  // no epoch named: the current copy
  RangeDescriptor named = lengths_of(0);
  named.generation = 8;  // resume, failover: the named generation wins
  EXPECT_EQ(generation_of(named), 8u);
}

}  // namespace
}  // namespace icefloe
