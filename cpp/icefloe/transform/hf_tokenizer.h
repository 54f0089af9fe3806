// A Hugging Face `tokenizer.json`: the ids of the `tokenizers` package's
// `Tokenizer.from_file(path).encode(text, add_special_tokens=S).ids` (with
// no truncation or padding: the file's `truncation` and `padding` sections
// are ignored, as transformers' `tokenizer(text)` ignores them; `max_tokens`
// truncates, `pad_to` pads with `padding.pad_id`). Encode only: the `decoder`
// section is checked (a decoder the library knows) but not run.
//
// Supported: added tokens; normalizers BertNormalizer, NFC/NFD/NFKC/NFKD,
// Lowercase, Strip, StripAccents, Replace and Prepend; pre-tokenizers
// BertPreTokenizer, ByteLevel and Split (regexes on Oniguruma, as the
// library), Digits, Punctuation, Whitespace, WhitespaceSplit and Metaspace;
// Sequence of either kind; models WordPiece, BPE and Unigram; post-processors
// TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel (ids
// unchanged) and a Sequence of them. Anything else is refused at load,
// naming its JSON path.
#pragma once

#include <memory>
#include <string>

#include "icefloe/transform/added_vocabulary.h"
#include "icefloe/transform/bert.h"
#include "icefloe/transform/hf_components.h"
#include "icefloe/transform/regex_split.h"
#include "icefloe/transform/tokenizer.h"

namespace icefloe::transform {

class HfTokenizer final : public Tokenizer {
 public:
  /// Parses the file; Invalid naming `location` and the JSON path (or the
  /// line and column where the JSON is malformed).
  static arrow::Result<std::unique_ptr<HfTokenizer>> Load(const std::string& bytes,
                                                          const std::string& location);

  std::string kind() const override { return "tokenizer.json " + model_->type(); }
  int32_t vocab_size() const override { return model_->vocab_size(); }
  std::optional<int32_t> pad_id() const override { return pad_id_; }
  arrow::Status Check(const TokenizeOptions& options) const override;

 protected:
  arrow::Status EncodeText(std::string_view text, std::vector<int32_t>* ids) const override;
  void Framing(const TokenizeOptions& options, std::vector<int32_t>* prefix,
               std::vector<int32_t>* suffix) const override;

 private:
  explicit HfTokenizer(std::string location) : Tokenizer(std::move(location)) {}
  arrow::Status ReadAddedTokens(const hf::Json& j);
  /// Reads the post-processor at `path` (recursing into a Sequence);
  /// `framed` says whether one adding special tokens was read already.
  arrow::Status ReadPostProcessor(const hf::Json* j, const std::string& path, bool* framed);
  /// Invalid at `path` unless `id` is a token's: the model's or an added one.
  arrow::Status CheckId(int64_t id, const std::string& path) const;
  /// Normalized text (added tokens split out) to ids; `at_start`: the
  /// piece begins where the row's text does.
  arrow::Status EncodeNormalized(std::string_view text, bool at_start,
                                 std::vector<int32_t>* ids) const;

  std::unique_ptr<hf::Normalizer> normalizer_;
  std::unique_ptr<hf::PreTokenizer> pre_tokenizer_;
  /// pre_tokenizer_'s words without a string each, when it is a byte-level one.
  std::unique_ptr<hf::ByteLevelWords> byte_level_words_;
  /// pre_tokenizer_ when it is a BertPreTokenizer, for the same.
  const hf::BertPreTokenizer* bert_words_ = nullptr;
  std::unique_ptr<hf::Model> model_;
  hf::AddedVocabulary added_;
  std::vector<int32_t> prefix_;    ///< the post-processor's ids before a text's
  std::vector<int32_t> suffix_;    ///< and after
  std::optional<int32_t> pad_id_;  ///< `padding.pad_id`
  int64_t ids_ = 0;                ///< the token ids: 0..ids_-1 (model, then added tokens)
};

}  // namespace icefloe::transform
