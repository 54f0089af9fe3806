#include <gtest/gtest.h>

#include "icefloe/iceberg/manifest.h"

namespace icefloe::iceberg {
namespace {

ManifestCache::Entries Of(size_t n) {
  return std::make_shared<const std::vector<ManifestEntry>>(n);
}

TEST(ManifestCacheTest, KeepsTheMostRecentlyUsedWithinItsBound) {
  ManifestCache cache(10);
  EXPECT_EQ(cache.Find("a"), nullptr);
  cache.Put("a", Of(4));
  cache.Put("b", Of(4));
  ASSERT_NE(cache.Find("a"), nullptr);  // "a" is now the most recent
  cache.Put("c", Of(4));                // 12 > 10: "b", the least recent, goes
  EXPECT_EQ(cache.Find("b"), nullptr);
  EXPECT_EQ(cache.Find("a")->size(), 4u);
  EXPECT_EQ(cache.Find("c")->size(), 4u);
  EXPECT_EQ(cache.held_entries(), 8u);
  cache.Put("huge", Of(11));  // larger than the bound: not kept, nothing evicted
  EXPECT_EQ(cache.Find("huge"), nullptr);
  EXPECT_EQ(cache.held_entries(), 8u);
}

}  // namespace
}  // namespace icefloe::iceberg
