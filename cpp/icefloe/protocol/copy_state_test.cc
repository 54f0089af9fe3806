// CopyState: every state maps to its wire string and back; an unknown string
// is Invalid naming the field.
#include "icefloe/protocol/copy_state.h"

#include <string>

#include <gtest/gtest.h>

namespace icefloe {
namespace {

TEST(CopyStateTest, WireStringsRoundTrip) {
  const std::pair<CopyState, std::string> states[] = {
      {CopyState::kLoading, "loading"},   {CopyState::kReady, "ready"},
      {CopyState::kDegraded, "degraded"}, {CopyState::kHealing, "healing"},
      {CopyState::kFailed, "failed"},
  };
  for (const auto& [state, name] : states) {
    EXPECT_EQ(CopyStateName(state), name);
    auto parsed = ParseCopyState(name, "dataset 'state'");
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(*parsed, state);
  }
}

TEST(CopyStateTest, UnknownStringNamesTheField) {
  for (const char* bad : {"", "Ready", "staged", "ready "}) {
    auto parsed = ParseCopyState(bad, "dataset 'state'");
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_TRUE(parsed.status().IsInvalid());
    const std::string message = parsed.status().message();
    EXPECT_NE(message.find("dataset 'state'"), std::string::npos) << message;
    EXPECT_NE(message.find("loading, ready, degraded, healing, failed"), std::string::npos)
        << message;
  }
}

TEST(CopyStateTest, LoadedStates) {
  EXPECT_FALSE(Loaded(CopyState::kLoading));
  EXPECT_TRUE(Loaded(CopyState::kReady));
  EXPECT_TRUE(Loaded(CopyState::kDegraded));
  EXPECT_TRUE(Loaded(CopyState::kHealing));
  EXPECT_FALSE(Loaded(CopyState::kFailed));
}

}  // namespace
}  // namespace icefloe
