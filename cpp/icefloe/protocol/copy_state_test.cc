// CopyState and LoadState: every state maps to its wire string and back; an
// unknown string is Invalid naming the field.
#include "icefloe/protocol/copy_state.h"
#include "icefloe/protocol/messages.h"

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
    auto parsed = CopyStateFromName(name, "dataset 'state'");
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(*parsed, state);
  }
}

TEST(CopyStateTest, UnknownStringNamesTheField) {
  for (const char* bad : {"", "Ready", "staged", "ready "}) {
    auto parsed = CopyStateFromName(bad, "dataset 'state'");
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

TEST(LoadStateTest, WireStringsRoundTrip) {
  const std::pair<LoadState, std::string> states[] = {
      {LoadState::kQueued, "queued"}, {LoadState::kLoading, "loading"},
      {LoadState::kStaged, "staged"}, {LoadState::kFailed, "failed"},
      {LoadState::kAbsent, "absent"},
  };
  for (const auto& [state, name] : states) {
    EXPECT_EQ(LoadStateName(state), name);
    auto parsed = LoadStateFromName(name, "node load state 'state'");
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(*parsed, state);
  }
  auto bad = LoadStateFromName("ready", "node load state 'state'");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.status().IsInvalid());
  EXPECT_NE(bad.status().message().find("node load state 'state'"), std::string::npos)
      << bad.status().ToString();
  EXPECT_NE(bad.status().message().find("queued, loading, staged, failed, absent"),
            std::string::npos)
      << bad.status().ToString();
}

// The node's reply: an unknown state is Invalid naming the message and field.
TEST(LoadStateTest, NodeLoadStateReplyNamesTheField) {
  NodeLoadState s;
  s.dataset = "d";
  s.generation = 3;
  s.state = LoadState::kStaged;
  nlohmann::json j = s.ToJson();
  EXPECT_EQ(j["state"], "staged");
  auto back = NodeLoadState::FromJson(j, "node.load_status reply");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->state, LoadState::kStaged);
  j["state"] = "ready";
  back = NodeLoadState::FromJson(j, "node.load_status reply");
  ASSERT_FALSE(back.ok());
  EXPECT_TRUE(back.status().IsInvalid());
  EXPECT_NE(back.status().message().find("'state'"), std::string::npos) << back.status().ToString();
  EXPECT_NE(back.status().message().find("node.load_status reply"), std::string::npos)
      << back.status().ToString();
  j.erase("state");
  EXPECT_FALSE(NodeLoadState::FromJson(j, "node.load_status reply").ok());
}

}  // namespace
}  // namespace icefloe
