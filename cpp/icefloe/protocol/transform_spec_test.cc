// TransformSpec as a typed value: parsed once where its message is decoded,
// and back on the wire (node.load, describe, copy keys in catalog records)
// as the very JSON text heads wrote before the spec was typed.
#include "icefloe/protocol/transform_spec.h"

#include <gtest/gtest.h>

#include "icefloe/protocol/actions.h"
#include "icefloe/protocol/messages.h"
#include "icefloe/protocol/replies.h"

namespace icefloe {
namespace {

using json = nlohmann::json;

// Specs as the Python tests give them (tests/test_transforms.py,
// test_tokenize_pad.py, test_hf_tokenizer.py, test_cli.py), defaults spelled
// out or not.
const char* const kGivenSpecs[] = {
    R"({"keep": ["review_id"], "columns": [{"name": "label", "expr": "stars - 1"}]})",
    R"({"keep": ["review_id"], "columns": [
          {"name": "label", "expr": "stars - 1"},
          {"name": "input_ids", "tokenize": {"column": "text", "model": "/m/bpe.model",
                                             "bos": true, "eos": true}},
          {"name": "short", "tokenize": {"column": "text", "model": "/m/bpe.model",
                                         "eos": true, "max_tokens": 8}}]})",
    R"({"keep": ["id"], "columns": [
          {"name": "ids0", "tokenize": {"column": "text", "model": "/m/tokenizer.json",
                                        "special_tokens": true, "max_tokens": 5, "pad_to": 9}},
          {"name": "ids1", "tokenize": {"column": "text", "model": "/m/tokenizer.json",
                                        "special_tokens": false, "max_tokens": 24,
                                        "pad_to": 24, "pad_id": 3, "mask": "mask1"}}]})",
    R"({"columns": [{"name": "input_ids", "tokenize": {"column": "text", "model": "/m/u.model"}}],
        "pack": {"column": "input_ids", "seq_len": 16, "eos": 2, "tail": "pad", "pad": 0,
                 "position_ids": true}})",
    R"({"columns": [{"name": "ids", "tokenize": {"column": "text", "model": "/m/u.model",
                                                 "bos": false}}],
        "pack": {"column": "ids", "seq_len": 8, "tail": "drop"}})",
    R"({"keep": ["a"], "columns": [], "unknown": {"x": 1}})",
    R"({"keep": ["id"], "columns": [
          {"name": "input_ids", "chat": {"template": "llama3", "messages": "messages",
                                         "model": "/m/tokenizer.json", "train_on": "assistant"}},
          {"name": "a_ids", "chat": {"template": "alpaca", "instruction": "i", "input": "x",
                                     "output": "o", "model": "/m/tokenizer.json",
                                     "labels": "a_labels", "max_tokens": 64,
                                     "eos": "<|end_of_text|>"}}]})",
};

TransformSpec Parsed(const char* text) {
  auto spec = TransformSpec::FromJson(json::parse(text));
  EXPECT_TRUE(spec.ok()) << text << ": " << spec.status().ToString();
  return spec.ok() ? *spec : TransformSpec();
}

// A spec read from JSON goes back as that JSON, byte for byte: what heads
// before typed specs wrote into node.load, describe and copy keys.
TEST(TransformSpecTest, ASpecReadGoesBackAsGiven) {
  for (const char* text : kGivenSpecs) {
    const json given = json::parse(text);
    const TransformSpec spec = Parsed(text);
    EXPECT_EQ(Dump(spec.ToJson()), Dump(given)) << text;
    auto back = TransformSpec::FromJson(spec.ToJson());
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, spec) << text;
  }
}

// A spec built in code is its canonical JSON: the optional fields at their
// defaults left out, the text a client that leaves them out sends.
TEST(TransformSpecTest, ASpecBuiltInCodeIsCanonical) {
  TransformSpec spec;
  spec.keep = {"review_id"};
  TransformColumn label;
  label.name = "label";
  label.expr = "stars - 1";
  TransformColumn ids;
  ids.name = "input_ids";
  ids.tokenize.emplace();
  ids.tokenize->column = "text";
  ids.tokenize->model = "/m/bpe.model";
  ids.tokenize->bos = true;
  ids.tokenize->max_tokens = 8;
  spec.columns = {label, ids};
  EXPECT_EQ(Dump(spec.ToJson()), Dump(json::parse(R"({"keep": ["review_id"], "columns": [
                 {"name": "label", "expr": "stars - 1"},
                 {"name": "input_ids", "tokenize": {"column": "text", "model": "/m/bpe.model",
                                                    "bos": true, "max_tokens": 8}}]})")));
  auto back = TransformSpec::FromJson(spec.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, spec);
  EXPECT_EQ(back->columns, spec.columns);
  EXPECT_EQ(back->keep, spec.keep);

  TransformSpec packed;
  TransformColumn tok;
  tok.name = "ids";
  tok.tokenize.emplace();
  tok.tokenize->column = "text";
  tok.tokenize->model = "/m/u.model";
  tok.tokenize->special_tokens = false;
  packed.columns = {tok};
  packed.pack.emplace();
  packed.pack->column = "ids";
  packed.pack->seq_len = 8;
  packed.pack->tail = "pad";
  EXPECT_EQ(Dump(packed.ToJson()), Dump(json::parse(R"({"columns": [{"name": "ids", "tokenize":
                 {"column": "text", "model": "/m/u.model", "special_tokens": false}}],
                 "pack": {"column": "ids", "seq_len": 8, "tail": "pad"}})")));
  back = TransformSpec::FromJson(packed.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, packed);
  EXPECT_EQ(back->pack, packed.pack);
}

// A chat column: typed fields, its labels column after it, its model among
// the model locations; the source fields checked against the template.
TEST(TransformSpecTest, AChatColumnIsTypedAndChecked) {
  const TransformSpec spec = Parsed(kGivenSpecs[std::size(kGivenSpecs) - 1]);
  ASSERT_EQ(spec.columns.size(), 2u);
  const ChatSpec& alpaca = *spec.columns[1].chat;
  EXPECT_EQ(alpaca.template_name, "alpaca");
  EXPECT_EQ(alpaca.max_tokens, 64);
  EXPECT_EQ(alpaca.train_on, "assistant");
  EXPECT_EQ(spec.OutputNames(),
            (std::vector<std::string>{"id", "input_ids", "labels", "a_ids", "a_labels"}));
  EXPECT_EQ(spec.ModelLocations(),
            (std::vector<std::string>{"/m/tokenizer.json", "/m/tokenizer.json"}));
  const std::pair<const char*, const char*> bad[] = {
      {R"({"template": "chatml", "messages": "m", "model": "x", "train_on": "user"})",
       "'train_on'"},
      {R"({"template": "alpaca", "instruction": "i", "output": "o", "model": "x"})",
       "'alpaca' needs 'eos'"},
      {R"({"template": "llama3", "model": "x"})", "needs 'messages'"},
      {R"({"template": "mistral", "messages": "m", "output": "o", "model": "x"})",
       "either 'messages' or instruction columns"},
      {R"({"template": "mistral", "instruction": "i", "output": "o", "model": "x"})",
       "rendered by 'alpaca' and 'llama3'"},
      {R"({"template": "llama3", "instruction": "i", "model": "x"})", "'llama3' needs 'output'"},
      {R"({"template": "llama3", "instruction": "i", "output": "o", "model": "x", "eos": "e"})",
       "'eos' is for 'alpaca'"},
      {R"({"template": "chatml", "messages": "m", "model": "x", "bos": "<s>"})",
       "'bos' is for 'alpaca'"},
  };
  for (const auto& [chat, message] : bad) {
    auto parsed = TransformSpec::FromJson(
        json::parse(std::string(R"({"columns": [{"name": "ids", "chat": )") + chat + "}]}"));
    ASSERT_FALSE(parsed.ok()) << chat;
    EXPECT_NE(parsed.status().message().find(message), std::string::npos)
        << parsed.status().ToString();
    EXPECT_NE(parsed.status().message().find("'columns'[0].chat"), std::string::npos)
        << parsed.status().ToString();
  }
  auto both = TransformSpec::FromJson(json::parse(
      R"({"columns": [{"name": "ids", "expr": "a", "chat": {"template": "llama3",
          "messages": "m", "model": "x"}}]})"));
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("exactly one of 'expr', 'tokenize' and 'chat'"),
            std::string::npos);
}

// A spec read and then changed says its members, not the text it was read from.
// A misspelt option ("pad_too") would silently make another copy than the
// one asked for: a load refuses it, naming where it is. Specs read back from
// catalog records and node.load stay readable with members they do not know.
TEST(TransformSpecTest, ALoadRefusesAFieldTheSpecDoesNotKnow) {
  const std::pair<const char*, const char*> kCases[] = {
      {R"({"keep": ["a"], "colums": []})",
       "transform: unknown field 'colums' (fields: keep, columns, pack)"},
      {R"({"columns": [{"name": "a", "expr": "b", "exp": "c"}]})",
       "transform: 'columns'[0]: unknown field 'exp' (fields: name, expr, tokenize, chat)"},
      {R"({"columns": [{"name": "ids", "tokenize": {"column": "t", "model": "m",
                                                     "max_tokens": 8, "pad_too": 8}}]})",
       "transform: 'columns'[0].tokenize: unknown field 'pad_too' (fields: column, model, bos, "
       "eos, special_tokens, max_tokens, pad_to, pad_id, mask)"},
      {R"({"columns": [{"name": "ids", "chat": {"template": "chatml", "messages": "m",
                                                "model": "t.json", "train": "all"}}]})",
       "transform: 'columns'[0].chat: unknown field 'train' (fields: template, "},
      {R"({"columns": [{"name": "ids", "tokenize": {"column": "t", "model": "m"}}],
           "pack": {"column": "ids", "seq_len": 8, "seq_length": 8}})",
       "transform: 'pack': unknown field 'seq_length' (fields: "},
  };
  for (const auto& [text, error] : kCases) {
    SCOPED_TRACE(text);
    auto spec = TransformSpec::FromJson(json::parse(text));
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    EXPECT_EQ(spec->ToJson(), json::parse(text));  // still read as given
    arrow::Status st = spec->CheckKnownFields();
    ASSERT_TRUE(st.IsInvalid()) << st.ToString();
    EXPECT_EQ(st.message().rfind(error, 0), 0u) << st.message();
    auto load = LoadRequest::Parse(R"({"name": "d", "source": "/t", "transform": )" +
                                   std::string(text) + "}");
    ASSERT_TRUE(load.status().IsInvalid()) << load.status().ToString();
    EXPECT_NE(load.status().message().find(error), std::string::npos) << load.status().message();
  }
  for (const char* text : kGivenSpecs) {
    if (std::string_view(text).find("unknown") != std::string_view::npos) continue;
    EXPECT_TRUE(TransformSpec::FromJson(json::parse(text))->CheckKnownFields().ok()) << text;
  }
}

TEST(TransformSpecTest, AChangedSpecIsWrittenFromItsMembers) {
  TransformSpec spec = Parsed(kGivenSpecs[0]);
  spec.keep = {"other"};
  EXPECT_EQ(spec.ToJson()["keep"], json::array({"other"}));
  EXPECT_EQ(spec.ToJson()["columns"][0]["expr"], "stars - 1");
}

// Specs compare as they go on the wire, as loads compared them before: a
// default spelled out is another spec (another copy), key order is not.
TEST(TransformSpecTest, SpecsCompareAsTheirJson) {
  EXPECT_EQ(Parsed(R"({"keep": ["a"], "columns": [{"name": "b", "expr": "a"}]})"),
            Parsed(R"({"columns": [{"expr": "a", "name": "b"}], "keep": ["a"]})"));
  EXPECT_NE(Parsed(R"({"keep": ["a"]})"), Parsed(R"({"keep": ["a"], "columns": []})"));
  EXPECT_NE(Parsed(R"({"keep": ["a"]})"), Parsed(R"({"keep": ["b"]})"));
}

// The messages that carry a spec parse it once, with the message, and send
// it on as given.
TEST(TransformSpecTest, MessagesCarryTheSpecTypedAndSendItAsGiven) {
  const json given = json::parse(kGivenSpecs[1]);
  json body = {{"v", 1}, {"name", "d"}, {"source", "/t"}, {"transform", given}};
  auto load = LoadRequest::Parse(Dump(body));
  ASSERT_TRUE(load.ok()) << load.status().ToString();
  ASSERT_TRUE(load->transform.has_value());
  EXPECT_EQ(load->transform->OutputNames(),
            (std::vector<std::string>{"review_id", "label", "input_ids", "short"}));
  EXPECT_EQ(Dump(load->ToJson()["transform"]), Dump(given));

  NodeLoadRequest node;
  node.dataset = "d";
  node.generation = 1;
  node.schema = {{"type", "struct"}, {"schema-id", 0}, {"fields", json::array()}};
  node.transform = load->transform;
  node.model_sha256 = {std::string(64, 'a'), std::string(64, 'b')};
  auto node_back = NodeLoadRequest::Parse(Dump(node.ToJson()));
  ASSERT_TRUE(node_back.ok()) << node_back.status().ToString();
  EXPECT_EQ(node_back->transform, load->transform);
  EXPECT_EQ(Dump(node_back->ToJson()["transform"]), Dump(given));
  // The hash count is checked against the parsed spec's models.
  node.model_sha256.pop_back();
  auto short_hashes = NodeLoadRequest::Parse(Dump(node.ToJson()));
  ASSERT_FALSE(short_hashes.ok());
  EXPECT_EQ(short_hashes.status().message(),
            "node.load: 'model_sha256' has 1 hashes for 2 tokenize models");

  // The errors are the spec's own (load) or name the reply (a description).
  body["transform"] = {{"keep", json::array()}};
  auto bad = LoadRequest::Parse(Dump(body));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "transform: no output column; name source columns in 'keep' or computed ones in "
            "'columns'");
  body["transform"] = json::array();
  bad = LoadRequest::Parse(Dump(body));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("load: 'transform' must be an object", 0), 0u)
      << bad.status().message();
  DatasetDescription d;
  d.name = "d";
  d.state = "ready";
  json description = d.ToJson();
  description["transform"] = {{"keep", json::array()}};
  auto bad_reply = DatasetDescription::Parse(Dump(description));
  ASSERT_FALSE(bad_reply.ok());
  EXPECT_EQ(bad_reply.status().message(),
            "dataset description 'transform': transform: no output column; name source columns "
            "in 'keep' or computed ones in 'columns'");
}

}  // namespace
}  // namespace icefloe
