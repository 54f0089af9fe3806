#include "icefloe/transform/sentencepiece_tokenizer.h"

#include <filesystem>
#include <fstream>
#include <random>
#include <tuple>

#include <arrow/api.h>
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include "icefloe/transform/test_util.h"

namespace icefloe::transform {

namespace {

namespace fs = std::filesystem;

// Each of `texts`' ids, as `tokenizer` encodes them as one string column.
arrow::Result<std::vector<std::vector<int>>> EncodeEach(const SentencePieceTokenizer& tokenizer,
                                                        const std::vector<std::string>& texts) {
  arrow::StringBuilder builder;
  ARROW_RETURN_NOT_OK(builder.AppendValues(texts));
  ARROW_ASSIGN_OR_RAISE(auto strings, builder.Finish());
  ARROW_ASSIGN_OR_RAISE(
      auto encoded, tokenizer.Encode(*strings, TokenizeOptions{}, arrow::default_memory_pool()));
  const auto& lists = static_cast<const arrow::ListArray&>(*encoded);
  const auto& values = static_cast<const arrow::Int32Array&>(*lists.values());
  std::vector<std::vector<int>> ids;
  for (int64_t i = 0; i < lists.length(); ++i) {
    ids.emplace_back(values.raw_values() + lists.value_offset(i),
                     values.raw_values() + lists.value_offset(i + 1));
  }
  return ids;
}

// Text that leans on the normalizer and the word split: runs of spaces,
// tabs and newlines, U+2581 typed by the user, characters the model never
// saw (alone and in runs), full-width and compatibility forms, combining
// marks, invalid UTF-8, words longer than the word cache holds.
std::vector<std::string> AdversarialTexts() {
  std::vector<std::string> texts = {
      "",
      " ",
      "   ",
      "great film",
      "  great   film  ",
      "\tgreat\n\nfilm\r\n",
      "\xE2\x96\x81great \xE2\x96\x81\xE2\x96\x81 film\xE2\x96\x81",
      "caf\xC3\xA9 cafe\xCC\x81",  // é precomposed and combining
      "\xEF\xBC\xA7\xEF\xBD\x92\xEF\xBD\x85\xEF\xBD\x81\xEF\xBD\x94",  // full-width "Great"
      "\xE2\x98\x83\xE2\x98\x83 snow\xE2\x98\x83man \xF0\x9F\x98\x80\xE2\x80\x8D\xF0\x9F\x94\xA5",
      "\xFF\xFE broken \xC3",
      "terribleterribleterribleterribleterribleplot lovedlovedlovedlovedloved",
      "\xEF\xAC\x81ne \xE2\x91\xA0 \xE3\x8E\x8F",  // ﬁ ligature, circled 1, ㎏
      "1234567890 3.14159 -42",
  };
  std::string long_text;  // past the by-word path's 64 KiB: the library's whole path
  while (long_text.size() <= 70 * 1024) long_text += "great  film caf\xC3\xA9\xE2\x98\x83 ";
  texts.push_back(long_text);
  texts.push_back(long_text.substr(0, 64 * 1024));  // just inside it
  std::mt19937 rng(20261127);                       // the seed, fixed
  const char* parts[] = {
      "great",        "film", " ",    "  ", "\n",           "caf\xC3\xA9", "\xE2\x96\x81",
      "\xE2\x98\x83", "the",  "plot", "\t", "\xEF\xBC\xA7", "loved",       "x"};
  for (int i = 0; i < 300; ++i) {
    std::string t;
    const int n = static_cast<int>(rng() % 12);
    for (int k = 0; k < n; ++k) t += parts[rng() % std::size(parts)];
    texts.push_back(std::move(t));
  }
  return texts;
}

// A BPE model trained on the test's own text with `flags` added.
std::string TrainBpe(const std::string& flags) {
  const fs::path dir =
      fs::temp_directory_path() / ("icefloe_spm_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    std::ofstream out(dir / "corpus.txt");
    const char* words[] = {"great",   "film",        "terrible", "plot",     "loved",
                           "the",     "caf\xC3\xA9", "films",    "greatest", "plotted",
                           "theatre", "12",          "3.5"};
    std::mt19937 rng(11);
    for (int line = 0; line < 400; ++line) {
      for (int w = 0; w < 10; ++w) out << words[rng() % std::size(words)] << (w % 3 ? " " : "  ");
      out << '\n';
    }
  }
  auto st = sentencepiece::SentencePieceTrainer::Train(
      "--input=" + (dir / "corpus.txt").string() + " --model_prefix=" + (dir / "spm").string() +
      " --vocab_size=400 --model_type=bpe --hard_vocab_limit=false --minloglevel=2 " + flags);
  EXPECT_TRUE(st.ok()) << flags << ": " << st.ToString();
  std::ifstream in(dir / "spm.model", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  fs::remove_all(dir);
  return bytes;
}

struct Model {
  std::string flags;
  bool by_word;  ///< whether the tokenizer takes it a word at a time
};

class SentencePieceIds : public ::testing::TestWithParam<Model> {};

// Every text's ids equal the library's own Encode on the same model, for
// models the by-word path takes (the defaults, byte fallback, kept
// whitespace, no dummy prefix, digits split) and models it leaves whole
// (user-defined symbols, pieces across whitespace, whitespace as suffix).
TEST_P(SentencePieceIds, EqualTheLibrarys) {
  const std::string flags = GetParam().flags;
  const std::string model = TrainBpe(flags);
  sentencepiece::SentencePieceProcessor library;
  ASSERT_TRUE(library.LoadFromSerializedProto(model).ok());
  ASSERT_OK_AND_ASSIGN(auto tokenizer, SentencePieceTokenizer::Load(model, "spm.model"));
  EXPECT_EQ(tokenizer->encodes_by_word(), GetParam().by_word) << flags;
  const auto texts = AdversarialTexts();
  // Twice: the second pass reads the thread's word cache.
  for (int pass = 0; pass < 2; ++pass) {
    ASSERT_OK_AND_ASSIGN(auto got, EncodeEach(*tokenizer, texts));
    for (size_t i = 0; i < texts.size(); ++i) {
      std::vector<int> want;
      ASSERT_TRUE(library.Encode(texts[i], &want).ok());
      ASSERT_EQ(got[i], want) << "text " << i << " '" << texts[i] << "', model " << flags;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, SentencePieceIds,
    ::testing::Values(Model{"", true}, Model{"--byte_fallback=true", true},
                      Model{"--remove_extra_whitespaces=false", true},
                      Model{"--add_dummy_prefix=false", true}, Model{"--split_digits=true", true},
                      Model{"--normalization_rule_name=identity", true},
                      Model{"--normalization_rule_name=nfkc_cf", true},
                      Model{"--user_defined_symbols=film,\xE2\x98\x83", false},
                      Model{"--split_by_whitespace=false", false},
                      Model{"--treat_whitespace_as_suffix=true", false},
                      Model{"--allow_whitespace_only_pieces=true --remove_extra_whitespaces=false",
                            false}));

// A hand-made BPE ModelProto (serialized): `pieces` as (piece, score,
// type), BPE, an identity normalizer that keeps the dummy prefix.
std::string HandMadeBpe(const std::vector<std::tuple<std::string, float, int>>& pieces) {
  auto varint = [](std::string* out, uint64_t v) {
    for (; v >= 0x80; v >>= 7) out->push_back(static_cast<char>(v | 0x80));
    out->push_back(static_cast<char>(v));
  };
  auto bytes = [&](std::string* out, int number, const std::string& b) {
    varint(out, (static_cast<uint64_t>(number) << 3) | 2);
    varint(out, b.size());
    out->append(b);
  };
  std::string model;
  for (const auto& [piece, score, type] : pieces) {
    std::string p;
    bytes(&p, 1, piece);
    p.push_back(static_cast<char>((2 << 3) | 5));
    p.append(reinterpret_cast<const char*>(&score), 4);
    varint(&p, 3 << 3);
    varint(&p, static_cast<uint64_t>(type));
    bytes(&model, 1, p);
  }
  bytes(&model, 2, std::string("\x18\x02", 2));  // trainer_spec { model_type: BPE }
  bytes(&model, 3, "\x0A\x08identity");          // normalizer_spec { name: "identity" }
  return model;
}

// Pieces of equal score: the library merges the leftmost pair first.
TEST(SentencePieceTies, MergeTheLeftmostFirst) {
  const std::string model = HandMadeBpe({{"<unk>", 0, 2},
                                         {"<s>", 0, 3},
                                         {"</s>", 0, 3},
                                         {"\xE2\x96\x81", 0, 1},
                                         {"a", 0, 1},
                                         {"b", 0, 1},
                                         {"aa", -1, 1},
                                         {"ab", -1, 1},
                                         {"ba", -1, 1},
                                         {"\xE2\x96\x81"
                                          "a",
                                          -2, 1}});
  sentencepiece::SentencePieceProcessor library;
  ASSERT_TRUE(library.LoadFromSerializedProto(model).ok());
  ASSERT_OK_AND_ASSIGN(auto tokenizer, SentencePieceTokenizer::Load(model, "ties.model"));
  EXPECT_TRUE(tokenizer->encodes_by_word());
  const std::vector<std::string> texts = {"aaa",       "aaaaa", "aba",        "abab",
                                          "baab a aa", "c aac", "bbb aaa bab"};
  ASSERT_OK_AND_ASSIGN(auto got, EncodeEach(*tokenizer, texts));
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<int> want;
    ASSERT_TRUE(library.Encode(texts[i], &want).ok());
    EXPECT_EQ(got[i], want) << "'" << texts[i] << "'";
  }
}

}  // namespace

}  // namespace icefloe::transform
