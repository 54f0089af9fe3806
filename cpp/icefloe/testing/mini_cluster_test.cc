// Server-path tests on an in-process cluster (head and two nodes, real
// Flight on 127.0.0.1): loads, reads, evicts, bad input on every action,
// failures that release the name, conflicting and joining loads.
#include "icefloe/testing/mini_cluster.h"

#include <stdlib.h>

#include <filesystem>
#include <thread>

#include <arrow/array.h>
#include <arrow/flight/types.h>
#include <arrow/table.h>
#include <gtest/gtest.h>

#include "icefloe/common/wire_status.h"

namespace icefloe::testing {
namespace {

using namespace std::chrono_literals;
namespace flight = arrow::flight;
using json = nlohmann::json;

std::vector<int64_t> Ids(const arrow::Table& t) {
  std::vector<int64_t> out;
  for (const auto& chunk : t.GetColumnByName("id")->chunks()) {
    const auto& a = static_cast<const arrow::Int64Array&>(*chunk);
    for (int64_t i = 0; i < a.length(); ++i) out.push_back(a.Value(i));
  }
  return out;
}

std::vector<int64_t> Range(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

class MiniClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "icefloe-mini-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    for (int f = 0; f < 3; ++f) {
      auto task = WriteIdFile(dir_ + "/part-" + std::to_string(f) + ".parquet", f * 1000, 1000);
      ASSERT_TRUE(task.ok()) << task.status().ToString();
      tasks_.push_back(*task);
    }
    MiniClusterOptions options;
    options.planner = [this](const LoadRequest& r) -> arrow::Result<iceberg::ScanPlan> {
      if (r.source == "gated") {
        MutexLock lock(&mu_);
        while (!gate_open_) gate_.Wait(&mu_);
      }
      if (r.source == "missing") {
        auto missing = tasks_[0];
        missing.data_file.file_path = dir_ + "/no-such-file.parquet";
        return IdPlan(r.source, {missing});
      }
      return IdPlan(r.source, tasks_);
    };
    auto cluster = MiniCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
    cluster_ = std::move(*cluster);
  }
  void TearDown() override {
    OpenGate();
    cluster_.reset();
    std::filesystem::remove_all(dir_);
  }
  void OpenGate() {
    MutexLock lock(&mu_);
    gate_open_ = true;
    gate_.NotifyAll();
  }
  json LoadOk(const std::string& name, const std::string& source = "good") {
    auto desc = cluster_->Load(
        Dump(json{{"v", 1}, {"name", name}, {"source", source}, {"batch_rows", 300}}));
    EXPECT_TRUE(desc.ok()) << desc.status().ToString();
    return desc.ok() ? json::parse(*desc) : json();
  }
  std::vector<int64_t> ReadRange(const std::string& name) {
    auto info = cluster_->Info(Dump(json{{"v", 1}, {"kind", "range"}, {"dataset", name}}));
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    if (!info.ok()) return {};
    auto table = cluster_->ReadAll(*info);
    EXPECT_TRUE(table.ok()) << table.status().ToString();
    return table.ok() ? Ids(**table) : std::vector<int64_t>{};
  }
  NodeStatus StatusOf(int node) {
    auto r = cluster_->Action(cluster_->node_location(node), "node.status", "{}", /*sign=*/true);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    auto s = NodeStatus::Parse(r.ok() ? r->at(0) : "{}");
    return s.ok() ? *s : NodeStatus{};
  }

  std::string dir_;
  std::vector<iceberg::ScanTask> tasks_;
  Mutex mu_;
  CondVar gate_;
  bool gate_open_ GUARDED_BY(mu_) = false;
  std::unique_ptr<MiniCluster> cluster_;
};

TEST_F(MiniClusterTest, LoadsReadsAndEvictsThroughFlight) {
  json desc = LoadOk("d");
  EXPECT_EQ(desc["rows"], 3000);
  EXPECT_EQ(ReadRange("d"), Range(3000));
  // An epoch with sample shuffle: every row exactly once across the pieces.
  auto info = cluster_->Info(R"({"v": 1, "kind": "epoch", "dataset": "d", "batch_size": 100,
                                 "shuffle": "sample", "seed": 3})");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  auto epoch = cluster_->ReadAll(*info);
  ASSERT_TRUE(epoch.ok()) << epoch.status().ToString();
  auto ids = Ids(**epoch);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, Range(3000));
  // Rows by id, duplicates included.
  info = cluster_->Info(R"({"v": 1, "kind": "rows", "dataset": "d", "rows": [5, 2999, 5]})");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  auto rows = cluster_->ReadAll(*info);
  ASSERT_TRUE(rows.ok());
  ids = Ids(**rows);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<int64_t>{5, 5, 2999}));
  EXPECT_GT(StatusOf(0).memory_used_bytes + StatusOf(1).memory_used_bytes, 3000 * 8);
  auto evicted = cluster_->Action(cluster_->head_location(), "evict", R"({"name": "d"})");
  ASSERT_TRUE(evicted.ok()) << evicted.status().ToString();
  EXPECT_EQ(json::parse(evicted->at(0))["unreached"], json::array());
  EXPECT_EQ(StatusOf(0).memory_used_bytes, 0);
  EXPECT_EQ(StatusOf(1).memory_used_bytes, 0);
}

TEST_F(MiniClusterTest, BadInputAnywhereIsInvalidNamingTheFieldAndNothingIsLost) {
  LoadOk("d");
  const std::string head = cluster_->head_location(), node = cluster_->node_location(0);
  struct Case {
    std::string location, type, body, field;
    bool sign;
  };
  const std::string deep = std::string(5000, '[') + std::string(5000, ']');
  const std::vector<Case> cases = {
      {head, "describe", R"({"name": 5})", "'name'", false},
      {head, "evict", R"({"name": null})", "'name'", false},
      {head, "evict", "{\"name\": " + deep + "}", "nested deeper", false},
      {head, "load", R"({"name": "x", "source": "good", "batch_rows": 2.5})", "'batch_rows'",
       false},
      {head, "load", R"({"name": "x", "source": "good", "replication": -1})", "'replication'",
       false},
      {head, "node.register",
       R"({"location": "grpc://h:1", "status": {"memory_limit_bytes": "lots"}})",
       "'memory_limit_bytes'", true},
      {node, "node.load", R"({"dataset": "w", "generation": 9, "schema": {"type": "struct",
         "schema-id": "x", "fields": []}, "tasks": []})",
       "'schema-id'", true},
      {node, "node.commit", R"({"dataset": "d", "generation": "1", "task_starts": []})",
       "'generation'", true},
      {node, "node.evict", R"({"dataset": ["d"]})", "'dataset'", true},
      {node, "node.load_status", R"({"dataset": "d", "generation": 1, "wait_ms": 1e9})",
       "'wait_ms'", true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.type + " " + c.body.substr(0, 80));
    auto r = cluster_->Action(c.location, c.type, c.body, c.sign);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().IsInvalid()) << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.field), std::string::npos) << r.status().ToString();
  }
  for (const std::string cmd :
       {R"({"kind": 5, "dataset": "d"})", R"({"kind": "epoch", "dataset": 5, "batch_size": 4})",
        R"({"kind": "range", "dataset": "d", "start": 1180591620717411303424})",
        R"({"kind": "epoch", "dataset": "d", "batch_size": 4, "world_size": -1})"}) {
    auto info = cluster_->Info(cmd);
    ASSERT_FALSE(info.ok()) << cmd;
    EXPECT_TRUE(info.status().IsInvalid()) << info.status().ToString();
  }
  // Node actions without the head's signature are refused.
  auto unsigned_evict = cluster_->Action(node, "node.evict", R"({"dataset": "d"})");
  ASSERT_FALSE(unsigned_evict.ok());
  auto detail = flight::FlightStatusDetail::UnwrapStatus(unsigned_evict.status());
  ASSERT_TRUE(detail);
  EXPECT_EQ(detail->code(), flight::FlightStatusCode::Unauthorized);
  // Everything still there, nothing registered by the bad registration.
  EXPECT_EQ(ReadRange("d"), Range(3000));
  EXPECT_EQ(cluster_->head().registry().Snapshot().size(), 2u);
  EXPECT_TRUE(cluster_->head().Ready().first);
}

TEST_F(MiniClusterTest, FailedLoadReleasesTheNameEverywhere) {
  auto failed = cluster_->Load(R"({"name": "x", "source": "missing"})");
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("no-such-file.parquet"), std::string::npos)
      << failed.status().ToString();
  for (int n = 0; n < 2; ++n) {
    NodeStatus s = StatusOf(n);
    EXPECT_EQ(s.loads.size(), 0u);
    EXPECT_EQ(s.memory_used_bytes, 0);
  }
  EXPECT_EQ(LoadOk("x")["rows"], 3000);
  EXPECT_EQ(ReadRange("x"), Range(3000));
}

TEST_F(MiniClusterTest, IdenticalLoadsJoinAndAConflictingOneIsRefused) {
  const std::string body = R"({"name": "g", "source": "gated"})";
  std::string first, second;
  std::thread a([&] { first = cluster_->Load(body).ValueOr("error"); });
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (cluster_->head().ClusterStatus()["loads"].empty() &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  std::thread b([&] { second = cluster_->Load(body).ValueOr("error"); });
  auto conflicting = cluster_->Load(R"({"name": "g", "source": "good"})");
  ASSERT_FALSE(conflicting.ok());
  auto detail = flight::FlightStatusDetail::UnwrapStatus(conflicting.status());
  ASSERT_TRUE(detail);
  EXPECT_EQ(detail->extra_info(), kErrorAlreadyExists);
  EXPECT_NE(conflicting.status().message().find("other arguments"), std::string::npos);
  OpenGate();
  a.join();
  b.join();
  ASSERT_NE(first, "error");
  ASSERT_NE(second, "error");
  EXPECT_EQ(json::parse(first)["generation"], json::parse(second)["generation"]);
  EXPECT_EQ(ReadRange("g"), Range(3000));
}

TEST_F(MiniClusterTest, ANodeDownDuringALoadIsNamedAndTheNextLoadAvoidsIt) {
  cluster_->StopNode(1);
  auto failed = cluster_->Load(R"({"name": "y", "source": "good"})");
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find(cluster_->node_location(1)), std::string::npos)
      << failed.status().ToString();
  auto detail = flight::FlightStatusDetail::UnwrapStatus(failed.status());
  ASSERT_TRUE(detail);
  EXPECT_EQ(detail->extra_info(), kErrorNodeUnavailable);
  EXPECT_EQ(LoadOk("y")["rows"], 3000);
  EXPECT_EQ(ReadRange("y"), Range(3000));
}

}  // namespace
}  // namespace icefloe::testing
