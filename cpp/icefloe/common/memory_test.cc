#include "icefloe/common/memory.h"

#include <thread>
#include <vector>

#include <arrow/buffer.h>
#include <gtest/gtest.h>

namespace icefloe {

TEST(TrackingPool, RefusesBeyondBudgetAndReleasesOnFree) {
  auto budget = std::make_shared<MemoryBudget>(1 << 20);
  TrackingPool a(budget, "dataset 'a'"), b(budget, "dataset 'b'");
  auto buf = arrow::AllocateBuffer(600 << 10, &a);
  ASSERT_TRUE(buf.ok());
  EXPECT_EQ(a.bytes_allocated(), 600 << 10);
  auto refused = arrow::AllocateBuffer(600 << 10, &b);
  ASSERT_TRUE(refused.status().IsOutOfMemory());
  EXPECT_NE(refused.status().message().find("dataset 'b'"), std::string::npos);
  EXPECT_NE(refused.status().message().find("1.0 MiB"), std::string::npos);
  EXPECT_EQ(b.bytes_allocated(), 0);
  buf->reset();
  EXPECT_EQ(budget->used_bytes(), 0);
  EXPECT_TRUE(arrow::AllocateBuffer(600 << 10, &b).ok());
}

TEST(TrackingPool, ReallocateChargesTheDifference) {
  auto budget = std::make_shared<MemoryBudget>(1000);
  TrackingPool pool(budget, "x");
  auto buf = *arrow::AllocateResizableBuffer(100, &pool);
  ASSERT_TRUE(buf->Resize(900).ok());
  EXPECT_GE(budget->used_bytes(), 900);
  EXPECT_TRUE(buf->Resize(5000).IsOutOfMemory());
  buf.reset();
  EXPECT_EQ(budget->used_bytes(), 0);
}

TEST(MemoryBudget, ConcurrentReservationsNeverExceedTheLimit) {
  auto budget = std::make_shared<MemoryBudget>(1000);
  std::atomic<int> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        if (budget->TryReserve(7)) granted++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(granted.load(), 1000 / 7);
  EXPECT_LE(budget->used_bytes(), 1000);
}

}  // namespace icefloe
