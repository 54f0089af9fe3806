#include "icefloe/common/background_loop.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <optional>
#include <thread>

#include <gtest/gtest.h>

namespace icefloe {
namespace {

using std::chrono::hours;
using std::chrono::seconds;

// Far beyond any wait these tests expect to end: a loop that missed a wake-up
// fails the test instead of hanging it.
constexpr auto kBound = seconds(60);

// Rounds run so far, waited for with a bound.
class Rounds {
 public:
  int Add() {
    MutexLock lock(&mu_);
    ++n_;
    cv_.NotifyAll();
    return n_;
  }
  int n() {
    MutexLock lock(&mu_);
    return n_;
  }
  // True once at least `n` rounds ran, false when kBound passed first.
  bool AtLeast(int n) {
    const auto deadline = std::chrono::steady_clock::now() + kBound;
    MutexLock lock(&mu_);
    while (n_ < n) {
      if (!cv_.WaitUntil(&mu_, deadline) && n_ < n) return false;
    }
    return true;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  int n_ GUARDED_BY(mu_) = 0;
};

// Runs Stop() on another thread; true when it returned within kBound. A Stop
// that missed its wake-up would leave a thread the test cannot join: abort.
bool StopsWithinBound(BackgroundLoop* loop) {
  std::promise<void> stopped;
  std::future<void> done = stopped.get_future();
  std::thread([loop, stopped = std::move(stopped)]() mutable {
    loop->Stop();
    stopped.set_value();
  }).detach();
  if (done.wait_for(kBound) == std::future_status::ready) return true;
  std::fprintf(stderr, "BackgroundLoop::Stop() did not return within %lld s\n",
               static_cast<long long>(kBound.count()));
  std::abort();
}

TEST(BackgroundLoopTest, RunsAtOnceThenEveryPeriod) {
  Rounds rounds;
  BackgroundLoop loop;
  loop.Start("test loop", std::chrono::milliseconds(1), [&] { rounds.Add(); });
  EXPECT_TRUE(rounds.AtLeast(3));
  loop.Stop();
}

TEST(BackgroundLoopTest, StopReturnsWhileTheBodyWaitsItsPeriod) {
  Rounds rounds;
  BackgroundLoop loop;
  loop.Start("test loop", hours(1), [&] { rounds.Add(); });
  ASSERT_TRUE(rounds.AtLeast(1));
  EXPECT_TRUE(StopsWithinBound(&loop));
  EXPECT_EQ(rounds.n(), 1);
}

TEST(BackgroundLoopTest, StopTwiceAndStartAfterStopAreNoOps) {
  Rounds rounds;
  BackgroundLoop loop;
  loop.Start("test loop", hours(1), [&] { rounds.Add(); });
  ASSERT_TRUE(rounds.AtLeast(1));
  loop.Stop();
  loop.Stop();
  EXPECT_FALSE(loop.Start("again", hours(1), [&] { rounds.Add(); }));
  loop.Stop();
  EXPECT_EQ(rounds.n(), 1);

  BackgroundLoop never_started;
  never_started.Stop();
  never_started.Stop();
}

TEST(BackgroundLoopTest, OnlyTheFirstStartStartsIt) {
  Rounds first, second;
  BackgroundLoop loop;
  EXPECT_TRUE(loop.Start("first", hours(1), [&] { first.Add(); }));
  EXPECT_FALSE(loop.Start("second", hours(1), [&] { second.Add(); }));
  ASSERT_TRUE(first.AtLeast(1));
  loop.Stop();
  EXPECT_EQ(second.n(), 0);
}

TEST(BackgroundLoopTest, WakeEndsTheWait) {
  Rounds rounds;
  BackgroundLoop loop;
  loop.Start("test loop", hours(1), [&] { rounds.Add(); });
  ASSERT_TRUE(rounds.AtLeast(1));
  loop.Wake();
  EXPECT_TRUE(rounds.AtLeast(2));
  loop.Stop();
}

TEST(BackgroundLoopTest, WakeDuringARoundSkipsTheWaitAfterIt) {
  Rounds rounds;
  BackgroundLoop loop;
  loop.Start("test loop", hours(1), [&] {
    if (rounds.Add() == 1) loop.Wake();  // as work arriving while a round runs
  });
  EXPECT_TRUE(rounds.AtLeast(2));
  loop.Stop();
}

TEST(BackgroundLoopTest, TheBodyChoosesItsWaitOrEndsTheLoop) {
  Rounds rounds;
  BackgroundLoop loop;
  loop.Start("test loop", [&]() -> std::optional<BackgroundLoop::Duration> {
    const int n = rounds.Add();
    if (n < 3) return BackgroundLoop::Duration::zero();  // more to do: at once
    return std::nullopt;
  });
  ASSERT_TRUE(rounds.AtLeast(3));
  loop.Wake();  // the loop has ended: nothing runs it again
  EXPECT_TRUE(StopsWithinBound(&loop));
  EXPECT_EQ(rounds.n(), 3);
}

}  // namespace
}  // namespace icefloe
