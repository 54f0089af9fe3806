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

/// SplitMix64's finaliser: a bijection of uint64 with full avalanche.
uint64_t Mix64(uint64_t x);

/// Combines values into one 64-bit key, order-sensitive.
uint64_t MixKey(uint64_t a, uint64_t b);

/// A keyed bijection of [0, size). Immutable, cheap to copy, thread-safe.
class Permutation {
 public:
  static constexpr int kRounds = 8;

  /// The permutation of [0, size) selected by `key`. Any size is allowed,
  /// including 0 and 1 (where it is the identity) and up to 2^64 - 1.
  Permutation(uint64_t size, uint64_t key);

  uint64_t size() const { return size_; }

  /// The image of `x`; requires x < size().
  uint64_t Forward(uint64_t x) const;

  /// The preimage of `y`: Forward(Inverse(y)) == y; requires y < size().
  uint64_t Inverse(uint64_t y) const;

 private:
  uint64_t Round(int i, uint64_t half) const;
  uint64_t Encrypt(uint64_t x) const;
  uint64_t Decrypt(uint64_t x) const;

  uint64_t size_;
  int half_bits_;
  uint64_t half_mask_;
  std::array<uint64_t, kRounds> round_keys_;
};

}  // namespace icefloe
