#include "icefloe/transform/chat.h"

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "icefloe/transform/test_util.h"
#include "icefloe/transform/transform.h"

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

// llama3 + instruction columns: torchtune's Llama3Tokenizer.tokenize_messages
// of AlpacaToMessages' two messages: BOS, no system header, each message in
// its role header with its content stripped, <|end_of_text|> after; the
// assistant message trained whole (header, content, <|eot_id|>), BOS and
// EOS never.
TEST(ChatTest, Llama3InstructionRowsAreTorchtunesLayout) {
  Rendered with = RenderLlama3Instruction("Add.", "1 2", " 3\n", false);
  EXPECT_EQ(with.text,
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n"
            "Below is an instruction that describes a task, paired with an input that provides "
            "further context. Write a response that appropriately completes the request.\n\n"
            "### Instruction:\nAdd.\n\n### Input:\n1 2\n\n### Response:<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n3<|eot_id|><|end_of_text|>");
  EXPECT_EQ(
      TrainedTexts(with),
      std::vector<std::string>{"<|start_header_id|>assistant<|end_header_id|>\n\n3<|eot_id|>"});
  Rendered all = RenderLlama3Instruction("Hi.", "", "", true);
  EXPECT_EQ(all.text,
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n"
            "Below is an instruction that describes a task. Write a response that appropriately "
            "completes the request.\n\n### Instruction:\nHi.\n\n### Response:<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n<|eot_id|><|end_of_text|>");
  // train_on all (torchtune's train_on_input=True): both messages, not BOS or EOS.
  const std::string_view text = all.text;
  EXPECT_EQ(TrainedTexts(all),
            std::vector<std::string>{std::string(text.substr(17, text.size() - 17 - 15))});
}

// A chat column through Transform: a WordPiece tokenizer.json with chatml's
// markers as added tokens, lower-cased words split at spaces and punctuation.
const char* const kChatmlTokenizer = R"j({"version": "1.0", "added_tokens": [
    {"id": 17, "content": "<|im_start|>", "single_word": false, "lstrip": false,
     "rstrip": false, "normalized": false, "special": true},
    {"id": 18, "content": "<|im_end|>", "single_word": false, "lstrip": false, "rstrip": false,
     "normalized": false, "special": true}],
  "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                 "strip_accents": null, "lowercase": true},
  "pre_tokenizer": {"type": "BertPreTokenizer"},
  "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 100,
            "vocab": {"[UNK]": 0, "system": 1, "user": 2, "assistant": 3, "hi": 4, "ok": 5,
                      "you": 6, "are": 7, "qwen": 8, ",": 9, "created": 10, "by": 11,
                      "alibaba": 12, "cloud": 13, ".": 14, "a": 15, "helpful": 16}}})j";

std::shared_ptr<arrow::RecordBatch> Conversations(bool large) {
  auto str = large ? arrow::large_utf8() : arrow::utf8();
  auto turn = arrow::struct_({arrow::field("role", str), arrow::field("content", str)});
  auto list = large ? arrow::large_list(turn) : arrow::list(turn);
  auto schema = arrow::schema({arrow::field("id", arrow::int64()), arrow::field("m", list)});
  return arrow::RecordBatch::Make(
      schema, 4, {ArrayFromJSON(arrow::int64(), "[1, 2, 3, 4]"), ArrayFromJSON(list, R"j([
           [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}],
           null,
           [{"role": "user", "content": "hi"}],
           [{"role": "system", "content": "hi"}, {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "ok ok"}]])j")});
}

std::vector<int32_t> Row(const arrow::Array& a, int64_t i) {
  const auto& list = static_cast<const arrow::ListArray&>(a);
  auto values = std::static_pointer_cast<arrow::Int32Array>(list.values());
  return {values->raw_values() + list.value_offset(i),
          values->raw_values() + list.value_offset(i) + list.value_length(i)};
}

TEST(ChatTest, ATransformKeepsTheRowsItRendersAndCountsTheOthers) {
  for (bool large : {false, true}) {
    auto spec = TransformSpec::FromJson(nlohmann::json::parse(R"j({"keep": ["id"], "columns": [
        {"name": "ids", "chat": {"template": "chatml", "messages": "m",
                                 "model": "tokenizer.json"}}]})j"));
    ASSERT_OK(spec.status());
    auto read = [](const std::string&) -> arrow::Result<std::string> { return kChatmlTokenizer; };
    ASSERT_OK_AND_ASSIGN(auto t, Transform::Make(*spec, Conversations(large)->schema(), read));
    EXPECT_EQ(t->model_kind(), std::vector<std::string>{"tokenizer.json WordPiece"});
    auto stream = t->Stream(1024, arrow::default_memory_pool());
    std::vector<std::shared_ptr<arrow::RecordBatch>> out;
    ASSERT_OK(stream->Add(*Conversations(large), &out));
    ASSERT_OK(stream->Finish(&out));
    EXPECT_EQ(stream->rows_dropped(), 2);  // the null conversation, the one ending with the user
    ASSERT_EQ(out.size(), 1u);
    const auto& b = *out[0];
    EXPECT_EQ(b.schema()->ToString(),
              "id: int64\nids: list<item: int32>\nlabels: list<item: int32>");
    ASSERT_ARRAYS_EQUAL(*ArrayFromJSON(arrow::int64(), "[1, 4]"), *b.column(0));
    // Qwen's default system prompt (no ids for the newlines), the user turn, then
    // "\n" + "ok" + "<|im_end|>" + "\n" trained: its ids "ok" and <|im_end|>.
    const std::vector<int32_t> system = {17, 1,  6, 7, 8,  9,  10, 11, 12,
                                         13, 14, 6, 7, 15, 16, 3,  14, 18};
    std::vector<int32_t> ids = system;
    for (int32_t id : {17, 2, 4, 18, 17, 3, 5, 18}) ids.push_back(id);
    EXPECT_EQ(Row(*b.column(1), 0), ids);
    std::vector<int32_t> labels(ids.size(), kIgnoreLabel);
    labels[ids.size() - 2] = 5;
    labels[ids.size() - 1] = 18;
    EXPECT_EQ(Row(*b.column(2), 0), labels);
    const std::vector<int32_t> last = Row(*b.column(2), 1);
    EXPECT_EQ(std::vector<int32_t>(last.end() - 3, last.end()), (std::vector<int32_t>{5, 5, 18}));
  }
}

TEST(ChatTest, AnUnknownRoleFailsNamingTheColumnAndRow) {
  auto spec = TransformSpec::FromJson(nlohmann::json::parse(R"j({"columns": [
      {"name": "ids", "chat": {"template": "chatml", "messages": "m", "model": "t.json"}}]})j"));
  ASSERT_OK(spec.status());
  auto read = [](const std::string&) -> arrow::Result<std::string> { return kChatmlTokenizer; };
  auto batch = Conversations(false);
  auto turn =
      arrow::struct_({arrow::field("role", arrow::utf8()), arrow::field("content", arrow::utf8())});
  auto bad = arrow::RecordBatch::Make(
      batch->schema(), 2,
      {ArrayFromJSON(arrow::int64(), "[1, 2]"),
       ArrayFromJSON(arrow::list(turn), R"j([[{"role": "user", "content": "hi"}],
                                             [{"role": "gpt", "content": "hi"}]])j")});
  ASSERT_OK_AND_ASSIGN(auto t, Transform::Make(*spec, batch->schema(), read));
  auto out = t->ApplyTask({bad}, 1024, arrow::default_memory_pool());
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("'messages' column 'm' row 1: message 0 has role 'gpt'"),
            std::string::npos)
      << out.status().ToString();
}

}  // namespace
}  // namespace icefloe::transform
