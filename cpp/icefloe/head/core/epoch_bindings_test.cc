#include "icefloe/head/core/epoch_bindings.h"

#include <set>

#include <gtest/gtest.h>

namespace icefloe {
namespace {

TEST(EpochBindingsTest, AnEpochKeepsTheGenerationItStartedOn) {
  EpochBindings b;
  std::set<uint64_t> held = {5};
  auto is_held = [&held](uint64_t g) { return held.count(g) > 0; };
  const std::string e3 = EpochBindings::Key("d", 0, 3, 8);
  EXPECT_EQ(b.Bind(e3, 5, is_held), 5u);  // rank 0 starts epoch 3
  held.insert(6);                         // a refresh publishes 6; 5 is kept
  EXPECT_EQ(b.Bind(e3, 6, is_held), 5u);  // rank 1 of epoch 3: the same copy
  EXPECT_EQ(b.Bind(EpochBindings::Key("d", 0, 4, 8), 6, is_held), 6u);  // the next epoch
  EXPECT_EQ(b.Bind(EpochBindings::Key("d", 0, 3, 4), 6, is_held), 6u);  // another job
  held.erase(5);                                                        // freed: epoch 3 binds anew
  EXPECT_EQ(b.Bind(e3, 6, is_held), 6u);
}

TEST(EpochBindingsTest, BoundedTheOldestGoFirst) {
  EpochBindings b(2);
  auto all = [](uint64_t) { return true; };
  EXPECT_EQ(b.Bind("a", 1, all), 1u);
  EXPECT_EQ(b.Bind("b", 1, all), 1u);
  EXPECT_EQ(b.Bind("c", 2, all), 2u);
  EXPECT_EQ(b.size(), 2u);
  EXPECT_EQ(b.Bind("a", 2, all), 2u);  // "a" was dropped: bound anew
  EXPECT_EQ(b.Bind("c", 3, all), 2u);
}

}  // namespace
}  // namespace icefloe
