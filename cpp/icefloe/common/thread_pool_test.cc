#include "icefloe/common/thread_pool.h"

#include <atomic>
#include <chrono>

#include <gtest/gtest.h>

namespace icefloe {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

TEST(ThreadPoolTest, RunsEveryTaskAndDrainsOnShutdown) {
  std::atomic<int> ran{0};
  {
    ThreadPool pool("test pool", 3, 100);
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(pool.Submit([&ran] { ++ran; }).ok());
    pool.Shutdown();
    EXPECT_EQ(ran.load(), 100);
    EXPECT_TRUE(pool.Submit([] {}).IsCancelled());
  }
  EXPECT_EQ(ran.load(), 100);
}

TEST(ThreadPoolTest, RefusesBeyondItsQueueBound) {
  Mutex mu;
  CondVar cv;
  bool release = false;
  ThreadPool pool("small pool", 1, 2);  // after what its tasks use: destroyed first
  auto blocker = [&] {
    MutexLock lock(&mu);
    while (!release) cv.Wait(&mu);
  };
  ASSERT_TRUE(pool.Submit(blocker).ok());
  // The worker may not have taken the first task yet: fill until refused.
  int accepted = 0;
  arrow::Status st;
  for (int i = 0; i < 10 && st.ok(); ++i) {
    st = pool.Submit([] {});
    if (st.ok()) ++accepted;
  }
  EXPECT_TRUE(st.IsCapacityError()) << st.ToString();
  EXPECT_NE(st.message().find("small pool"), std::string::npos);
  EXPECT_LE(accepted, 2);
  {
    MutexLock lock(&mu);
    release = true;
    cv.NotifyAll();
  }
}

TEST(FanOutTest, CollectsResultsAndGivesUpAtTheDeadline) {
  Mutex mu;
  CondVar cv;
  bool release = false;
  ThreadPool pool("fan", 4, 16);
  auto results = FanOut<int>(
      &pool, 4,
      [&](size_t i) -> arrow::Result<int> {
        if (i == 2) {
          MutexLock lock(&mu);
          while (!release) cv.Wait(&mu);
        }
        if (i == 3) return arrow::Status::Invalid("three");
        return static_cast<int>(i) * 10;
      },
      steady_clock::now() + milliseconds(200));
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(**results[0], 0);
  EXPECT_EQ(**results[1], 10);
  EXPECT_FALSE(results[2].has_value());  // still blocked at the deadline
  EXPECT_TRUE(results[3]->status().IsInvalid());
  {
    MutexLock lock(&mu);
    release = true;
    cv.NotifyAll();
  }
  pool.Shutdown();  // the late call finishes into state it shares, not into `results`
}

}  // namespace
}  // namespace icefloe
