#include "icefloe/plan/window_order.h"

#include <algorithm>
#include <bit>
#include <limits>

namespace icefloe {

namespace {

constexpr uint64_t kTabledRows = 256;
constexpr uint64_t kUnknown = std::numeric_limits<uint64_t>::max();

}  // namespace

WindowOrder::WindowOrder(uint64_t num_rows, uint64_t block_rows, uint64_t window_blocks,
                         uint64_t strata_key, uint64_t window_key)
    : num_rows_(num_rows),
      block_rows_(block_rows),
      strata_key_(strata_key),
      window_key_(window_key),
      strata_perms_{Permutation(0, 0), Permutation(0, 0)} {
  if (num_rows == 0) return;
  const uint64_t blocks = num_rows / block_rows + (num_rows % block_rows != 0);
  strata_ = std::min(window_blocks, blocks);
  per_stratum_ = blocks / strata_;
  long_strata_ = blocks % strata_;
  num_windows_ = per_stratum_ + (long_strata_ > 0 ? 1 : 0);
  window_rows_ = strata_ * block_rows;
  missing_rows_ = blocks * block_rows - num_rows;
  strata_perms_[0] = Permutation(per_stratum_, strata_key_);
  strata_perms_[1] = Permutation(per_stratum_ + 1, strata_key_);
  // The last block is the last one of the last stratum (a long one when
  // there are any): the window that takes it is where positions shift.
  const uint64_t last = strata_ - 1;
  const uint64_t size = StratumSize(last);
  const uint64_t x = strata_perms_[size - per_stratum_].Inverse(size - 1);
  short_window_ = (x + size - StratumShift(last, size)) % size;
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

uint64_t WindowOrder::StratumShift(uint64_t s, uint64_t size) const {
  return MixKey(strata_key_, s) % size;
}

uint64_t WindowOrder::BlockOf(uint64_t k, uint64_t s, const WindowCache* cache) const {
  const uint64_t size = StratumSize(s);
  const size_t which = size - per_stratum_;
  const uint64_t x = (k + StratumShift(s, size)) % size;
  const bool tabled = cache != nullptr && cache->strata_[which].has_value();
  return StratumStart(s) +
         (tabled ? cache->strata_[which]->Forward(x) : strata_perms_[which].Forward(x));
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
  return BlockOf(k, StratumOf(k, x / block_rows_), nullptr) * block_rows_ + x % block_rows_;
}

std::vector<uint64_t> WindowOrder::Identity() const {
  return {num_rows_, block_rows_, strata_, strata_key_, window_key_};
}

WindowCache::Window* WindowOrder::CachedWindow(uint64_t k, WindowCache* cache) const {
  if (cache->owner_ != Identity()) {
    cache->owner_ = Identity();
    cache->windows_.clear();
    for (size_t which = 0; which < 2; ++which) {
      cache->strata_[which].reset();
      if (TabledPermutation::Fits(strata_perms_[which])) {
        cache->strata_[which].emplace(strata_perms_[which]);
      }
    }
  }
  for (auto& w : cache->windows_) {
    if (w.k == k) return &w;
  }
  if (cache->windows_.size() == WindowCache::kWindows) cache->windows_.pop_front();
  WindowCache::Window& w = cache->windows_.emplace_back();
  w.k = k;
  w.blocks.assign(k < per_stratum_ ? strata_ : long_strata_, kUnknown);
  const Permutation pi = WindowPermutation(k);
  if (TabledPermutation::Fits(pi)) w.tabled.emplace(pi);
  return &w;
}

void WindowOrder::AppendRows(uint64_t begin, uint64_t end, std::vector<uint64_t>* out,
                             WindowCache* cache) const {
  // Tabulating permutations pays once a few hundred rows are mapped; the
  // values are the same either way.
  WindowCache local_cache;
  if (cache == nullptr && end - begin >= kTabledRows) cache = &local_cache;
  WindowCache::Window local;  // Without a cache: this call's window.
  std::vector<uint64_t> xs;   // Window-local rows of a run of positions.
  // Blocks of a power-of-two size (the default) split rows with a shift.
  const bool pow2 = (block_rows_ & (block_rows_ - 1)) == 0;
  const int shift = std::countr_zero(block_rows_);
  for (uint64_t p = begin; p < end;) {
    uint64_t k;
    uint64_t i;
    Locate(p, &k, &i);
    const uint64_t count = std::min(end - p, WindowLength(k) - i);
    WindowCache::Window* w = &local;
    if (cache != nullptr) {
      w = CachedWindow(k, cache);
    } else {
      local.k = k;
      local.blocks.assign(k < per_stratum_ ? strata_ : long_strata_, kUnknown);
    }
    xs.resize(count);
    if (w->tabled) {
      w->tabled->ForwardRange(i, count, xs.data());
    } else {
      const Permutation pi = WindowPermutation(k);
      for (uint64_t t = 0; t < count; ++t) xs[t] = pi.Forward(i + t);
    }
    std::vector<uint64_t>& blocks = w->blocks;
    for (uint64_t x : xs) {
      const uint64_t j = pow2 ? x >> shift : x / block_rows_;
      const uint64_t offset = pow2 ? x & (block_rows_ - 1) : x % block_rows_;
      if (blocks[j] == kUnknown) blocks[j] = BlockOf(k, StratumOf(k, j), cache);
      out->push_back(blocks[j] * block_rows_ + offset);
    }
    p += count;
  }
}

namespace {

// The parts of rows [start, stop) that lie in `owned`, appended as ranges.
void OwnedParts(const std::vector<RowRange>& owned, uint64_t start, uint64_t stop,
                std::vector<RowRange>* out) {
  auto it = std::upper_bound(owned.begin(), owned.end(), start,
                             [](uint64_t v, const RowRange& r) { return v < r.stop; });
  for (; it != owned.end() && it->start < stop; ++it) {
    out->push_back({std::max(start, it->start), std::min(stop, it->stop)});
  }
}

}  // namespace

void WindowOrder::AppendOwnedRows(uint64_t begin, uint64_t end, const std::vector<RowRange>& owned,
                                  uint64_t offset, std::vector<uint64_t>* rows,
                                  std::vector<uint32_t>* offsets, WindowCache* cache) const {
  WindowCache local_cache;
  if (cache == nullptr) cache = &local_cache;
  std::vector<uint64_t> xs;
  std::vector<RowRange> parts;  // owned rows of each block of the window
  std::vector<uint8_t> whole;   // per block: 1 if owned whole, 0 if not at all, 2 if in part
  for (uint64_t p = begin; p < end;) {
    uint64_t k;
    uint64_t i;
    Locate(p, &k, &i);
    const uint64_t count = std::min(end - p, WindowLength(k) - i);
    const uint64_t base = offset + (p - begin);  // batch offset of position i
    WindowCache::Window* w = CachedWindow(k, cache);
    const uint64_t blocks = w->blocks.size();
    // The window's blocks and which of their rows are owned here.
    uint64_t owned_rows = 0;
    parts.clear();
    whole.assign(blocks, 0);
    std::vector<size_t> first_part(blocks + 1);
    for (uint64_t j = 0; j < blocks; ++j) {
      if (w->blocks[j] == kUnknown) w->blocks[j] = BlockOf(k, StratumOf(k, j), cache);
      const uint64_t start = w->blocks[j] * block_rows_;
      const uint64_t stop = std::min(start + block_rows_, num_rows_);
      first_part[j] = parts.size();
      OwnedParts(owned, start, stop, &parts);
      uint64_t here = 0;
      for (size_t q = first_part[j]; q < parts.size(); ++q) here += parts[q].size();
      owned_rows += here;
      whole[j] = here == 0 ? 0 : here == stop - start ? 1 : 2;
    }
    first_part[blocks] = parts.size();
    if (owned_rows <= count) {
      // From the blocks: invert the permutation for each owned row.
      const Permutation pi = WindowPermutation(k);
      for (uint64_t j = 0; j < blocks; ++j) {
        for (size_t q = first_part[j]; q < first_part[j + 1]; ++q) {
          const uint64_t x0 = j * block_rows_ + (parts[q].start - w->blocks[j] * block_rows_);
          xs.resize(parts[q].size());
          if (w->tabled) {
            w->tabled->InverseRange(x0, xs.size(), xs.data());
          } else {
            for (uint64_t d = 0; d < xs.size(); ++d) xs[d] = pi.Inverse(x0 + d);
          }
          for (uint64_t d = 0; d < xs.size(); ++d) {
            const uint64_t t = xs[d];
            if (t < i || t >= i + count) continue;
            rows->push_back(parts[q].start + d);
            offsets->push_back(static_cast<uint32_t>(base + (t - i)));
          }
        }
      }
    } else {
      // From the positions: map each, keep the owned ones.
      xs.resize(count);
      if (w->tabled) {
        w->tabled->ForwardRange(i, count, xs.data());
      } else {
        const Permutation pi = WindowPermutation(k);
        for (uint64_t t = 0; t < count; ++t) xs[t] = pi.Forward(i + t);
      }
      for (uint64_t t = 0; t < count; ++t) {
        const uint64_t j = xs[t] / block_rows_;
        if (whole[j] == 0) continue;
        const uint64_t row = w->blocks[j] * block_rows_ + xs[t] % block_rows_;
        if (whole[j] == 2) {
          bool in = false;
          for (size_t q = first_part[j]; q < first_part[j + 1]; ++q) {
            in = in || (row >= parts[q].start && row < parts[q].stop);
          }
          if (!in) continue;
        }
        rows->push_back(row);
        offsets->push_back(static_cast<uint32_t>(base + t));
      }
    }
    p += count;
  }
}

}  // namespace icefloe
