#include "icefloe/common/memory.h"

#include <limits>

#include "icefloe/common/bytes.h"

namespace icefloe {

int64_t MemoryBudget::available_bytes() const {
  if (limit_ <= 0) return std::numeric_limits<int64_t>::max() / 2;
  return std::max<int64_t>(0, limit_ - used_bytes());
}

bool MemoryBudget::TryReserve(int64_t bytes) {
  if (limit_ <= 0) {
    used_.fetch_add(bytes, std::memory_order_relaxed);
    return true;
  }
  int64_t current = used_.load(std::memory_order_relaxed);
  do {
    if (current + bytes > limit_) return false;
  } while (!used_.compare_exchange_weak(current, current + bytes, std::memory_order_relaxed));
  return true;
}

void MemoryBudget::Release(int64_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }

TrackingPool::TrackingPool(std::shared_ptr<MemoryBudget> budget, std::string label,
                           arrow::MemoryPool* base)
    : budget_(std::move(budget)), label_(std::move(label)), base_(base) {}

arrow::Status TrackingPool::Refuse(int64_t size) const {
  return arrow::Status::OutOfMemory(
      "memory budget exceeded while loading ", label_, ": allocating ", FormatBytes(size), " with ",
      FormatBytes(budget_->used_bytes()), " of ", FormatBytes(budget_->limit_bytes()), " in use");
}

void TrackingPool::Charge(int64_t delta) {
  int64_t now = bytes_.fetch_add(delta, std::memory_order_relaxed) + delta;
  int64_t prev_max = max_.load(std::memory_order_relaxed);
  while (now > prev_max && !max_.compare_exchange_weak(prev_max, now)) {
  }
}

arrow::Status TrackingPool::Allocate(int64_t size, int64_t alignment, uint8_t** out) {
  if (!budget_->TryReserve(size)) return Refuse(size);
  arrow::Status st = base_->Allocate(size, alignment, out);
  if (!st.ok()) {
    budget_->Release(size);
    return st;
  }
  Charge(size);
  total_.fetch_add(size, std::memory_order_relaxed);
  allocations_.fetch_add(1, std::memory_order_relaxed);
  return st;
}

arrow::Status TrackingPool::Reallocate(int64_t old_size, int64_t new_size, int64_t alignment,
                                       uint8_t** ptr) {
  int64_t delta = new_size - old_size;
  if (delta > 0 && !budget_->TryReserve(delta)) return Refuse(delta);
  arrow::Status st = base_->Reallocate(old_size, new_size, alignment, ptr);
  if (!st.ok()) {
    if (delta > 0) budget_->Release(delta);
    return st;
  }
  if (delta < 0) budget_->Release(-delta);
  Charge(delta);
  if (delta > 0) total_.fetch_add(delta, std::memory_order_relaxed);
  allocations_.fetch_add(1, std::memory_order_relaxed);
  return st;
}

void TrackingPool::Free(uint8_t* buffer, int64_t size, int64_t alignment) {
  base_->Free(buffer, size, alignment);
  budget_->Release(size);
  Charge(-size);
}

}  // namespace icefloe
