#include "icefloe/transform/chat.h"

#include <gtest/gtest.h>

namespace icefloe::transform {
namespace {

// Expected texts: transformers' render_jinja_template with each model's real
// template (llama.cpp's models/templates copies; tests/test_chat.py compares
// tokens and labels on tables with the same templates).
const std::vector<Turn> kMultiTurn = {{Role::kSystem, " Be brief. "},
                                      {Role::kUser, "Hi"},
                                      {Role::kAssistant, "Hello!\n"},
                                      {Role::kUser, "Bye"},
                                      {Role::kAssistant, ""}};
const std::vector<Turn> kNoSystem = {{Role::kUser, "café 東京"}, {Role::kAssistant, " ok "}};
const std::vector<Turn> kEndsWithUser = {{Role::kSystem, "S"}, {Role::kUser, "Q"}};

Rendered MustRender(const char* name, const std::vector<Turn>& turns, bool all = false) {
  const ChatTemplate* t = FindChatTemplate(name);
  EXPECT_NE(t, nullptr) << name;
  auto r = Render(*t, turns, all);
  EXPECT_TRUE(std::holds_alternative<Rendered>(r))
      << name << ": " << std::get<RenderRefusal>(r).reason;
  return std::get<Rendered>(r);
}

std::vector<std::string> TrainedTexts(const Rendered& r) {
  std::vector<std::string> out;
  for (auto [b, e] : r.trained) out.push_back(r.text.substr(b, e - b));
  return out;
}

std::string Refusal(const char* name, const std::vector<Turn>& turns, bool all = false) {
  auto r = Render(*FindChatTemplate(name), turns, all);
  if (!std::holds_alternative<RenderRefusal>(r)) return "(rendered)";
  return std::get<RenderRefusal>(r).reason;
}

TEST(ChatTest, ChatmlIsQwen25) {
  Rendered r = MustRender("chatml", kMultiTurn);
  EXPECT_EQ(r.text,
            "<|im_start|>system\n Be brief. <|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!\n<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
            "<|im_start|>assistant\n<|im_end|>\n");
  // As TRL's Qwen2.5 training template: "\n" + content + "<|im_end|>\n".
  EXPECT_EQ(TrainedTexts(r),
            (std::vector<std::string>{"\nHello!\n<|im_end|>\n", "\n<|im_end|>\n"}));
  EXPECT_EQ(MustRender("chatml", kNoSystem).text,
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
            "assistant.<|im_end|>\n<|im_start|>user\ncafé 東京<|im_end|>\n<|im_start|>assistant\n"
            " ok <|im_end|>\n");
  EXPECT_EQ(MustRender("chatml", kEndsWithUser, true).text,
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n");
}

TEST(ChatTest, Llama3IsLlama31) {
  Rendered r = MustRender("llama3", kMultiTurn);
  EXPECT_EQ(r.text,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge "
            "Date: December 2023\nToday Date: 26 Jul 2024\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>"
            "assistant<|end_header_id|>\n\nHello!<|eot_id|><|start_header_id|>user<|end_header_id|>"
            "\n\nBye<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n<|eot_id|>");
  EXPECT_EQ(TrainedTexts(r), (std::vector<std::string>{"Hello!<|eot_id|>", "<|eot_id|>"}));
  EXPECT_EQ(MustRender("llama3", kNoSystem).text,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge "
            "Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user"
            "<|end_header_id|>\n\ncafé 東京<|eot_id|><|start_header_id|>assistant"
            "<|end_header_id|>\n\nok<|eot_id|>");
}

TEST(ChatTest, Llama3TrimsAsPythonStrip) {
  // U+3000 and U+00A0 are Python whitespace; U+200B (zero width space) is not.
  Rendered r =
      MustRender("llama3", {{Role::kUser, "\u3000\u00a0q\t"}, {Role::kAssistant, "\u200b a \n"}});
  EXPECT_NE(r.text.find("\n\nq<|eot_id|>"), std::string::npos) << r.text;
  EXPECT_EQ(TrainedTexts(r), (std::vector<std::string>{"\u200b a<|eot_id|>"}));
}

TEST(ChatTest, MistralIsNemo) {
  Rendered r = MustRender("mistral", {kMultiTurn.begin() + 1, kMultiTurn.end()});
  EXPECT_EQ(r.text, "<s>[INST]Hi[/INST]Hello!\n</s>[INST]Bye[/INST]</s>");
  EXPECT_EQ(TrainedTexts(r), (std::vector<std::string>{"Hello!\n</s>", "</s>"}));
  EXPECT_EQ(MustRender("mistral", kNoSystem).text, "<s>[INST]café 東京[/INST] ok </s>");
  EXPECT_EQ(MustRender("mistral", kEndsWithUser, true).text, "<s>[INST]S\n\nQ[/INST]");
  // Nemo's template leaves a system prompt out unless the last message is
  // the user's: refused rather than lost.
  EXPECT_NE(Refusal("mistral", kMultiTurn).find("system"), std::string::npos);
  EXPECT_NE(Refusal("mistral", {{Role::kAssistant, "a"}}).find("alternate"), std::string::npos);
  EXPECT_NE(Refusal("mistral", {{Role::kUser, "a"}, {Role::kUser, "b"}}, true).find("alternate"),
            std::string::npos);
}

TEST(ChatTest, TrainOnAllTrainsTheWholeText) {
  Rendered r = MustRender("chatml", kNoSystem, true);
  EXPECT_EQ(TrainedTexts(r), std::vector<std::string>{r.text});
}

TEST(ChatTest, RefusesWhatTheTemplateCannotRender) {
  EXPECT_EQ(Refusal("chatml", {}), "an empty conversation");
  EXPECT_NE(Refusal("chatml", {{Role::kSystem, "s"}}, true).find("no user or assistant"),
            std::string::npos);
  EXPECT_NE(Refusal("llama3", kEndsWithUser).find("last message"), std::string::npos);
  EXPECT_NE(Refusal("mistral", {{Role::kUser, "q"}, {Role::kSystem, "s"}}, true).find("system"),
            std::string::npos);
  // chatml and llama3 render a later system message as a turn, as their templates do.
  EXPECT_EQ(
      MustRender("chatml", {{Role::kUser, "q"}, {Role::kSystem, "s"}, {Role::kAssistant, "a"}})
          .text,
      "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
      "assistant.<|im_end|>\n<|im_start|>user\nq<|im_end|>\n<|im_start|>system\ns<|im_end|>"
      "\n<|im_start|>assistant\na<|im_end|>\n");
}

TEST(ChatTest, AlpacaIsTorchtunesPrompt) {
  Rendered with = RenderAlpaca("<B>", "<E>", "Add.", "1 2", "3", false);
  EXPECT_EQ(with.text,
            "<B>Below is an instruction that describes a task, paired with an input that provides "
            "further context. Write a response that appropriately completes the request.\n\n"
            "### Instruction:\nAdd.\n\n### Input:\n1 2\n\n### Response:\n3<E>");
  EXPECT_EQ(TrainedTexts(with), std::vector<std::string>{"3<E>"});
  Rendered without = RenderAlpaca("", "<E>", "Hi.", "", "Hello", true);
  EXPECT_EQ(without.text,
            "Below is an instruction that describes a task. Write a response that appropriately "
            "completes the request.\n\n### Instruction:\nHi.\n\n### Response:\nHello<E>");
  EXPECT_EQ(TrainedTexts(without), std::vector<std::string>{without.text});
}

}  // namespace
}  // namespace icefloe::transform
