#include "icefloe/transform/token_table.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace icefloe::transform::hf {
namespace {

// `n` words whose hashes pick the same cache set as `first`'s.
std::vector<std::string> WordsOfOneSet(const std::string& first, size_t n) {
  const uint64_t set = HashBytes(first) & (WordCache::kSets - 1);
  std::vector<std::string> words = {first};
  for (int i = 0; words.size() < n; ++i) {
    std::string w = "w" + std::to_string(i);
    if ((HashBytes(w) & (WordCache::kSets - 1)) == set && w != first) words.push_back(w);
  }
  return words;
}

// Two frequent words whose hashes share a set both stay cached (a
// direct-mapped cache would drop the first each time the second is put); a
// third put in that set drops the one put first.
TEST(WordCacheTest, TwoWordsOfOneSetStayCachedAndAThirdDropsTheOldest) {
  WordCache& cache = WordCache::For(WordCache::NextOwner());
  const std::vector<std::string> words = WordsOfOneSet("the", 3);
  const int32_t ids[] = {10, 11, 12};
  auto put = [&](int k) { cache.Put(words[k], HashBytes(words[k]), &ids[k], 1); };
  auto find = [&](int k) {
    std::vector<int32_t> got;
    return cache.Find(words[k], HashBytes(words[k]), &got) ? got : std::vector<int32_t>{};
  };
  put(0);
  put(1);
  EXPECT_EQ(find(0), std::vector<int32_t>{10});
  EXPECT_EQ(find(1), std::vector<int32_t>{11});
  EXPECT_EQ(find(2), std::vector<int32_t>{});
  put(2);
  EXPECT_EQ(find(0), std::vector<int32_t>{});
  EXPECT_EQ(find(1), std::vector<int32_t>{11});
  EXPECT_EQ(find(2), std::vector<int32_t>{12});
}

// Another model's owner clears the thread's table.
TEST(WordCacheTest, AnotherOwnerFindsNothingOfTheFirstOwners) {
  const uint64_t first = WordCache::NextOwner();
  const int32_t id = 7;
  WordCache::For(first).Put("film", HashBytes("film"), &id, 1);
  std::vector<int32_t> got;
  EXPECT_TRUE(WordCache::For(first).Find("film", HashBytes("film"), &got));
  EXPECT_FALSE(WordCache::For(WordCache::NextOwner()).Find("film", HashBytes("film"), &got));
  EXPECT_EQ(got, std::vector<int32_t>{7});
}

}  // namespace
}  // namespace icefloe::transform::hf
