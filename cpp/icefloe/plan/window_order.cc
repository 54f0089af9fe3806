#include "icefloe/plan/window_order.h"

#include <algorithm>
#include <limits>

namespace icefloe {

WindowOrder::WindowOrder(uint64_t num_rows, uint64_t block_rows, uint64_t window_blocks,
                         uint64_t strata_key, uint64_t window_key)
    : num_rows_(num_rows),
      block_rows_(block_rows),
      strata_key_(strata_key),
      window_key_(window_key) {
  if (num_rows == 0) return;
  const uint64_t blocks = num_rows / block_rows + (num_rows % block_rows != 0);
  strata_ = std::min(window_blocks, blocks);
  per_stratum_ = blocks / strata_;
  long_strata_ = blocks % strata_;
  num_windows_ = per_stratum_ + (long_strata_ > 0 ? 1 : 0);
  window_rows_ = strata_ * block_rows;
  missing_rows_ = blocks * block_rows - num_rows;
  // The last block is the last one of the last stratum (a long one when
  // there are any): the window that takes it is where positions shift.
  const uint64_t last = strata_ - 1;
  const uint64_t size = StratumSize(last);
  short_window_ = Permutation(size, MixKey(strata_key_, last)).Inverse(size - 1);
}

uint64_t WindowOrder::StratumStart(uint64_t s) const {
  return s * per_stratum_ + s * long_strata_ / strata_;
}

uint64_t WindowOrder::StratumSize(uint64_t s) const {
  return per_stratum_ + (s + 1) * long_strata_ / strata_ - s * long_strata_ / strata_;
}

uint64_t WindowOrder::StratumOf(uint64_t k, uint64_t j) const {
  if (k < per_stratum_) return j;
  // The j-th long stratum: the smallest s with floor((s + 1) e / m) > j.
  return ((j + 1) * strata_ + long_strata_ - 1) / long_strata_ - 1;
}

uint64_t WindowOrder::BlockOf(uint64_t k, uint64_t s) const {
  return StratumStart(s) + Permutation(StratumSize(s), MixKey(strata_key_, s)).Forward(k);
}

uint64_t WindowOrder::WindowLength(uint64_t k) const {
  const uint64_t blocks = k < per_stratum_ ? strata_ : long_strata_;
  return blocks * block_rows_ - (k == short_window_ ? missing_rows_ : 0);
}

uint64_t WindowOrder::WindowStart(uint64_t k) const {
  return k * window_rows_ - (k > short_window_ ? missing_rows_ : 0);
}

Permutation WindowOrder::WindowPermutation(uint64_t k) const {
  return Permutation(WindowLength(k), MixKey(window_key_, k));
}

void WindowOrder::Locate(uint64_t position, uint64_t* window, uint64_t* offset) const {
  // Past the short window, positions are missing_rows_ behind where full
  // blocks would put them.
  const uint64_t short_end = WindowStart(short_window_) + WindowLength(short_window_);
  const uint64_t p = position < short_end ? position : position + missing_rows_;
  *window = p / window_rows_;
  *offset = p % window_rows_;
}

uint64_t WindowOrder::Row(uint64_t position) const {
  uint64_t k;
  uint64_t i;
  Locate(position, &k, &i);
  const uint64_t x = WindowPermutation(k).Forward(i);
  return BlockOf(k, StratumOf(k, x / block_rows_)) * block_rows_ + x % block_rows_;
}

void WindowOrder::AppendRows(uint64_t begin, uint64_t end, std::vector<uint64_t>* out) const {
  constexpr uint64_t kUnknown = std::numeric_limits<uint64_t>::max();
  std::vector<uint64_t> blocks;  // Window k's j-th block, computed when first needed.
  for (uint64_t p = begin; p < end;) {
    uint64_t k;
    uint64_t i;
    Locate(p, &k, &i);
    const uint64_t count = std::min(end - p, WindowLength(k) - i);
    const Permutation pi = WindowPermutation(k);
    blocks.assign(k < per_stratum_ ? strata_ : long_strata_, kUnknown);
    for (uint64_t t = i; t < i + count; ++t) {
      const uint64_t x = pi.Forward(t);
      const uint64_t j = x / block_rows_;
      if (blocks[j] == kUnknown) blocks[j] = BlockOf(k, StratumOf(k, j));
      out->push_back(blocks[j] * block_rows_ + x % block_rows_);
    }
    p += count;
  }
}

}  // namespace icefloe
