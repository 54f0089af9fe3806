// The `WordPiece` model of a tokenizer.json: greedy longest-prefix match of
// a word against the vocabulary, continuations prefixed (`##`); a word with
// no match, or longer than max_input_chars_per_word characters, is the
// unknown token.
#pragma once

#include <string>

#include "icefloe/transform/hf_components.h"
#include "icefloe/transform/token_table.h"

namespace icefloe::transform::hf {

class WordPiece final : public Model {
 public:
  /// Reads the section (`type` already checked): the vocabulary's ids must
  /// be 0..N-1, each once; the unknown token must be in it.
  static arrow::Result<std::unique_ptr<WordPiece>> FromJson(JsonObject* o);

  void Tokenize(std::string_view word, std::vector<int32_t>* ids) const override;
  std::optional<int32_t> TokenToId(std::string_view token) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(vocab_.size()); }
  std::string type() const override { return "WordPiece"; }

 private:
  WordPiece() = default;
  /// Tokenize without the cache.
  void TokenizeUncached(std::string_view word, std::vector<int32_t>* ids) const;
  Vocab vocab_;
  TokenTable tokens_;  ///< vocab_, for the lookups of Tokenize
  const uint64_t cache_owner_ = WordCache::NextOwner();
  std::string prefix_;
  int32_t unk_id_ = -1;
  int64_t max_chars_ = 100;
};

}  // namespace icefloe::transform::hf
