#include "icefloe/node/tier/working_set.h"

#include <cstdio>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "icefloe/plan/plan.h"

namespace icefloe {
namespace {

using Policy = WorkingSet::Policy;

// Misses of one stream reading `trace` (units of 1 byte) through a set of
// `capacity` units, told the whole trace up front.
int Misses(const std::vector<uint64_t>& trace, int64_t capacity, Policy policy) {
  WorkingSet set(capacity, policy);
  std::vector<std::pair<uint64_t, int64_t>> planned;
  for (uint64_t u : trace) planned.push_back({u, 1});
  set.Plan(0, planned);
  int misses = 0;
  for (size_t i = 0; i < trace.size(); ++i) {
    auto hit = set.Read(0);
    EXPECT_TRUE(hit.ok()) << hit.status();
    misses += !*hit;
    EXPECT_LE(set.used_bytes(), capacity);
  }
  return misses;
}

TEST(WorkingSet, MatchesTheTextbooksOptimalAndLruFaults) {
  // Silberschatz, Operating System Concepts, section 10.4 (page replacement):
  // this reference string with 3 frames faults 9 times under OPT and 12 under LRU.
  const std::vector<uint64_t> trace = {7, 0, 1, 2, 0, 3, 0, 4, 2, 3, 0, 3, 2, 1, 2, 0, 1, 7, 0, 1};
  EXPECT_EQ(Misses(trace, 3, Policy::kBelady), 9);
  EXPECT_EQ(Misses(trace, 3, Policy::kLru), 12);
}

TEST(WorkingSet, CountsBytesAndRefusesWhatCannotFit) {
  WorkingSet set(100, Policy::kBelady);
  set.Plan(0, {{1, 60}, {2, 50}, {1, 60}, {3, 101}});
  ASSERT_EQ(set.Read(0).ValueOrDie(), false);
  ASSERT_EQ(set.Read(0).ValueOrDie(), false);  // 2 evicts 1 (60 + 50 > 100)...
  EXPECT_FALSE(set.Resident(1));
  EXPECT_EQ(set.used_bytes(), 50);
  EXPECT_EQ(set.Read(0).ValueOrDie(), false);  // ...so 1 misses again
  auto big = set.Read(0);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("unit 3 of 101 bytes is larger than the set's 100"),
            std::string::npos);
  auto none = set.Read(0);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("stream 0 has no planned read"), std::string::npos);
  EXPECT_FALSE(set.Load(9).ok());  // nobody plans to read it
}

TEST(WorkingSet, LoadsWhatIsReadSoonestWithoutEvictingSoonerReads) {
  WorkingSet set(2, Policy::kBelady);
  set.Plan(0, {{5, 1}, {6, 1}, {5, 1}, {7, 1}});
  set.Plan(1, {{8, 1}});
  // Soonest: 5 and 8 (next read), the lower id first.
  ASSERT_EQ(set.NextToLoad(), 5u);
  ASSERT_TRUE(set.Load(5).ok());
  ASSERT_EQ(set.NextToLoad(), 8u);
  ASSERT_TRUE(set.Load(8).ok());
  // 6 (1 read ahead) would evict 5 or 8, both read sooner: nothing to do.
  EXPECT_EQ(set.NextToLoad(), std::nullopt);
  EXPECT_TRUE(set.Read(1).ValueOrDie());  // 8: a hit, and read by nobody again
  EXPECT_EQ(set.NextToLoad(), 6u);        // so it makes room for 6
  ASSERT_TRUE(set.Load(6).ok());
  EXPECT_FALSE(set.Resident(8));
  EXPECT_TRUE(set.Read(0).ValueOrDie());
  EXPECT_TRUE(set.Read(0).ValueOrDie());
  // A stream that ends no longer holds units in the set.
  set.End(0);
  EXPECT_EQ(set.NextToLoad(), std::nullopt);
  WorkingSet lru(2, Policy::kLru);
  lru.Plan(0, {{1, 1}});
  EXPECT_EQ(lru.NextToLoad(), std::nullopt);  // LRU knows no future
}

// The units (`unit_rows` rows each) a consumer's epochs read, batch by batch:
// per batch, the units its rows lie in, in order of first use.
std::vector<std::vector<uint64_t>> EpochUnits(ShuffleMode mode, uint64_t seed, int epochs,
                                              uint64_t num_rows, uint64_t unit_rows) {
  std::vector<std::vector<uint64_t>> batches;
  for (int e = 0; e < epochs; ++e) {
    PlanParams p;
    p.order = {num_rows, seed, static_cast<uint64_t>(e), mode};
    ResolveDefaults(&p.order);
    p.batch_size = 1024;
    const EpochShape shape = Shape(p).ValueOrDie();
    for (uint64_t b = 0; b < shape.worker_batches; ++b) {
      std::vector<uint64_t> units;
      std::set<uint64_t> seen;
      for (uint64_t row : BatchRows(p, b).ValueOrDie()) {
        if (seen.insert(row / unit_rows).second) units.push_back(row / unit_rows);
      }
      batches.push_back(std::move(units));
    }
  }
  return batches;
}

// Hit ratio of two jobs' streams reading their batches in turn (one batch
// each), each telling the set `horizon` reads ahead (0: everything).
double HitRatio(const std::vector<std::vector<std::vector<uint64_t>>>& jobs, int64_t capacity,
                Policy policy, size_t horizon) {
  WorkingSet set(capacity, policy);
  std::vector<std::vector<uint64_t>> flat(jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j) {
    for (const auto& batch : jobs[j]) flat[j].insert(flat[j].end(), batch.begin(), batch.end());
  }
  std::vector<size_t> told(jobs.size(), 0);
  auto tell = [&](size_t j, size_t upto) {
    for (; told[j] < std::min(upto, flat[j].size()); ++told[j]) {
      set.Extend(static_cast<uint32_t>(j), flat[j][told[j]], 1);
    }
  };
  for (size_t j = 0; j < jobs.size(); ++j) tell(j, horizon == 0 ? flat[j].size() : horizon);
  std::vector<size_t> read(jobs.size(), 0);
  uint64_t hits = 0, reads = 0;
  for (size_t b = 0;; ++b) {
    bool any = false;
    for (size_t j = 0; j < jobs.size(); ++j) {
      if (b >= jobs[j].size()) continue;
      any = true;
      for (size_t k = 0; k < jobs[j][b].size(); ++k) {
        if (horizon != 0) tell(j, read[j] + horizon);
        auto hit = set.Read(static_cast<uint32_t>(j));
        EXPECT_TRUE(hit.ok()) << hit.status();
        hits += *hit;
        ++reads;
        ++read[j];
      }
    }
    if (!any) break;
  }
  return static_cast<double>(hits) / static_cast<double>(reads);
}

TEST(WorkingSet, BeladyBeatsLruOnTwoJobsEpochs) {
  // Two jobs (seeds 1 and 2), 3 epochs each, batch 1024, over 2^18 rows in
  // units of 2048 rows (128 units), with room for a quarter of them.
  constexpr uint64_t kRows = uint64_t{1} << 18;
  constexpr uint64_t kUnitRows = 2048;
  constexpr int64_t kCapacity = 32;
  for (ShuffleMode mode :
       {ShuffleMode::kNone, ShuffleMode::kBlock, ShuffleMode::kWindow, ShuffleMode::kSample}) {
    const std::vector<std::vector<std::vector<uint64_t>>> jobs = {
        EpochUnits(mode, 1, 3, kRows, kUnitRows), EpochUnits(mode, 2, 3, kRows, kUnitRows)};
    const double belady = HitRatio(jobs, kCapacity, Policy::kBelady, 0);
    const double lru = HitRatio(jobs, kCapacity, Policy::kLru, 0);
    const double near = HitRatio(jobs, kCapacity, Policy::kBelady, 256);
    std::printf(
        "working set, %s: hit ratio Belady %.3f (knowing 256 reads ahead: %.3f), "
        "LRU %.3f\n",
        std::string(ShuffleModeName(mode)).c_str(), belady, near, lru);
    EXPECT_GE(belady, lru) << ShuffleModeName(mode);
    EXPECT_GE(belady, near) << ShuffleModeName(mode);
    EXPECT_GT(belady, 0.2) << ShuffleModeName(mode);  // a quarter of the units fit
  }
}

}  // namespace
}  // namespace icefloe
