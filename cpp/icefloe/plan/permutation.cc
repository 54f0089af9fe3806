#include "icefloe/plan/permutation.h"

#include <algorithm>
#include <bit>

namespace icefloe {

namespace {

// Smallest half width: a domain of at least 64. Networks on 16 points are too
// structured: with any number of rounds, walking them skews the orders of 3 to
// 5 rows measurably; from 64 points on no skew shows (permutation_test.cc).
constexpr int kMinHalfBits = 3;

}  // namespace

Permutation::Permutation(uint64_t size, uint64_t key) : size_(size) {
  const int bits = size <= 1 ? 0 : std::bit_width(size - 1);
  half_bits_ = std::max((bits + 1) / 2, kMinHalfBits);
  half_mask_ = half_bits_ == 32 ? 0xFFFFFFFFULL : (uint64_t{1} << half_bits_) - 1;
  // SplitMix64's stream seeded by the key and the size: a different n gives
  // an unrelated permutation rather than a truncation of a shared one.
  uint64_t state = MixKey(key, size);
  for (auto& k : round_keys_) {
    state += kGolden;
    k = Mix64(state);
  }
}

uint64_t Permutation::Decrypt(uint64_t x) const {
  uint64_t left = x >> half_bits_;
  uint64_t right = x & half_mask_;
  for (int i = kRounds - 1; i >= 0; --i) {
    const uint64_t prev = right ^ Round(i, left);
    right = left;
    left = prev;
  }
  return (left << half_bits_) | right;
}

uint64_t Permutation::Inverse(uint64_t y) const {
  if (size_ <= 1) return y;
  do {
    y = Decrypt(y);
  } while (y >= size_);
  return y;
}

TabledPermutation::TabledPermutation(const Permutation& p)
    : size_(p.size_), half_bits_(p.half_bits_), half_mask_(p.half_mask_) {
  for (int i = 0; i < Permutation::kRounds; ++i) {
    for (uint64_t half = 0; half <= half_mask_; ++half) {
      rounds_[i][half] = static_cast<uint8_t>(p.Round(i, half));
    }
  }
}

void TabledPermutation::ForwardRange(uint64_t begin, uint64_t count, uint64_t* out) const {
  // Four lanes in named variables, so they stay in registers and their
  // chains of dependent lookups overlap.
  uint64_t t = 0;
  for (; t + 4 <= count; t += 4) {
    const uint64_t x = begin + t;
    uint64_t l0 = x >> half_bits_, r0 = x & half_mask_;
    uint64_t l1 = (x + 1) >> half_bits_, r1 = (x + 1) & half_mask_;
    uint64_t l2 = (x + 2) >> half_bits_, r2 = (x + 2) & half_mask_;
    uint64_t l3 = (x + 3) >> half_bits_, r3 = (x + 3) & half_mask_;
    for (int i = 0; i < Permutation::kRounds; ++i) {
      const uint8_t* f = rounds_[i].data();
      const uint64_t n0 = l0 ^ f[r0];
      const uint64_t n1 = l1 ^ f[r1];
      const uint64_t n2 = l2 ^ f[r2];
      const uint64_t n3 = l3 ^ f[r3];
      l0 = r0, l1 = r1, l2 = r2, l3 = r3;
      r0 = n0, r1 = n1, r2 = n2, r3 = n3;
    }
    const uint64_t y[4] = {(l0 << half_bits_) | r0, (l1 << half_bits_) | r1,
                           (l2 << half_bits_) | r2, (l3 << half_bits_) | r3};
    for (int k = 0; k < 4; ++k) {
      // Values past the end walk on, one at a time (none when the size is
      // the network's whole domain).
      out[t + k] = y[k] < size_ ? y[k] : Forward(y[k]);
    }
  }
  for (; t < count; ++t) out[t] = Forward(begin + t);
}

void TabledPermutation::InverseRange(uint64_t begin, uint64_t count, uint64_t* out) const {
  uint64_t t = 0;
  for (; t + 4 <= count; t += 4) {
    const uint64_t y = begin + t;
    uint64_t l0 = y >> half_bits_, r0 = y & half_mask_;
    uint64_t l1 = (y + 1) >> half_bits_, r1 = (y + 1) & half_mask_;
    uint64_t l2 = (y + 2) >> half_bits_, r2 = (y + 2) & half_mask_;
    uint64_t l3 = (y + 3) >> half_bits_, r3 = (y + 3) & half_mask_;
    for (int i = Permutation::kRounds - 1; i >= 0; --i) {
      const uint8_t* f = rounds_[i].data();
      const uint64_t p0 = r0 ^ f[l0];
      const uint64_t p1 = r1 ^ f[l1];
      const uint64_t p2 = r2 ^ f[l2];
      const uint64_t p3 = r3 ^ f[l3];
      r0 = l0, r1 = l1, r2 = l2, r3 = l3;
      l0 = p0, l1 = p1, l2 = p2, l3 = p3;
    }
    const uint64_t x[4] = {(l0 << half_bits_) | r0, (l1 << half_bits_) | r1,
                           (l2 << half_bits_) | r2, (l3 << half_bits_) | r3};
    for (int k = 0; k < 4; ++k) out[t + k] = x[k] < size_ ? x[k] : Inverse(x[k]);
  }
  for (; t < count; ++t) out[t] = Inverse(begin + t);
}

}  // namespace icefloe
