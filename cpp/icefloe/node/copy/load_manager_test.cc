// LoadManager with a fake load function: background loads, bounded waits,
// cancellation, stale generations, failures that hold nothing.
#include "icefloe/node/copy/load_manager.h"

#include <chrono>
#include <functional>
#include <thread>

#include <arrow/array.h>
#include <arrow/buffer.h>
#include <arrow/record_batch.h>
#include <arrow/type.h>
#include <gtest/gtest.h>

#include "icefloe/common/memory.h"

namespace icefloe {
namespace {

using namespace std::chrono_literals;

NodeLoadRequest Request(std::string dataset, uint64_t generation, int tasks = 2) {
  NodeLoadRequest r;
  r.dataset = std::move(dataset);
  r.generation = generation;
  r.tasks.resize(static_cast<size_t>(tasks));
  return r;
}

// A load function that blocks until released (or cancelled), then stages
// each task with 10 rows, or fails when asked to.
class FakeLoads {
 public:
  LoadFn fn() {
    return [this](const NodeLoadRequest& r, LoadProgress* progress) -> arrow::Result<LoadedTasks> {
      {
        MutexLock lock(&mu_);
        ++started_;
        cv_.NotifyAll();
        while (!release_ && !progress->cancelled.load()) cv_.WaitFor(&mu_, 5ms);
      }
      if (progress->cancelled.load()) return arrow::Status::Cancelled("cancelled");
      if (r.filter == "fail") return arrow::Status::IOError("file gone: s3://b/x.parquet");
      LoadedTasks out;
      out.rows.assign(r.tasks.size(), 10);
      out.batches.resize(r.tasks.size());
      progress->tasks_done = static_cast<int64_t>(r.tasks.size());
      return out;
    };
  }
  void Release() {
    MutexLock lock(&mu_);
    release_ = true;
    cv_.NotifyAll();
  }
  void WaitStarted(int n) {
    MutexLock lock(&mu_);
    while (started_ < n) cv_.Wait(&mu_);
  }

 private:
  Mutex mu_;
  CondVar cv_;
  bool release_ GUARDED_BY(mu_) = false;
  int started_ GUARDED_BY(mu_) = 0;
};

TEST(LoadManagerTest, LoadsInTheBackgroundAndWaitsBounded) {
  FakeLoads fake;
  LoadManager loads({}, fake.fn());
  auto started = loads.Start(Request("d", 5));
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  EXPECT_FALSE(started->finished());
  fake.WaitStarted(1);
  const auto before = std::chrono::steady_clock::now();
  NodeLoadState s = loads.Wait("d", 5, 50ms);  // still loading: returns at the bound
  EXPECT_EQ(s.state, LoadState::kLoading);
  EXPECT_GE(std::chrono::steady_clock::now() - before, 40ms);
  EXPECT_TRUE(loads.Loading("d"));
  // A retry of the same node.load is harmless.
  EXPECT_TRUE(loads.Start(Request("d", 5)).ok());
  fake.Release();
  s = loads.Wait("d", 5, 10s);
  EXPECT_EQ(s.state, LoadState::kStaged);
  EXPECT_EQ(s.task_rows, (std::vector<int64_t>{10, 10}));
  EXPECT_FALSE(loads.Idle());
  auto staged = loads.TakeStaged("d", 5);
  ASSERT_TRUE(staged.ok());
  EXPECT_TRUE(loads.Idle());
  EXPECT_EQ(loads.Wait("d", 5, 0ms).state, LoadState::kAbsent);
  EXPECT_TRUE(loads.TakeStaged("d", 5).status().IsKeyError());
}

TEST(LoadManagerTest, FailedLoadReportsItsErrorAndFreesTheName) {
  FakeLoads fake;
  fake.Release();
  LoadManager loads({}, fake.fn());
  auto r = Request("d", 5);
  r.filter = "fail";
  ASSERT_TRUE(loads.Start(r).ok());
  NodeLoadState s = loads.Wait("d", 5, 10s);
  EXPECT_EQ(s.state, LoadState::kFailed);
  EXPECT_NE(s.error.find("s3://b/x.parquet"), std::string::npos);
  EXPECT_TRUE(loads.Idle());  // a failed load holds nothing
  // The head's next generation of the name loads.
  ASSERT_TRUE(loads.Start(Request("d", 6)).ok());
  EXPECT_EQ(loads.Wait("d", 6, 10s).state, LoadState::kStaged);
}

TEST(LoadManagerTest, EvictCancelsAndStaleGenerationsAreRefused) {
  FakeLoads fake;
  LoadManager loads({}, fake.fn());
  ASSERT_TRUE(loads.Start(Request("d", 5)).ok());
  fake.WaitStarted(1);
  EXPECT_TRUE(loads.Drop("d", 5));  // cancels the running load
  EXPECT_EQ(loads.Wait("d", 5, 0ms).state, LoadState::kAbsent);
  // A late node.load of the evicted generation does not come back.
  auto late = loads.Start(Request("d", 5));
  ASSERT_TRUE(late.status().IsInvalid());
  EXPECT_NE(late.status().message().find("stale"), std::string::npos);
  EXPECT_TRUE(loads.Start(Request("d", 4)).status().IsInvalid());
  // A newer generation replaces an older running one.
  ASSERT_TRUE(loads.Start(Request("d", 7)).ok());
  fake.WaitStarted(2);
  ASSERT_TRUE(loads.Start(Request("d", 8)).ok());
  EXPECT_EQ(loads.Wait("d", 7, 0ms).state, LoadState::kAbsent);
  fake.Release();
  EXPECT_EQ(loads.Wait("d", 8, 10s).state, LoadState::kStaged);
  EXPECT_FALSE(loads.Drop("d", 7));  // older than what is there: kept
  EXPECT_TRUE(loads.Drop("d", 0));
  EXPECT_TRUE(loads.Idle());
}

TEST(LoadManagerTest, BoundedQueueAndShutdownCancelsRunningLoads) {
  FakeLoads fake;
  LoadManagerOptions options;
  options.max_running = 1;
  options.max_queued = 1;
  LoadManager loads(options, fake.fn());
  ASSERT_TRUE(loads.Start(Request("a", 1)).ok());
  fake.WaitStarted(1);
  ASSERT_TRUE(loads.Start(Request("b", 1)).ok());  // queued
  auto refused = loads.Start(Request("c", 1));
  EXPECT_TRUE(refused.status().IsCapacityError()) << refused.status().ToString();
  EXPECT_EQ(loads.Wait("c", 1, 0ms).state, LoadState::kAbsent);
  loads.Shutdown();  // cancels a; b never runs
  EXPECT_TRUE(loads.Start(Request("d", 1)).status().IsCancelled());
}

TEST(LoadManagerTest, ConcurrentLoadsOfManyNamesAllFinish) {
  FakeLoads fake;
  fake.Release();
  LoadManagerOptions options;
  options.max_running = 3;
  options.max_queued = 64;
  LoadManager loads(options, fake.fn());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&loads, t] {
      for (int i = 0; i < 8; ++i) {
        const std::string name = "n" + std::to_string(t) + "-" + std::to_string(i);
        ASSERT_TRUE(loads.Start(Request(name, 1)).ok());
        ASSERT_EQ(loads.Wait(name, 1, 10s).state, LoadState::kStaged);
        ASSERT_TRUE(loads.TakeStaged(name, 1).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(loads.Idle());
}

// Heal (issue 14): more rows of the generation a node already published come
// as an `extend` load of that generation; a plain repeat stays stale, and an
// evicted generation cannot be extended back.
TEST(LoadManagerTest, ExtendLoadsAddToTheNewestGenerationUnlessEvicted) {
  FakeLoads fake;
  fake.Release();
  LoadManager loads({}, fake.fn());
  ASSERT_TRUE(loads.Start(Request("d", 5)).ok());
  ASSERT_EQ(loads.Wait("d", 5, 10s).state, LoadState::kStaged);
  ASSERT_TRUE(loads.TakeStaged("d", 5).ok());  // committed
  EXPECT_TRUE(loads.Start(Request("d", 5)).status().IsInvalid());
  auto extend = Request("d", 5, 1);
  extend.extend = true;
  ASSERT_TRUE(loads.Start(extend).ok());
  EXPECT_EQ(loads.Wait("d", 5, 10s).state, LoadState::kStaged);
  auto older = Request("d", 4, 1);
  older.extend = true;
  EXPECT_TRUE(loads.Start(older).status().IsInvalid());
  // A heal's clean-up drops its own load only; the generation stays extendable.
  EXPECT_TRUE(loads.Drop("d", 5, /*load_only=*/true));
  ASSERT_TRUE(loads.Start(extend).ok());
  EXPECT_EQ(loads.Wait("d", 5, 10s).state, LoadState::kStaged);
  // An evict of the generation is final.
  EXPECT_TRUE(loads.Drop("d", 5));
  auto late = loads.Start(extend);
  ASSERT_TRUE(late.status().IsInvalid());
  EXPECT_NE(late.status().message().find("stale"), std::string::npos);
}

// A load that stages 1 MiB per task, charged to `budget`.
LoadFn ChargingLoad(std::shared_ptr<MemoryBudget> budget) {
  return [budget](const NodeLoadRequest& r, LoadProgress*) -> arrow::Result<LoadedTasks> {
    LoadedTasks out;
    out.pool = std::make_shared<TrackingPool>(budget, "test load");
    out.schema = arrow::schema({arrow::field("x", arrow::int64())});
    for (size_t t = 0; t < r.tasks.size(); ++t) {
      const int64_t rows = (1 << 20) / 8;
      ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> values,
                            arrow::AllocateBuffer(rows * 8, out.pool.get()));
      auto array =
          arrow::MakeArray(arrow::ArrayData::Make(arrow::int64(), rows, {nullptr, values}));
      out.batches.push_back({arrow::RecordBatch::Make(out.schema, rows, {array})});
      out.rows.push_back(rows);
    }
    return out;
  };
}

// Waits (bounded) until `done` holds; false at the bound.
bool Eventually(const std::function<bool()>& done, std::chrono::milliseconds bound = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

TEST(LoadManagerTest, AStagedLoadTheHeadStopsFollowingIsDroppedAndItsMemoryReturns) {
  auto budget = std::make_shared<MemoryBudget>(0);
  LoadManagerOptions options;
  options.staged_lease_s = 0.3;
  LoadManager loads(options, ChargingLoad(budget));
  ASSERT_TRUE(loads.Start(Request("d", 5)).ok());
  ASSERT_EQ(loads.Wait("d", 5, 10s).state, LoadState::kStaged);
  EXPECT_GE(budget->used_bytes(), 2 << 20);
  // The head keeps asking: the lease holds well past its length.
  const auto followed_until = std::chrono::steady_clock::now() + 900ms;
  while (std::chrono::steady_clock::now() < followed_until) {
    ASSERT_EQ(loads.Wait("d", 5, 50ms).state, LoadState::kStaged);
  }
  // The head stops asking (it died): dropped within the lease (plus a check
  // period), the memory back in the budget (freed just after the slot goes,
  // outside the lock: wait for both).
  const auto stopped = std::chrono::steady_clock::now();
  ASSERT_TRUE(Eventually([&] { return loads.States().empty() && budget->used_bytes() == 0; }));
  EXPECT_GE(std::chrono::steady_clock::now() - stopped, 250ms);
  EXPECT_TRUE(loads.Idle());
  EXPECT_EQ(loads.Wait("d", 5, 0ms).state, LoadState::kAbsent);
  EXPECT_TRUE(loads.TakeStaged("d", 5).status().IsKeyError());
  // The abandoned generation cannot come back; a later load of the name works.
  EXPECT_TRUE(loads.Start(Request("d", 5)).status().IsInvalid());
  ASSERT_TRUE(loads.Start(Request("d", 6)).ok());
  ASSERT_EQ(loads.Wait("d", 6, 10s).state, LoadState::kStaged);
  EXPECT_TRUE(loads.TakeStaged("d", 6).ok());
  EXPECT_EQ(budget->used_bytes(), 0);
}

TEST(LoadManagerTest, ARunningLoadTheHeadStopsFollowingIsCancelled) {
  FakeLoads fake;  // blocks until cancelled
  LoadManagerOptions options;
  options.staged_lease_s = 0.2;
  LoadManager loads(options, fake.fn());
  ASSERT_TRUE(loads.Start(Request("d", 5)).ok());
  fake.WaitStarted(1);
  ASSERT_TRUE(Eventually([&] { return loads.States().empty(); }));
  EXPECT_FALSE(loads.Loading("d"));
  EXPECT_EQ(loads.ExpireLeases(), 0u);
}

}  // namespace
}  // namespace icefloe
