// Heal decisions against an in-process fake of the data nodes that keeps
// what each node holds (row ranges per storage name and generation): a dead
// node, a node back empty, no room anywhere, one heal at a time, replication
// 2, and load() of a copy that lost rows.
#include "icefloe/head/core/heal.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include <arrow/type.h>
#include <gtest/gtest.h>

#include "icefloe/head/core/fake_scan_plan.h"
#include "icefloe/head/core/load_coordinator.h"

namespace icefloe {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kRowBytes = 8;

// Data nodes that hold row ranges. Each call to a killed node fails as an
// unreachable node would; a restarted node is alive and empty.
class HoldingNodes : public NodeRpc {
 public:
  struct Copy {
    uint64_t generation = 0;
    std::vector<RowRange> ranges;
  };

  void Add(const std::string& node, int64_t limit_bytes) {
    MutexLock lock(&mu_);
    limit_[node] = limit_bytes;
  }
  void Kill(const std::string& node) {
    MutexLock lock(&mu_);
    dead_.insert(node);
    held_.erase(node);
  }
  /// Unreachable, keeping what it holds (a paused or partitioned node).
  void Pause(const std::string& node) {
    MutexLock lock(&mu_);
    dead_.insert(node);
  }
  void Resume(const std::string& node) {
    MutexLock lock(&mu_);
    dead_.erase(node);
  }
  void RestartEmpty(const std::string& node) {
    MutexLock lock(&mu_);
    dead_.erase(node);
    held_.erase(node);
  }
  /// node.load calls wait until Open() while closed.
  void Close() {
    MutexLock lock(&mu_);
    closed_ = true;
  }
  void Open() {
    MutexLock lock(&mu_);
    closed_ = false;
    cv_.NotifyAll();
  }
  int loads_started(bool extend) {
    MutexLock lock(&mu_);
    return extend ? extend_starts_ : plain_starts_;
  }
  std::map<std::string, Copy> held(const std::string& node) {
    MutexLock lock(&mu_);
    return held_[node];
  }
  /// Every row of [0, rows) is held by exactly `copies` live nodes.
  void ExpectHeld(const std::string& storage, uint64_t generation, uint64_t rows, int copies) {
    MutexLock lock(&mu_);
    std::vector<int> count(rows, 0);
    for (const auto& [node, copies_held] : held_) {
      auto it = copies_held.find(storage);
      if (it == copies_held.end() || it->second.generation != generation) continue;
      for (const auto& r : it->second.ranges) {
        for (uint64_t row = r.start; row < r.stop && row < rows; ++row) ++count[row];
      }
    }
    for (uint64_t row = 0; row < rows; ++row) {
      ASSERT_EQ(count[row], copies) << "row " << row;
    }
  }

  arrow::Result<NodeStatus> Status(const std::string& node, double) override {
    MutexLock lock(&mu_);
    ARROW_RETURN_NOT_OK(Reach(node));
    NodeStatus s;
    s.location = node;
    s.memory_limit_bytes = limit_[node];
    for (const auto& [name, copy] : held_[node]) {
      NodeDatasetInfo d;
      d.name = name;
      d.generation = copy.generation;
      d.ranges = copy.ranges;
      for (const auto& r : copy.ranges) d.rows += static_cast<int64_t>(r.stop - r.start);
      d.bytes = d.rows * kRowBytes;
      s.memory_used_bytes += d.bytes;
      s.datasets.push_back(d);
    }
    return s;
  }
  arrow::Result<NodeLoadState> StartLoad(const std::string& node, const NodeLoadRequest& r,
                                         double) override {
    MutexLock lock(&mu_);
    while (closed_) cv_.Wait(&mu_);
    ARROW_RETURN_NOT_OK(Reach(node));
    ++(r.extend ? extend_starts_ : plain_starts_);
    loads_[node] = r;
    return State(r, LoadState::kLoading);
  }
  arrow::Result<NodeLoadState> LoadStatus(const std::string& node, const NodeLoadStatusRequest& r,
                                          double) override {
    MutexLock lock(&mu_);
    ARROW_RETURN_NOT_OK(Reach(node));
    auto it = loads_.find(node);
    if (it == loads_.end() || it->second.generation != r.generation) {
      NodeLoadState absent;
      absent.dataset = r.dataset;
      absent.generation = r.generation;
      return absent;
    }
    NodeLoadState s = State(it->second, LoadState::kStaged);
    for (const auto& t : it->second.tasks) s.task_rows.push_back(t.task.data_file.record_count);
    return s;
  }
  arrow::Result<NodeCommitResult> Commit(const std::string& node, const NodeCommit& c,
                                         double) override {
    MutexLock lock(&mu_);
    ARROW_RETURN_NOT_OK(Reach(node));
    auto it = loads_.find(node);
    if (it == loads_.end() || it->second.generation != c.generation) {
      return arrow::Status::KeyError("no staged load");
    }
    Copy& copy = held_[node][c.dataset];
    if (copy.generation != c.generation) copy = Copy{c.generation, {}};
    for (size_t i = 0; i < c.task_starts.size(); ++i) {
      const uint64_t start = c.task_starts[i];
      const uint64_t stop =
          start + static_cast<uint64_t>(it->second.tasks[i].task.data_file.record_count);
      for (const auto& r : copy.ranges) {
        if (r.start < stop && r.stop > start) return arrow::Status::Invalid("rows overlap");
      }
      copy.ranges.push_back({start, stop});
    }
    std::sort(copy.ranges.begin(), copy.ranges.end(),
              [](const RowRange& a, const RowRange& b) { return a.start < b.start; });
    loads_.erase(it);
    int64_t rows = 0;
    for (const auto& r : copy.ranges) rows += static_cast<int64_t>(r.stop - r.start);
    return NodeCommitResult{rows, rows * kRowBytes};
  }
  arrow::Result<NodeEvictResult> Evict(const std::string& node, const NodeEvict& e,
                                       double) override {
    MutexLock lock(&mu_);
    ARROW_RETURN_NOT_OK(Reach(node));
    loads_.erase(node);
    if (!e.staged_only) held_[node].erase(e.dataset);
    return NodeEvictResult{true, 0};
  }

 private:
  arrow::Status Reach(const std::string& node) REQUIRES(mu_) {
    if (dead_.count(node)) return arrow::Status::IOError("node ", node, " unreachable");
    return arrow::Status::OK();
  }
  static NodeLoadState State(const NodeLoadRequest& r, LoadState state) {
    NodeLoadState s;
    s.dataset = r.dataset;
    s.generation = r.generation;
    s.state = state;
    s.tasks_total = static_cast<int64_t>(r.tasks.size());
    return s;
  }

  Mutex mu_;
  CondVar cv_;
  bool closed_ GUARDED_BY(mu_) = false;
  std::map<std::string, int64_t> limit_ GUARDED_BY(mu_);
  std::set<std::string> dead_ GUARDED_BY(mu_);
  std::map<std::string, std::map<std::string, Copy>> held_ GUARDED_BY(mu_);
  std::map<std::string, NodeLoadRequest> loads_ GUARDED_BY(mu_);
  int plain_starts_ GUARDED_BY(mu_) = 0;
  int extend_starts_ GUARDED_BY(mu_) = 0;
};

// Six tasks of 100 rows each.
iceberg::ScanPlan SixTasks(const LoadRequest& r) {
  return FakeScanPlan(
      r, 6, [](int) { return int64_t{100}; }, 100);
}

class HealTest : public ::testing::Test {
 protected:
  void Start(const std::vector<std::pair<std::string, int64_t>>& nodes) {
    for (const auto& [n, limit] : nodes) nodes_.Add(n, limit);
    calls_ = std::make_unique<ThreadPool>("calls", 8, 1024);
    RegistryOptions ro;
    ro.dead_after_s = 0;  // one failed poll: dead
    registry_ = std::make_unique<NodeRegistry>(&nodes_, calls_.get(), ro);
    for (const auto& [n, limit] : nodes) registry_->AddStatic(n);
    registry_->PollAll();
    LoadOptions lo;
    lo.poll_wait_s = 0.01;
    lo.evict_timeout_s = 5;
    lo.heal_backoff_s = 0;
    coordinator_ = std::make_unique<LoadCoordinator>(lo, &nodes_, calls_.get(), registry_.get(),
                                                     &catalog_, SixTasks, 1);
  }
  void TearDown() override {
    nodes_.Open();
    if (coordinator_) coordinator_->Shutdown();
  }

  LoadRequest Request(int32_t replication = 1) {
    LoadRequest r;
    r.name = "d";
    r.source = "table";
    r.replication = replication;
    return r;
  }
  std::shared_ptr<const DatasetEntry> Load(const LoadRequest& r) {
    auto job = coordinator_->Load(r);
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    if (!job.ok()) return nullptr;
    EXPECT_TRUE((*job)->Wait(10s));
    auto outcome = (*job)->Outcome();
    EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
    return catalog_.Find(r.name);
  }
  // Polls the nodes and checks health, as the head's poller does.
  void Poll() {
    registry_->PollAll();
    coordinator_->CheckHealth();
  }
  // Waits (bounded) for the running heal of "d" to end.
  void WaitForHeal() {
    auto entry = catalog_.Find("d");
    ASSERT_NE(entry, nullptr);
    auto job = coordinator_->Heal(entry);
    ASSERT_TRUE(job.ok()) << job.status().ToString();
    ASSERT_TRUE((*job)->Wait(10s));
  }
  // The node holding row `row` (primary).
  std::string HolderOf(uint64_t row) {
    for (const auto& s : catalog_.Find("d")->slices) {
      if (s.start <= row && row < s.stop) return s.nodes[0];
    }
    return "";
  }

  HoldingNodes nodes_;
  Catalog catalog_;
  std::unique_ptr<ThreadPool> calls_;
  std::unique_ptr<NodeRegistry> registry_;
  std::unique_ptr<LoadCoordinator> coordinator_;
};

TEST_F(HealTest, DeadNodeDegradesThenHealsOntoNodesWithRoom) {
  Start({{"a", 1 << 20}, {"b", 1 << 20}, {"c", 1 << 20}});
  auto loaded = Load(Request());
  ASSERT_NE(loaded, nullptr);
  const std::string lost = HolderOf(0);
  nodes_.Close();  // the heal's loads wait: the degraded state can be seen
  nodes_.Kill(lost);
  Poll();
  auto degraded = catalog_.Find("d");
  EXPECT_TRUE(degraded->state == CopyState::kDegraded || degraded->state == CopyState::kHealing)
      << degraded->state;
  EXPECT_GT(degraded->slices_missing, 0);
  EXPECT_EQ(degraded->generation, loaded->generation);
  nodes_.Open();
  WaitForHeal();
  auto healed = catalog_.Find("d");
  EXPECT_EQ(healed->state, CopyState::kReady);
  EXPECT_EQ(healed->slices_missing, 0);
  EXPECT_EQ(healed->generation, loaded->generation);
  EXPECT_EQ(healed->storage_name, loaded->storage_name);
  ASSERT_TRUE(healed->heal_seconds.has_value());
  for (const auto& s : healed->slices) {
    EXPECT_EQ(std::count(s.nodes.begin(), s.nodes.end(), lost), 0);
  }
  EXPECT_EQ(std::count(healed->nodes.begin(), healed->nodes.end(), lost), 0);
  nodes_.ExpectHeld("d", healed->generation, 600, 1);
  EXPECT_EQ(healed->nbytes, 600 * kRowBytes);
  EXPECT_GT(nodes_.loads_started(/*extend=*/true), 0);
}

TEST_F(HealTest, NoRoomStaysDegradedAndSaysWhatIsNeeded) {
  // Each node can take its third of the rows (2 tasks, ~1752 bytes estimated), not more.
  Start({{"a", 1800}, {"b", 1800}, {"c", 1800}});
  ASSERT_NE(Load(Request()), nullptr);
  nodes_.Kill(HolderOf(0));
  Poll();
  WaitForHeal();
  auto entry = catalog_.Find("d");
  EXPECT_EQ(entry->state, CopyState::kDegraded);
  EXPECT_GT(entry->slices_missing, 0);
  EXPECT_NE(entry->heal_error.find("no node has room"), std::string::npos) << entry->heal_error;
  EXPECT_NE(entry->heal_error.find("needs"), std::string::npos) << entry->heal_error;
  EXPECT_EQ(nodes_.loads_started(/*extend=*/true), 0);
  // load() of the same arguments never hands the broken copy out.
  auto job = coordinator_->Load(Request());
  ASSERT_TRUE(job.ok());
  ASSERT_TRUE((*job)->Wait(10s));
  auto outcome = (*job)->Outcome();
  ASSERT_FALSE(outcome.ok());
  EXPECT_NE(outcome.status().message().find("no node has room"), std::string::npos)
      << outcome.status().ToString();
}

TEST_F(HealTest, NodeBackEmptyIsHealed) {
  Start({{"a", 1 << 20}, {"b", 1 << 20}});
  auto loaded = Load(Request());
  const std::string lost = HolderOf(0);
  nodes_.RestartEmpty(lost);  // back before anyone saw it dead
  Poll();
  WaitForHeal();
  auto healed = catalog_.Find("d");
  EXPECT_EQ(healed->state, CopyState::kReady);
  EXPECT_EQ(healed->generation, loaded->generation);
  nodes_.ExpectHeld("d", healed->generation, 600, 1);
  // Still alive and with room: the restarted node takes its rows back.
  EXPECT_FALSE(nodes_.held(lost).empty());
}

TEST_F(HealTest, ANodeBackWithRowsHealedElsewhereDropsThem) {
  Start({{"a", 1 << 20}, {"b", 1 << 20}, {"c", 1 << 20}});
  auto loaded = Load(Request());
  ASSERT_NE(loaded, nullptr);
  const std::string lost = HolderOf(0);
  const std::map<std::string, HoldingNodes::Copy> before = nodes_.held(lost);
  ASSERT_FALSE(before.empty());
  nodes_.Pause(lost);  // declared dead, its rows intact
  Poll();
  WaitForHeal();
  ASSERT_EQ(catalog_.Find("d")->state, CopyState::kReady);
  nodes_.Resume(lost);  // back, still holding rows nothing reads any more
  EXPECT_EQ(nodes_.held(lost).size(), before.size());
  Poll();  // its fresh report shows them: the head drops them
  EXPECT_TRUE(nodes_.held(lost).empty());
  auto entry = catalog_.Find("d");
  EXPECT_EQ(entry->state, CopyState::kReady);
  EXPECT_EQ(entry->generation, loaded->generation);
  nodes_.ExpectHeld("d", entry->generation, 600, 1);
  Poll();  // and keeps what the slice map names
  nodes_.ExpectHeld("d", entry->generation, 600, 1);
}

TEST_F(HealTest, ReportsOlderThanTheSliceMapLoseNothing) {
  Start({{"a", 1 << 20}, {"b", 1 << 20}});
  auto loaded = Load(Request());
  // A report asked before the load was published lacks the copy: not a loss.
  auto entry = std::make_shared<DatasetEntry>(*loaded);
  entry->placed_at = std::chrono::steady_clock::now() + 1h;
  auto stale = registry_->Snapshot();
  for (auto& n : stale) n.status.datasets.clear();
  EXPECT_EQ(AssessCopy(*entry, stale).replicas_missing, 0);
  entry->placed_at = {};
  EXPECT_GT(AssessCopy(*entry, stale).slices_missing, 0);
}

TEST_F(HealTest, OneHealPerDatasetAtATime) {
  Start({{"a", 1 << 20}, {"b", 1 << 20}, {"c", 1 << 20}});
  ASSERT_NE(Load(Request()), nullptr);
  nodes_.Close();
  nodes_.Kill(HolderOf(0));
  Poll();
  auto first = coordinator_->Heal(catalog_.Find("d"));
  Poll();
  Poll();
  auto second = coordinator_->Heal(catalog_.Find("d"));
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(*first, *second);
  nodes_.Open();
  ASSERT_TRUE((*first)->Wait(10s));
  ASSERT_TRUE((*first)->Outcome().ok());
  // One node took the lost run: one extend load, not one per check.
  EXPECT_EQ(nodes_.loads_started(/*extend=*/true), 1);
  nodes_.ExpectHeld("d", catalog_.Find("d")->generation, 600, 1);
}

TEST_F(HealTest, ReplicationTwoStaysReadableAndReReplicates) {
  Start({{"a", 1 << 20}, {"b", 1 << 20}, {"c", 1 << 20}});
  auto loaded = Load(Request(2));
  const std::string lost = HolderOf(0);
  nodes_.Close();
  nodes_.Kill(lost);
  Poll();
  auto entry = catalog_.Find("d");
  EXPECT_EQ(entry->slices_missing, 0);  // every row still has a live replica
  EXPECT_GT(entry->replicas_missing, 0);
  EXPECT_NE(entry->state, CopyState::kDegraded);
  nodes_.Open();
  WaitForHeal();
  auto healed = catalog_.Find("d");
  EXPECT_EQ(healed->state, CopyState::kReady);
  EXPECT_EQ(healed->replicas_missing, 0);
  EXPECT_EQ(healed->generation, loaded->generation);
  for (const auto& s : healed->slices) {
    EXPECT_EQ(s.nodes.size(), 2u);
    EXPECT_EQ(std::count(s.nodes.begin(), s.nodes.end(), lost), 0);
  }
  nodes_.ExpectHeld("d", healed->generation, 600, 2);
}

TEST_F(HealTest, LoadOfADegradedCopyHealsItInsteadOfReturningIt) {
  Start({{"a", 1 << 20}, {"b", 1 << 20}, {"c", 1 << 20}});
  auto loaded = Load(Request());
  nodes_.Kill(HolderOf(0));
  registry_->PollAll();  // dead, but no health check ran yet
  auto again = Load(Request());
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->state, CopyState::kReady);
  EXPECT_EQ(again->generation, loaded->generation);
  EXPECT_EQ(nodes_.loads_started(/*extend=*/false), 3);  // no fresh load
  nodes_.ExpectHeld("d", again->generation, 600, 1);
}

TEST(PlaceRepairsTest, KeepsRunsTogetherAndAvoidsHolders) {
  std::vector<PlacementNode> nodes = {{"a", 1000}, {"b", 1000}, {"c", 50}};
  std::vector<RepairTask> tasks = {{100, 1, {0}}, {100, 1, {0}}, {100, 1, {1}}};
  auto placed = PlaceRepairs(tasks, nodes);
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  EXPECT_EQ((*placed)[0], std::vector<int32_t>{1});
  EXPECT_EQ((*placed)[1], std::vector<int32_t>{1});  // with the previous task
  EXPECT_EQ((*placed)[2], std::vector<int32_t>{0});  // b holds it; c lacks room
  auto none = PlaceRepairs({{100, 2, {0}}}, nodes);
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(none.status().IsOutOfMemory());
  EXPECT_NE(none.status().message().find("needs"), std::string::npos);
}

}  // namespace
}  // namespace icefloe
