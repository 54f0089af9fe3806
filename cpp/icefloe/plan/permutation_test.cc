#include "icefloe/plan/permutation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace icefloe {
namespace {

// Checks that Forward is a bijection of [0, n) and Inverse undoes it.
void ExpectBijection(uint64_t n, uint64_t key) {
  SCOPED_TRACE(testing::Message() << "n=" << n << " key=" << key);
  const Permutation perm(n, key);
  std::vector<bool> seen(n, false);
  for (uint64_t x = 0; x < n; ++x) {
    const uint64_t y = perm.Forward(x);
    ASSERT_LT(y, n);
    ASSERT_FALSE(seen[y]) << "x=" << x << " collides at " << y;
    seen[y] = true;
    ASSERT_EQ(perm.Inverse(y), x);
  }
}

// Pearson's chi-square statistic of `counts` against a uniform expectation.
double ChiSquare(const std::vector<uint64_t>& counts) {
  uint64_t total = 0;
  for (uint64_t c : counts) total += c;
  const double expected = static_cast<double>(total) / counts.size();
  double chi = 0;
  for (uint64_t c : counts) chi += (c - expected) * (c - expected) / expected;
  return chi;
}

}  // namespace

TEST(Permutation, IsABijectionOnSmallDomainsExhaustively) {
  for (uint64_t n = 0; n <= 300; ++n) {
    for (uint64_t key : {0ULL, 1ULL, 0xDEADBEEFULL}) ExpectBijection(n, key);
  }
  for (uint64_t n : {1000ULL, 1023ULL, 1024ULL, 1025ULL, 4096ULL, 4097ULL, 65536ULL}) {
    ExpectBijection(n, n * 31);
  }
}

TEST(Permutation, IsABijectionJustAboveAPowerOfTwo) { ExpectBijection((1ULL << 20) + 1, 42); }

TEST(Permutation, InverseUndoesForwardOnHugeDomains) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  for (uint64_t n :
       std::vector<uint64_t>{1ULL << 32, (1ULL << 32) + 1, 1ULL << 62, (1ULL << 62) + 12345,
                             std::numeric_limits<uint64_t>::max()}) {
    const Permutation perm(n, rng());
    for (int i = 0; i < 2000; ++i) {
      const uint64_t x = rng() % n;
      const uint64_t y = perm.Forward(x);
      ASSERT_LT(y, n);
      ASSERT_EQ(perm.Inverse(y), x) << "n=" << n << " x=" << x;
    }
  }
}

TEST(Permutation, SameKeyReproducesAndOtherKeysDiffer) {
  const Permutation a(1000, 7);
  const Permutation b(1000, 7);
  const Permutation c(1000, 8);
  int differ = 0;
  for (uint64_t x = 0; x < 1000; ++x) {
    EXPECT_EQ(a.Forward(x), b.Forward(x));
    differ += a.Forward(x) != c.Forward(x);
  }
  EXPECT_GT(differ, 900);
}

TEST(Permutation, ReachesEveryOrderOfTinyDomains) {
  // n <= 6 with 20000 keys: each of n! <= 720 orders is expected >= 27 times.
  for (uint64_t n = 2; n <= 6; ++n) {
    std::set<std::vector<uint64_t>> orders;
    for (uint64_t key = 0; key < 20000; ++key) {
      const Permutation perm(n, key);
      std::vector<uint64_t> order(n);
      for (uint64_t x = 0; x < n; ++x) order[x] = perm.Forward(x);
      orders.insert(order);
    }
    uint64_t factorial = 1;
    for (uint64_t i = 2; i <= n; ++i) factorial *= i;
    EXPECT_EQ(orders.size(), factorial) << "n=" << n;
  }
}

TEST(Permutation, OrdersOfTinyDomainsAreRoughlyUniform) {
  // n! orders, 400 keys each: chi-square with d = n! - 1 degrees of freedom
  // has mean d and deviation sqrt(2d); the bound is 7 deviations out, yet
  // walking a 16-point network (see kMinHalfBits) fails it for n = 5.
  for (uint64_t n = 3; n <= 5; ++n) {
    std::vector<uint64_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::vector<std::vector<uint64_t>> all;
    do all.push_back(order);
    while (std::next_permutation(order.begin(), order.end()));
    std::vector<uint64_t> counts(all.size(), 0);
    for (uint64_t key = 0; key < 400 * all.size(); ++key) {
      const Permutation perm(n, key);
      for (uint64_t x = 0; x < n; ++x) order[x] = perm.Forward(x);
      counts[std::lower_bound(all.begin(), all.end(), order) - all.begin()]++;
    }
    const double d = static_cast<double>(all.size() - 1);
    EXPECT_LT(ChiSquare(counts), d + 7 * std::sqrt(2 * d)) << "n=" << n;
  }
}

TEST(Permutation, EachInputLandsUniformly) {
  // n = 10 over 20000 keys: the image of every input is uniform; 9 degrees of
  // freedom, mean 9, bound 45 (p < 1e-6 per input).
  constexpr uint64_t kN = 10;
  std::vector<std::vector<uint64_t>> counts(kN, std::vector<uint64_t>(kN, 0));
  for (uint64_t key = 0; key < 20000; ++key) {
    const Permutation perm(kN, key);
    for (uint64_t x = 0; x < kN; ++x) counts[x][perm.Forward(x)]++;
  }
  for (uint64_t x = 0; x < kN; ++x) EXPECT_LT(ChiSquare(counts[x]), 45.0) << "input " << x;
}

TEST(Permutation, PairsOfInputsLandUniformly) {
  // Images of inputs 0 and 1 among n = 10: 90 ordered pairs, 200 keys each;
  // 89 degrees of freedom, bound 7 deviations out.
  std::vector<uint64_t> counts(100, 0);
  for (uint64_t key = 0; key < 90 * 200; ++key) {
    const Permutation perm(10, key);
    counts[perm.Forward(0) * 10 + perm.Forward(1)]++;
  }
  std::vector<uint64_t> pairs;
  for (uint64_t i = 0; i < 100; ++i) {
    if (i / 10 == i % 10) {
      EXPECT_EQ(counts[i], 0u);  // Distinct inputs never share an image.
    } else {
      pairs.push_back(counts[i]);
    }
  }
  EXPECT_LT(ChiSquare(pairs), 89 + 7 * std::sqrt(2 * 89.0));
}

TEST(TabledPermutation, MapsExactlyAsThePermutation) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  for (uint64_t size : {0ULL, 1ULL, 2ULL, 63ULL, 64ULL, 65ULL, 1000ULL, 4096ULL, 65536ULL}) {
    for (int k = 0; k < 4; ++k) {
      const Permutation p(size, rng());
      ASSERT_TRUE(TabledPermutation::Fits(p));
      const TabledPermutation t(p);
      for (uint64_t x = 0; x < size; ++x) ASSERT_EQ(t.Forward(x), p.Forward(x)) << size;
      for (uint64_t y = 0; y < size; ++y) ASSERT_EQ(t.Inverse(y), p.Inverse(y)) << size;
      const uint64_t begin = size ? rng() % size : 0;
      const uint64_t count = size - begin;
      std::vector<uint64_t> range(count);
      t.ForwardRange(begin, count, range.data());
      for (uint64_t x = 0; x < count; ++x) ASSERT_EQ(range[x], p.Forward(begin + x)) << size;
      t.InverseRange(begin, count, range.data());
      for (uint64_t x = 0; x < count; ++x) ASSERT_EQ(range[x], p.Inverse(begin + x)) << size;
    }
  }
  EXPECT_FALSE(TabledPermutation::Fits(Permutation(65537, 1)));
}

}  // namespace icefloe
