// LoadCoordinator against an in-process fake of the data nodes: every phase of
// a load failing on one node, wrong replies, calls that never answer,
// concurrent loads of one name, cancellation by evict and shutdown.
#include "icefloe/head/core/load_coordinator.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include <arrow/type.h>
#include <gtest/gtest.h>

#include "icefloe/head/core/fake_scan_plan.h"

namespace icefloe {
namespace {

using namespace std::chrono_literals;

// Fake data nodes: each call asks `hook` (when set) first; otherwise a load
// stages at once with every task's record_count as its rows.
class FakeNodes : public NodeRpc {
 public:
  using Hook = std::function<std::optional<arrow::Status>(const std::string& node,
                                                          const std::string& action)>;

  arrow::Result<NodeStatus> Status(const std::string& node, double) override {
    if (auto st = Ask(node, "node.status")) return *st;
    NodeStatus s;
    s.location = node;
    s.memory_limit_bytes = 1 << 30;
    // What it committed, as a real node reports it (the head's heal check reads it).
    MutexLock lock(&mu_);
    auto c = commits_.find(node);
    auto l = loads_.find(node);
    if (c != commits_.end() && l != loads_.end() && l->second.generation == c->second.generation &&
        c->second.task_starts.size() == l->second.tasks.size()) {
      NodeDatasetInfo d;
      d.name = c->second.dataset;
      d.generation = c->second.generation;
      for (size_t i = 0; i < l->second.tasks.size(); ++i) {
        const uint64_t start = c->second.task_starts[i];
        d.ranges.push_back(
            {start, start + static_cast<uint64_t>(l->second.tasks[i].task.data_file.record_count)});
      }
      s.datasets.push_back(d);
    }
    return s;
  }
  arrow::Result<NodeLoadState> StartLoad(const std::string& node, const NodeLoadRequest& r,
                                         double) override {
    if (auto st = Ask(node, "node.load")) return *st;
    MutexLock lock(&mu_);
    loads_[node] = r;
    ++starts_;
    return State(node, r, LoadState::kLoading);
  }
  arrow::Result<NodeLoadState> LoadStatus(const std::string& node, const NodeLoadStatusRequest& r,
                                          double) override {
    if (auto st = Ask(node, "node.load_status")) return *st;
    MutexLock lock(&mu_);
    auto it = loads_.find(node);
    if (it == loads_.end() || it->second.generation != r.generation) {
      NodeLoadState absent;
      absent.dataset = r.dataset;
      absent.generation = r.generation;
      return absent;
    }
    NodeLoadState s = State(node, it->second, stage_state_);
    if (s.state == LoadState::kStaged) {
      for (const auto& t : it->second.tasks) s.task_rows.push_back(t.task.data_file.record_count);
      if (node == short_node_) s.task_rows.pop_back();
      if (node == disagreeing_node_ && !s.task_rows.empty()) s.task_rows[0] += 1;
      if (count_) count_(&s);
    }
    return s;
  }
  arrow::Result<NodeCommitResult> Commit(const std::string& node, const NodeCommit& c,
                                         double) override {
    if (auto st = Ask(node, "node.commit")) return *st;
    MutexLock lock(&mu_);
    commits_[node] = c;
    return NodeCommitResult{0, 100};
  }
  arrow::Result<NodeEvictResult> Evict(const std::string& node, const NodeEvict& e,
                                       double) override {
    {
      MutexLock lock(&mu_);
      evicts_.push_back({node, e.generation});
      if (loads_.count(node) && loads_[node].generation == e.generation) loads_.erase(node);
    }
    if (auto st = Ask(node, "node.evict")) return *st;
    return NodeEvictResult{true, 100};
  }

  void SetHook(Hook hook) {
    MutexLock lock(&mu_);
    hook_ = std::move(hook);
  }
  /// The node forgets its loads, as a restarted node would.
  void Forget(const std::string& node) {
    MutexLock lock(&mu_);
    loads_.erase(node);
  }
  void set_stage_state(LoadState s) {
    MutexLock lock(&mu_);
    stage_state_ = s;
  }
  void set_short_node(std::string n) {
    MutexLock lock(&mu_);
    short_node_ = std::move(n);
  }
  /// Fills in the counters each staged node reports.
  void set_count(std::function<void(NodeLoadState*)> count) {
    MutexLock lock(&mu_);
    count_ = std::move(count);
  }
  void set_disagreeing_node(std::string n) {
    MutexLock lock(&mu_);
    disagreeing_node_ = std::move(n);
  }
  std::set<std::string> EvictedNodes(uint64_t generation) {
    MutexLock lock(&mu_);
    std::set<std::string> out;
    for (const auto& [node, g] : evicts_) {
      if (g == generation) out.insert(node);
    }
    return out;
  }
  int starts() {
    MutexLock lock(&mu_);
    return starts_;
  }
  std::map<std::string, NodeLoadRequest> loads() {
    MutexLock lock(&mu_);
    return loads_;
  }

 private:
  std::optional<arrow::Status> Ask(const std::string& node, const std::string& action) {
    Hook hook;
    {
      MutexLock lock(&mu_);
      hook = hook_;
    }
    return hook ? hook(node, action) : std::nullopt;
  }
  static NodeLoadState State(const std::string& node, const NodeLoadRequest& r, LoadState state) {
    NodeLoadState s;
    s.dataset = r.dataset;
    s.generation = r.generation;
    s.state = state;
    s.tasks_total = static_cast<int64_t>(r.tasks.size());
    return s;
  }

  Mutex mu_;
  Hook hook_ GUARDED_BY(mu_);
  LoadState stage_state_ GUARDED_BY(mu_) = LoadState::kStaged;
  std::string short_node_ GUARDED_BY(mu_);
  std::string disagreeing_node_ GUARDED_BY(mu_);
  std::function<void(NodeLoadState*)> count_ GUARDED_BY(mu_);
  std::map<std::string, NodeLoadRequest> loads_ GUARDED_BY(mu_);
  std::map<std::string, NodeCommit> commits_ GUARDED_BY(mu_);
  std::vector<std::pair<std::string, uint64_t>> evicts_ GUARDED_BY(mu_);
  int starts_ GUARDED_BY(mu_) = 0;
};

// A latch tests open to let blocked fake calls go on.
class Gate {
 public:
  void Wait() {
    MutexLock lock(&mu_);
    ++waiting_;
    cv_.NotifyAll();
    while (!open_) cv_.Wait(&mu_);
  }
  void WaitForWaiters(int n) {
    MutexLock lock(&mu_);
    while (waiting_ < n) cv_.Wait(&mu_);
  }
  void Open() {
    MutexLock lock(&mu_);
    open_ = true;
    cv_.NotifyAll();
  }

 private:
  Mutex mu_;
  CondVar cv_;
  bool open_ GUARDED_BY(mu_) = false;
  int waiting_ GUARDED_BY(mu_) = 0;
};

// Four tasks of 100, 101, 102 and 103 rows.
iceberg::ScanPlan FourTaskPlan(const LoadRequest& r) {
  return FakeScanPlan(
      r, 4, [](int i) { return int64_t{100} + i; }, 1000);
}

class LoadCoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(LoadOptions{}); }
  void TearDown() override { Stop(); }

  void Start(LoadOptions options) {
    options.poll_wait_s = 0.01;
    options.evict_timeout_s = std::min(options.evict_timeout_s, 5.0);
    calls_ = std::make_unique<ThreadPool>("calls", 8, 1024);
    registry_ = std::make_unique<NodeRegistry>(&nodes_, calls_.get(), RegistryOptions{});
    for (const char* n : {"grpc://a:1", "grpc://b:1"}) {
      NodeStatus s;
      s.memory_limit_bytes = 1 << 30;
      registry_->Heartbeat(n, s);
    }
    coordinator_ = std::make_unique<LoadCoordinator>(options, &nodes_, calls_.get(),
                                                     registry_.get(), &catalog_, planner_, 1000);
  }
  void Stop() {
    coordinator_.reset();
    registry_.reset();
    calls_.reset();
  }

  LoadRequest Request(std::string name, std::string source = "s3://t") {
    LoadRequest r;
    r.name = std::move(name);
    r.source = std::move(source);
    return r;
  }
  // Loads and waits for the outcome.
  arrow::Result<nlohmann::json> LoadAndWait(const LoadRequest& r) {
    ARROW_ASSIGN_OR_RAISE(auto job, coordinator_->Load(r));
    EXPECT_TRUE(job->Wait(30s));
    return job->Outcome();
  }
  // Loads "d", then another copy under the same name (another filter);
  // returns the replaced entry.
  std::shared_ptr<const DatasetEntry> LoadAndReplace() {
    EXPECT_TRUE(LoadAndWait(Request("d")).ok());
    auto old = catalog_.Find("d");
    LoadRequest other = Request("d");
    other.filter = "id > 3";
    EXPECT_TRUE(LoadAndWait(other).ok());
    return old;
  }
  void ExpectNameFree(const std::string& name) {
    nodes_.SetHook(nullptr);
    nodes_.set_stage_state(LoadState::kStaged);
    auto again = LoadAndWait(Request(name));
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ((*again)["rows"], 406);
  }

  FakeNodes nodes_;
  Catalog catalog_;
  ScanPlanner planner_ = [](const LoadRequest& r) { return FourTaskPlan(r); };
  std::unique_ptr<ThreadPool> calls_;
  std::unique_ptr<NodeRegistry> registry_;
  std::unique_ptr<LoadCoordinator> coordinator_;
};

TEST_F(LoadCoordinatorTest, LoadsPlacesCommitsAndPublishes) {
  auto out = LoadAndWait(Request("d"));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)["rows"], 100 + 101 + 102 + 103);
  EXPECT_EQ((*out)["state"], "ready");
  auto entry = catalog_.Find("d");
  ASSERT_TRUE(entry);
  ASSERT_EQ(entry->slices.size(), 2u);  // two nodes, contiguous runs
  EXPECT_EQ(entry->slices[0].start, 0u);
  EXPECT_EQ(entry->slices[1].stop, 406u);
  EXPECT_EQ(entry->slices[0].stop, entry->slices[1].start);
  EXPECT_EQ(entry->nbytes, 200);
  // The same load again reuses the copy; another name shares it.
  auto again = LoadAndWait(Request("d"));
  EXPECT_EQ((*again)["generation"], (*out)["generation"]);
  auto alias = LoadAndWait(Request("alias"));
  EXPECT_EQ((*alias)["generation"], (*out)["generation"]);
  EXPECT_EQ(nodes_.starts(), 2);
}

// Each node counts over the tasks it read, and every task is on
// `replication` nodes: describe's scan is the nodes' sum divided by the
// replication, summed first (each node's 5 on 2 replicas divided alone would
// read as 4). Every counter (iceberg::kLoadCounters) has its own value, so
// one summed into another's place, or left out of the sum, fails.
TEST_F(LoadCoordinatorTest, SumsEveryLoadCounterOverTheNodesBeforeDividing) {
  auto value = [](size_t k) { return static_cast<int64_t>(2 * k + 1); };  // odd: a remainder
  nodes_.set_count([value](NodeLoadState* s) {
    for (size_t k = 0; k < std::size(iceberg::kLoadCounters); ++k) {
      s->*iceberg::kLoadCounters[k].member = value(k);
    }
  });
  LoadRequest replicated = Request("d");
  replicated.replication = 2;
  auto out = LoadAndWait(replicated);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const auto entry = catalog_.Find("d");
  ASSERT_TRUE(entry);
  for (size_t k = 0; k < std::size(iceberg::kLoadCounters); ++k) {
    const iceberg::LoadCounter& c = iceberg::kLoadCounters[k];
    EXPECT_EQ(entry->scan.*c.member, value(k)) << c.name;
    EXPECT_EQ((*out)["scan"][std::string(c.name)], value(k)) << c.name;
  }
}

// Issue 30: generations came from this head's clock alone, so a head
// rescheduled onto a machine whose clock is behind its predecessor's numbered
// loads below what nodes had seen, and nodes refused them as stale.
TEST_F(LoadCoordinatorTest, GenerationsAreAboveEveryOneANodeHasSeen) {
  NodeStatus ahead;
  ahead.memory_limit_bytes = 1 << 30;
  ahead.newest_generation = 5000;  // this head's clock started at 1000
  registry_->Heartbeat("grpc://a:1", ahead);
  auto out = LoadAndWait(Request("d"));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)["generation"], 5001);
  auto next = LoadAndWait(Request("e", "s3://other"));
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_GT((*next)["generation"].get<uint64_t>(), 5001u);
}

TEST_F(LoadCoordinatorTest, IdenticalLoadJoinsAndConflictingLoadIsRefused) {
  Gate gate;
  nodes_.SetHook(
      [&](const std::string&, const std::string& action) -> std::optional<arrow::Status> {
        if (action == "node.load") gate.Wait();
        return std::nullopt;
      });
  auto first = coordinator_->Load(Request("d"));
  ASSERT_TRUE(first.ok());
  gate.WaitForWaiters(1);
  EXPECT_TRUE(coordinator_->Loading("d"));
  auto second = coordinator_->Load(Request("d"));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(first->get(), second->get());
  auto conflicting = coordinator_->Load(Request("d", "s3://other"));
  ASSERT_TRUE(conflicting.status().IsAlreadyExists()) << conflicting.status().ToString();
  EXPECT_NE(conflicting.status().message().find("other arguments"), std::string::npos);
  gate.Open();
  ASSERT_TRUE((*first)->Wait(30s));
  EXPECT_TRUE((*second)->Outcome().ok());
  EXPECT_FALSE(coordinator_->Loading("d"));
  nodes_.SetHook(nullptr);
}

TEST_F(LoadCoordinatorTest, NodeFailingAtEachPhaseFailsTheLoadAndReleasesEverything) {
  for (const std::string action : {"node.load", "node.load_status", "node.commit"}) {
    SCOPED_TRACE(action);
    nodes_.SetHook(
        [action](const std::string& node, const std::string& a) -> std::optional<arrow::Status> {
          if (node == "grpc://b:1" && a == action) return arrow::Status::IOError("disk on fire");
          return std::nullopt;
        });
    auto out = LoadAndWait(Request("f"));
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("disk on fire"), std::string::npos);
    EXPECT_NE(out.status().message().find("load 'f'"), std::string::npos);
    EXPECT_FALSE(catalog_.Find("f"));
    EXPECT_FALSE(coordinator_->Loading("f"));
    ExpectNameFree("f");
    // The failed generation was evicted on both nodes.
    auto gen = catalog_.Find("f")->generation;
    EXPECT_EQ(nodes_.EvictedNodes(gen - 1), (std::set<std::string>{"grpc://a:1", "grpc://b:1"}));
    ASSERT_TRUE(coordinator_->Evict("f").ok());
  }
}

TEST_F(LoadCoordinatorTest, FailedAndLostNodeLoadsAreClearErrors) {
  nodes_.set_stage_state(LoadState::kFailed);
  auto out = LoadAndWait(Request("x"));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("node grpc://"), std::string::npos);
  // A node that forgot the load (restarted meanwhile) is named.
  nodes_.set_stage_state(LoadState::kLoading);
  nodes_.SetHook(
      [this](const std::string& node, const std::string& a) -> std::optional<arrow::Status> {
        if (a == "node.load_status" && node == "grpc://a:1") nodes_.Forget(node);
        return std::nullopt;
      });
  out = LoadAndWait(Request("x"));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("node grpc://a:1 no longer has this load"),
            std::string::npos)
      << out.status().ToString();
  ExpectNameFree("x");
}

TEST_F(LoadCoordinatorTest, WrongRepliesFailTheLoadAndMalformedOnesMarkTheNodeDead) {
  nodes_.set_short_node("grpc://a:1");
  auto out = LoadAndWait(Request("w"));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("task row counts"), std::string::npos);
  nodes_.set_short_node("");

  LoadRequest replicated = Request("r");
  replicated.replication = 2;
  nodes_.set_disagreeing_node("grpc://b:1");
  out = LoadAndWait(replicated);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("replicas disagree"), std::string::npos);
  nodes_.set_disagreeing_node("");

  nodes_.SetHook([](const std::string& node, const std::string& a) -> std::optional<arrow::Status> {
    if ((a == "node.load_status" || a == "node.status") && node == "grpc://b:1") {
      return BadNodeReply(node, a, arrow::Status::Invalid("'task_rows' must be a list"));
    }
    return std::nullopt;
  });
  out = LoadAndWait(Request("m"));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("'task_rows'"), std::string::npos);
  EXPECT_EQ(registry_->Alive().size(), 1u);  // b is out of the placement now
  nodes_.SetHook(nullptr);
  auto ok = LoadAndWait(Request("m"));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(catalog_.Find("m")->nodes, std::vector<std::string>{"grpc://a:1"});
}

TEST_F(LoadCoordinatorTest, LoadsThatNeverFinishOrCallsThatNeverAnswerTimeOut) {
  Stop();
  LoadOptions options;
  options.load_timeout_s = 0.3;
  options.node_call_timeout_s = 0.2;
  Start(options);
  nodes_.set_stage_state(LoadState::kLoading);
  auto out = LoadAndWait(Request("slow"));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("did not finish loading within"), std::string::npos);

  Gate gate;
  nodes_.set_stage_state(LoadState::kStaged);
  nodes_.SetHook(
      [&](const std::string& node, const std::string& a) -> std::optional<arrow::Status> {
        if (a == "node.load" && node == "grpc://a:1") gate.Wait();
        return std::nullopt;
      });
  const auto started = std::chrono::steady_clock::now();
  out = LoadAndWait(Request("hung"));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("no answer to node.load"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 10s);
  const int before = nodes_.starts();
  gate.Open();
  Stop();  // waits for the late call
  EXPECT_EQ(nodes_.starts(), before + 1);
  nodes_.SetHook(nullptr);
  Start(options);
  ExpectNameFree("hung");
}

TEST_F(LoadCoordinatorTest, EvictCancelsARunningLoad) {
  nodes_.set_stage_state(LoadState::kLoading);
  auto job = coordinator_->Load(Request("c"));
  ASSERT_TRUE(job.ok());
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (nodes_.starts() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  auto evicted = coordinator_->Evict("c");
  ASSERT_TRUE(evicted.ok()) << evicted.status().ToString();
  EXPECT_TRUE(evicted->cancelled);
  ASSERT_TRUE((*job)->Wait(30s));
  EXPECT_TRUE((*job)->Outcome().status().IsCancelled());
  EXPECT_EQ(nodes_.loads().size(), 0u);  // both nodes dropped it
  ExpectNameFree("c");
}

TEST_F(LoadCoordinatorTest, EvictsInParallelWithinTheDeadline) {
  ASSERT_TRUE(LoadAndWait(Request("e")).ok());
  Stop();
  LoadOptions options;
  options.evict_timeout_s = 0.3;
  Start(options);
  // The catalog survived the restart of the coordinator; node a hangs.
  Gate gate;
  nodes_.SetHook(
      [&](const std::string& node, const std::string& a) -> std::optional<arrow::Status> {
        if (a == "node.evict" && node == "grpc://a:1") gate.Wait();
        return std::nullopt;
      });
  const auto started = std::chrono::steady_clock::now();
  auto out = coordinator_->Evict("e");
  ASSERT_TRUE(out.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
  EXPECT_EQ(out->unreached, std::vector<std::string>{"grpc://a:1"});
  EXPECT_FALSE(catalog_.Find("e"));
  gate.Open();
  Stop();  // the late call ends before the gate goes
  nodes_.SetHook(nullptr);
}

TEST_F(LoadCoordinatorTest, BoundedQueueAndShutdownCancelsLoads) {
  Stop();
  LoadOptions options;
  options.max_concurrent_loads = 1;
  options.max_queued_loads = 1;
  Start(options);
  nodes_.set_stage_state(LoadState::kLoading);
  auto a = coordinator_->Load(Request("q1"));
  auto b = coordinator_->Load(Request("q2"));
  ASSERT_TRUE(a.ok());
  // Either q2 is queued (q1 already running) or refused; a third is refused.
  auto c = coordinator_->Load(Request("q3"));
  auto d = coordinator_->Load(Request("q4"));
  EXPECT_TRUE(c.status().IsCapacityError() || d.status().IsCapacityError());
  coordinator_->Shutdown();
  ASSERT_TRUE((*a)->Wait(1s));
  EXPECT_TRUE((*a)->Outcome().status().IsCancelled()) << (*a)->Outcome().status().ToString();
  EXPECT_TRUE(coordinator_->Load(Request("q5")).status().IsCancelled());
}

}  // namespace
}  // namespace icefloe

namespace icefloe {
namespace {

// Snapshot 2 of FourTaskPlan's table: task 1's file removed, a file of 50
// rows appended.
iceberg::ScanPlan SecondSnapshot(const LoadRequest& r) {
  auto plan = FourTaskPlan(r);
  plan.snapshot_id = 2;
  plan.tasks.erase(plan.tasks.begin() + 1);
  iceberg::ScanTask added;
  added.data_file.file_path = "file:///t/added.parquet";
  added.data_file.record_count = 50;
  added.data_file.file_size_in_bytes = 1000;
  plan.tasks.push_back(added);
  return plan;
}

TEST_F(LoadCoordinatorTest, ANewerSnapshotReusesUnchangedTasksOnTheirHolders) {
  auto snapshot = std::make_shared<std::atomic<int>>(1);
  Stop();
  planner_ = [snapshot](const LoadRequest& r) {
    return snapshot->load() == 1 ? FourTaskPlan(r) : SecondSnapshot(r);
  };
  LoadOptions options;
  options.retain_idle_s = 0;  // the fake nodes report no readers: freed at the next check
  Start(options);
  ASSERT_TRUE(LoadAndWait(Request("d")).ok());
  auto old = catalog_.Find("d");
  ASSERT_TRUE(old);
  std::map<std::string, std::string> holder;  // file -> node holding it
  for (const auto& [node, req] : nodes_.loads()) {
    for (const auto& t : req.tasks) holder[t.task.data_file.file_path] = node;
  }

  snapshot->store(2);
  auto out = LoadAndWait(Request("d"));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)["rows"], 100 + 102 + 103 + 50);
  auto entry = catalog_.Find("d");
  ASSERT_TRUE(entry);
  EXPECT_GT(entry->generation, old->generation);
  // Stored beside the old copy until published.
  EXPECT_NE(entry->storage_name, old->storage_name);
  ASSERT_TRUE(entry->refresh.has_value());
  const RefreshSummary& r = *entry->refresh;
  EXPECT_EQ(r.from_generation, old->generation);
  EXPECT_EQ(r.tasks_reused, 3);
  EXPECT_EQ(r.tasks_read, 1);
  EXPECT_EQ(r.tasks_dropped, 1);
  EXPECT_EQ(r.rows_reused, 305);
  EXPECT_EQ(r.rows_read, 50);
  EXPECT_EQ(r.rows_dropped, 101);
  EXPECT_EQ(r.files_added, 1);
  EXPECT_EQ(r.files_removed, 1);
  // Dense row ids in the new plan's order.
  EXPECT_EQ(entry->task_starts, (std::vector<uint64_t>{0, 100, 202, 305}));
  int reused = 0;
  for (const auto& [node, req] : nodes_.loads()) {
    EXPECT_EQ(req.generation, entry->generation);
    for (const auto& t : req.tasks) {
      const std::string& path = t.task.data_file.file_path;
      if (path == "file:///t/added.parquet") {
        EXPECT_FALSE(t.reused());
        continue;
      }
      // Each unchanged task on the node that holds it, naming its old rows.
      ++reused;
      EXPECT_EQ(node, holder[path]) << path;
      ASSERT_TRUE(t.reused()) << path;
      EXPECT_EQ(req.reuse_dataset, old->storage_name);
      EXPECT_EQ(req.reuse_generation, old->generation);
      const size_t o = static_cast<size_t>(std::stoi(path.substr(10)));  // file:///t/<i>.parquet
      EXPECT_EQ(t.reuse_start, old->task_starts[o]) << path;
      EXPECT_EQ(t.reuse_rows, old->task_rows[o]) << path;
    }
  }
  EXPECT_EQ(reused, 3);
  // The old copy is kept for its readers, then freed.
  auto retired = catalog_.Retired();
  ASSERT_EQ(retired.size(), 1u);
  EXPECT_EQ(retired[0].entry->generation, old->generation);
  EXPECT_EQ(retired[0].replaced_by, entry->generation);
  EXPECT_EQ(catalog_.FindGeneration("d", old->generation, std::chrono::steady_clock::now()),
            retired[0].entry);
  EXPECT_TRUE(nodes_.EvictedNodes(old->generation).empty());
  coordinator_->CheckHealth();
  EXPECT_TRUE(catalog_.Retired().empty());
  EXPECT_EQ(nodes_.EvictedNodes(old->generation).size(), 2u);
  EXPECT_FALSE(catalog_.FindGeneration("d", old->generation, std::chrono::steady_clock::now()));
}

TEST_F(LoadCoordinatorTest, AReplacedCopyIsKeptWhileNodesReportReaders) {
  Stop();
  LoadOptions options;
  options.retain_idle_s = 0;
  Start(options);
  auto old = LoadAndReplace();
  ASSERT_EQ(catalog_.Retired().size(), 1u);
  // A node reporting a stream on the old copy keeps it.
  NodeStatus reading;
  reading.memory_limit_bytes = 1 << 30;
  NodeDatasetInfo d;
  d.name = old->storage_name;
  d.generation = old->generation;
  d.readers = 1;
  reading.datasets.push_back(d);
  registry_->Heartbeat("grpc://a:1", reading);
  coordinator_->CheckHealth();
  EXPECT_EQ(catalog_.Retired().size(), 1u);
  EXPECT_TRUE(nodes_.EvictedNodes(old->generation).empty());
  // Evicting the name drops the kept copy too.
  ASSERT_TRUE(coordinator_->Evict("d").ok());
  EXPECT_TRUE(catalog_.Retired().empty());
  EXPECT_EQ(nodes_.EvictedNodes(old->generation).size(), 2u);
}

TEST_F(LoadCoordinatorTest, RetainZeroFreesAReplacedCopyAtOnce) {
  Stop();
  LoadOptions options;
  options.retain_s = 0;
  Start(options);
  auto old = LoadAndReplace();
  EXPECT_TRUE(catalog_.Retired().empty());
  EXPECT_EQ(nodes_.EvictedNodes(old->generation).size(), 2u);
}

TEST_F(LoadCoordinatorTest, ATaskWithoutALiveHolderIsReadAgain) {
  ASSERT_TRUE(LoadAndWait(Request("d")).ok());
  auto old = catalog_.Find("d");
  ASSERT_TRUE(old && old->plan);
  CopyHealth health = AssessCopy(*old, registry_->Snapshot());
  ASSERT_EQ(health.units.size(), 4u);
  health.units[2].holders.clear();  // task 2's node is gone
  RefreshDiff diff = DiffTasks(*old, old->plan->tasks, health);
  EXPECT_EQ(diff.reuse, (std::vector<int64_t>{0, 1, -1, 3}));
  EXPECT_EQ(diff.tasks_reused, 3);
  EXPECT_EQ(diff.tasks_read, 1);
  EXPECT_EQ(diff.tasks_dropped, 0);  // still in the plan, only read again
  EXPECT_EQ(diff.rows_reused, 100 + 101 + 103);
  EXPECT_TRUE(diff.holders[2].empty());
  EXPECT_EQ(diff.holders[0].size(), 1u);
}

// How many times `text` (captured stderr) holds `needle`.
int Occurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The follower retries a failing refresh every period: the same failure is
// logged once, another failure is logged, and after a load of the name
// succeeded the old failure is news again (issue 42, defect 7).
TEST_F(LoadCoordinatorTest, ALoadFailingTheSameWayAgainIsLoggedOnce) {
  auto fail_with = [this](std::string why) {
    nodes_.SetHook([why](const std::string&, const std::string& a) -> std::optional<arrow::Status> {
      if (a == "node.load") return arrow::Status::IOError(why);
      return std::nullopt;
    });
  };
  auto logged_failures = [this](int loads) {
    testing::internal::CaptureStderr();
    for (int i = 0; i < loads; ++i) EXPECT_FALSE(LoadAndWait(Request("d")).ok());
    return Occurrences(testing::internal::GetCapturedStderr(), "msg=\"load failed\"");
  };
  fail_with("reading Parquet file s3://t/gone.parquet: not found");
  EXPECT_EQ(logged_failures(3), 1);
  fail_with("reading Parquet file s3://t/other.parquet: not found");
  EXPECT_EQ(logged_failures(2), 1);
  nodes_.SetHook(nullptr);
  ASSERT_TRUE(LoadAndWait(Request("d")).ok());
  ASSERT_TRUE(coordinator_->Evict("d").ok());
  fail_with("reading Parquet file s3://t/gone.parquet: not found");
  EXPECT_EQ(logged_failures(2), 1);
}

}  // namespace
}  // namespace icefloe
