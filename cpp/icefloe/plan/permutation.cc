#include "icefloe/plan/permutation.h"

#include <algorithm>
#include <bit>

namespace icefloe {

namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;
// Smallest half width: a domain of at least 64. Networks on 16 points are too
// structured: with any number of rounds, walking them skews the orders of 3 to
// 5 rows measurably; from 64 points on no skew shows (permutation_test.cc).
constexpr int kMinHalfBits = 3;

}  // namespace

uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return x;
}

uint64_t MixKey(uint64_t a, uint64_t b) { return Mix64(Mix64(a + kGolden) ^ (b + 2 * kGolden)); }

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

uint64_t Permutation::Round(int i, uint64_t half) const {
  return Mix64(half ^ round_keys_[i]) >> (64 - half_bits_);
}

uint64_t Permutation::Encrypt(uint64_t x) const {
  uint64_t left = x >> half_bits_;
  uint64_t right = x & half_mask_;
  for (int i = 0; i < kRounds; ++i) {
    const uint64_t next = left ^ Round(i, right);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
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

uint64_t Permutation::Forward(uint64_t x) const {
  if (size_ <= 1) return x;
  // Terminates: x lies on a cycle of the network that returns to x < size.
  do {
    x = Encrypt(x);
  } while (x >= size_);
  return x;
}

uint64_t Permutation::Inverse(uint64_t y) const {
  if (size_ <= 1) return y;
  do {
    y = Decrypt(y);
  } while (y >= size_);
  return y;
}

}  // namespace icefloe
