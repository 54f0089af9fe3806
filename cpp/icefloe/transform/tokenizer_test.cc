#include "icefloe/transform/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include "icefloe/transform/test_util.h"

namespace icefloe::transform {

namespace fs = std::filesystem;

// The contract of Tokenizer::EncodeText (ids appended, never replacing what
// the caller holds) for each kind; a friend of Tokenizer to reach it.
class TokenizerTest : public ::testing::Test {
 protected:
  static arrow::Status EncodeText(const Tokenizer& t, std::string_view text,
                                  std::vector<int32_t>* ids) {
    return t.EncodeText(text, ids);
  }

  // A small SentencePiece BPE model trained on the test's own text.
  static std::string SentencePieceModel() {
    const fs::path dir =
        fs::temp_directory_path() / ("icefloe_tokenizer_test_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    {
      std::ofstream out(dir / "corpus.txt");
      const char* words[] = {"great", "film", "terrible", "plot", "loved", "the", "café"};
      std::mt19937 rng(7);
      for (int line = 0; line < 200; ++line) {
        for (int w = 0; w < 10; ++w) out << words[rng() % std::size(words)] << ' ';
        out << '\n';
      }
    }
    auto st = sentencepiece::SentencePieceTrainer::Train(
        "--input=" + (dir / "corpus.txt").string() + " --model_prefix=" + (dir / "spm").string() +
        " --vocab_size=40 --model_type=bpe --hard_vocab_limit=false --minloglevel=2");
    EXPECT_TRUE(st.ok()) << st.ToString();
    std::ifstream in(dir / "spm.model", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    fs::remove_all(dir);
    return bytes;
  }
};

TEST_F(TokenizerTest, SentencePieceAppendsItsIds) {
  ASSERT_OK_AND_ASSIGN(auto t, Tokenizer::Load(SentencePieceModel(), "spm.model"));
  std::vector<int32_t> alone;
  ASSERT_OK(EncodeText(*t, "great film", &alone));
  ASSERT_FALSE(alone.empty());
  std::vector<int32_t> ids = {-7, -8};  // the caller's, kept
  ASSERT_OK(EncodeText(*t, "great film", &ids));
  std::vector<int32_t> want = {-7, -8};
  want.insert(want.end(), alone.begin(), alone.end());
  EXPECT_EQ(ids, want);
}

TEST_F(TokenizerTest, ATokenizerJsonAppendsItsIds) {
  const std::string json = R"j({"version": "1.0",
    "pre_tokenizer": {"type": "BertPreTokenizer"},
    "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
              "max_input_chars_per_word": 100,
              "vocab": {"[UNK]": 0, "great": 1, "film": 2, "##s": 3}}})j";
  ASSERT_OK_AND_ASSIGN(auto t, Tokenizer::Load(json, "tokenizer.json"));
  std::vector<int32_t> ids = {-7};
  ASSERT_OK(EncodeText(*t, "great films", &ids));
  EXPECT_EQ(ids, (std::vector<int32_t>{-7, 1, 2, 3}));
}

// A model in use is parsed once: the same bytes from the same place give the
// same tokenizer while one is held (a packed copy's two columns, the head's
// check beside the nodes' loads); another place or other bytes parse anew.
TEST_F(TokenizerTest, AModelInUseIsParsedOnce) {
  const std::string json = R"j({"version": "1.0",
    "pre_tokenizer": {"type": "BertPreTokenizer"},
    "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
              "max_input_chars_per_word": 100,
              "vocab": {"[UNK]": 0, "great": 1, "film": 2, "##s": 3}}})j";
  ASSERT_OK_AND_ASSIGN(auto a, Tokenizer::Load(json, "s3://m/tokenizer.json"));
  ASSERT_OK_AND_ASSIGN(auto b, Tokenizer::Load(json, "s3://m/tokenizer.json"));
  EXPECT_EQ(a.get(), b.get());
  ASSERT_OK_AND_ASSIGN(auto elsewhere, Tokenizer::Load(json, "file:///m/tokenizer.json"));
  EXPECT_NE(elsewhere.get(), a.get());
  std::string other = json;
  other.replace(other.find("\"film\": 2"), 9, "\"films\": 2");
  ASSERT_OK_AND_ASSIGN(auto changed, Tokenizer::Load(other, "s3://m/tokenizer.json"));
  EXPECT_NE(changed.get(), a.get());
  std::vector<int32_t> ids;
  ASSERT_OK(EncodeText(*changed, "great films", &ids));
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2}));  // its own vocabulary, not the first's
  // Refusals are not kept: a bad model is refused each time it is asked for.
  EXPECT_FALSE(Tokenizer::Load("{\"model\": 1}", "bad.json").ok());
  EXPECT_FALSE(Tokenizer::Load("{\"model\": 1}", "bad.json").ok());
}

// A byte-level BPE hands its words to the model in runs (ByteLevelWords,
// Bpe::TokenizeWords): a text of several runs' words, repeating and not,
// gives each word's ids in order, as the word alone (with its space) does.
TEST_F(TokenizerTest, AByteLevelTextOfManyRunsGivesEachWordsIds) {
  const std::string json = R"j({"version": "1.0",
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
                      "use_regex": true},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "\u0120": 2, "ab": 3, "\u0120a": 4,
                                       "\u0120ab": 5, "ba": 6, "\u0120b": 7},
              "merges": ["a b", "\u0120 a", "\u0120a b", "b a", "\u0120 b"]}})j";
  ASSERT_OK_AND_ASSIGN(auto t, Tokenizer::Load(json, "tokenizer.json"));
  const char* vocabulary[] = {"ab", "ba", "a", "b", "aab", "bab", "abba", "baab"};
  std::mt19937 rng(43);  // the seed of the words' order
  std::string text;
  std::vector<int32_t> want;
  for (int w = 0; w < 1000; ++w) {
    const std::string word = (w == 0 ? "" : " ") + std::string(vocabulary[rng() % 8]);
    std::vector<int32_t> alone;
    ASSERT_OK(EncodeText(*t, word, &alone));
    want.insert(want.end(), alone.begin(), alone.end());
    text += word;
  }
  std::vector<int32_t> ids;
  ASSERT_OK(EncodeText(*t, text, &ids));
  EXPECT_EQ(ids, want) << "seed 43";
}

}  // namespace icefloe::transform
