// Memory budgets: a node never holds more Arrow bytes than --memory-limit.
//
// Every allocation made while loading a dataset goes through a TrackingPool
// that charges one node-wide MemoryBudget first. An allocation that would
// exceed the budget fails with OutOfMemory (naming the need and the budget)
// instead of the kernel's OOM killer ending the process. Each TrackingPool
// also counts its own bytes, which is how bytes per dataset are reported.
//
// Thread-safe. A TrackingPool must outlive every buffer it allocated: datasets
// and the streams reading them hold it by shared_ptr.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include <arrow/memory_pool.h>

namespace icefloe {

/// Memory that no pool owns and record batches are views of: a node's
/// mapped tier file (node/tier/tier_file.h). Copies keep such owners alive with
/// their batches and ask them where the mapped bytes lie.
class MappedRegion {
 public:
  virtual ~MappedRegion() = default;
  /// The mapped bytes.
  virtual const uint8_t* data() const = 0;
  virtual int64_t size() const = 0;
  bool Contains(const uint8_t* begin, const uint8_t* end) const {
    return begin >= data() && end <= data() + size();
  }
};

class MemoryBudget {
 public:
  /// `limit_bytes` <= 0 means unlimited.
  explicit MemoryBudget(int64_t limit_bytes) : limit_(limit_bytes) {}

  int64_t limit_bytes() const { return limit_; }
  int64_t used_bytes() const { return used_.load(std::memory_order_relaxed); }
  /// Bytes still available (a large number when unlimited).
  int64_t available_bytes() const;

  /// Reserves `bytes`; false (and nothing reserved) when it would not fit.
  bool TryReserve(int64_t bytes);
  void Release(int64_t bytes);

 private:
  const int64_t limit_;
  std::atomic<int64_t> used_{0};
};

class TrackingPool : public arrow::MemoryPool {
 public:
  TrackingPool(std::shared_ptr<MemoryBudget> budget, std::string label,
               arrow::MemoryPool* base = arrow::default_memory_pool());
  ~TrackingPool() override = default;

  arrow::Status Allocate(int64_t size, int64_t alignment, uint8_t** out) override;
  arrow::Status Reallocate(int64_t old_size, int64_t new_size, int64_t alignment,
                           uint8_t** ptr) override;
  void Free(uint8_t* buffer, int64_t size, int64_t alignment) override;
  int64_t bytes_allocated() const override { return bytes_.load(std::memory_order_relaxed); }
  int64_t max_memory() const override { return max_.load(std::memory_order_relaxed); }
  int64_t total_bytes_allocated() const override { return total_.load(); }
  int64_t num_allocations() const override { return allocations_.load(); }
  std::string backend_name() const override { return base_->backend_name(); }

 private:
  arrow::Status Refuse(int64_t size) const;
  void Charge(int64_t delta);

  std::shared_ptr<MemoryBudget> budget_;
  std::string label_;
  arrow::MemoryPool* base_;
  std::atomic<int64_t> bytes_{0};
  std::atomic<int64_t> max_{0};
  std::atomic<int64_t> total_{0};
  std::atomic<int64_t> allocations_{0};
};

}  // namespace icefloe
