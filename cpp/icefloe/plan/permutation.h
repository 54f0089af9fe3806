// Keyed pseudo-random permutations of [0, n) that are never materialised.
//
// Permutation is a balanced Feistel network on the smallest power of four
// 4^h >= n (h >= 3), restricted to [0, n) by cycle walking: Forward(x) applies
// the network until the value falls below n. A Feistel network is a bijection
// of its 4^h domain whatever its round functions, and cycle walking turns a
// bijection of a superset into a bijection of [0, n), so Forward is a
// permutation of [0, n) and Inverse undoes it exactly. Each evaluation costs
// kRounds mixes times the walk length; averaged over inputs the walk is
// 4^h / n network applications: below 4 for every n > 16 whatever its size
// (tiny n walk longer, at most 64 / n).
//
// Quality: round functions are SplitMix64's finaliser applied to the half
// block xor a 64-bit round key; round keys are derived from one 64-bit key.
// This is a pseudo-random permutation, not a uniformly random one: a key picks
// one of at most 2^64 permutations, far fewer than n! once n > 20. What holds
// (checked empirically in permutation_test.cc and plan_test.cc): across keys,
// every input's image and every pair of inputs' images are uniform, every
// order of n <= 6 occurs and orders of 3 to 5 elements are uniform; orders for
// different keys look independent. One structural restriction: a balanced Feistel network
// with h >= 2 is always an even permutation of its domain, so when n is itself
// a power of four (64, 256, ...) only the n!/2 even orders of [0, n) can arise.
// It is not cryptographic and must not be used for secrecy.
//
// The construction (rounds, key schedule, mixer) is part of the wire
// contract: head and nodes must compute the same orders, and a job resumed on
// a newer build must see the same epoch. Changing it needs a new
// kEpochOrderVersion (plan.h).
#pragma once

#include <array>
#include <cstdint>

namespace icefloe {

inline constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;

/// SplitMix64's finaliser: a bijection of uint64 with full avalanche.
/// Inline: plans evaluate it a few dozen times per row.
inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return x;
}

/// Combines values into one 64-bit key, order-sensitive.
inline uint64_t MixKey(uint64_t a, uint64_t b) {
  return Mix64(Mix64(a + kGolden) ^ (b + 2 * kGolden));
}

/// A keyed bijection of [0, size). Immutable, cheap to copy, thread-safe.
class Permutation {
 public:
  static constexpr int kRounds = 8;

  /// The permutation of [0, size) selected by `key`. Any size is allowed,
  /// including 0 and 1 (where it is the identity) and up to 2^64 - 1.
  Permutation(uint64_t size, uint64_t key);

  uint64_t size() const { return size_; }

  /// The image of `x`; requires x < size().
  uint64_t Forward(uint64_t x) const {
    if (size_ <= 1) return x;
    // Terminates: x lies on a cycle of the network that returns to x < size.
    do {
      x = Encrypt(x);
    } while (x >= size_);
    return x;
  }

  /// The preimage of `y`: Forward(Inverse(y)) == y; requires y < size().
  uint64_t Inverse(uint64_t y) const;

 private:
  uint64_t Round(int i, uint64_t half) const {
    return Mix64(half ^ round_keys_[i]) >> (64 - half_bits_);
  }
  uint64_t Encrypt(uint64_t x) const {
    uint64_t left = x >> half_bits_;
    uint64_t right = x & half_mask_;
    for (int i = 0; i < kRounds; ++i) {
      const uint64_t next = left ^ Round(i, right);
      left = right;
      right = next;
    }
    return (left << half_bits_) | right;
  }
  uint64_t Decrypt(uint64_t x) const;

  friend class TabledPermutation;

  uint64_t size_;
  int half_bits_;
  uint64_t half_mask_;
  std::array<uint64_t, kRounds> round_keys_;
};

/// The same bijection as a small Permutation (half blocks of at most 8 bits,
/// so size <= 2^16), with its round functions tabulated: building it costs
/// kRounds * 2^half_bits mixes, after which Forward is a few table lookups
/// per round instead of a 64-bit mix. For mapping many elements of one small
/// permutation (a window of the window shuffle).
class TabledPermutation {
 public:
  static constexpr int kMaxHalfBits = 8;

  /// Whether `p` is small enough.
  static bool Fits(const Permutation& p) { return p.half_bits_ <= kMaxHalfBits; }

  /// Requires Fits(p).
  explicit TabledPermutation(const Permutation& p);

  /// out[t] = Forward(begin + t) for t < count; requires begin + count <=
  /// size. Evaluates four independent elements at a time, so their round
  /// chains overlap in the pipeline.
  void ForwardRange(uint64_t begin, uint64_t count, uint64_t* out) const;

  /// out[t] = Inverse(begin + t) for t < count; requires begin + count <=
  /// size. Four lanes at a time, as ForwardRange.
  void InverseRange(uint64_t begin, uint64_t count, uint64_t* out) const;

  /// Exactly p.Inverse(y); requires y < size.
  uint64_t Inverse(uint64_t y) const {
    if (size_ <= 1) return y;
    do {
      uint64_t left = y >> half_bits_;
      uint64_t right = y & half_mask_;
      for (int i = Permutation::kRounds - 1; i >= 0; --i) {
        const uint64_t prev = right ^ rounds_[i][left];
        right = left;
        left = prev;
      }
      y = (left << half_bits_) | right;
    } while (y >= size_);
    return y;
  }

  /// Exactly p.Forward(x); requires x < size.
  uint64_t Forward(uint64_t x) const {
    if (size_ <= 1) return x;
    do {
      uint64_t left = x >> half_bits_;
      uint64_t right = x & half_mask_;
      for (int i = 0; i < Permutation::kRounds; ++i) {
        const uint64_t next = left ^ rounds_[i][right];
        left = right;
        right = next;
      }
      x = (left << half_bits_) | right;
    } while (x >= size_);
    return x;
  }

 private:
  uint64_t size_;
  int half_bits_;
  uint64_t half_mask_;
  std::array<std::array<uint8_t, 1 << kMaxHalfBits>, Permutation::kRounds> rounds_{};
};

}  // namespace icefloe
