// The `BPE` model of a tokenizer.json (GPT-2, Llama-3, Qwen2 byte-level
// files among others), as the `tokenizers` package's BPE encodes: a word's
// characters (continuations prefixed, the last suffixed, unknown ones the
// unk token, fused or not, or their bytes as <0xXX> tokens with
// byte_fallback) merged pair by pair, lowest merge rank first and leftmost
// among equals; with ignore_merges a word in the vocabulary is its token.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "icefloe/transform/hf_components.h"
#include "icefloe/transform/token_table.h"

namespace icefloe::transform::hf {

class Bpe final : public Model {
 public:
  /// Reads the section (`type` already checked): dropout must be null (or
  /// 0); every merge's two tokens and their concatenation must be in the
  /// vocabulary, as must the unk token.
  static arrow::Result<std::unique_ptr<Bpe>> FromJson(JsonObject* o);

  void Tokenize(std::string_view word, std::vector<int32_t>* ids) const override;
  /// The words' cache sets and vocabulary slots prefetched together, then each word's ids.
  void TokenizeWords(std::span<const std::string_view> words,
                     std::vector<int32_t>* ids) const override;
  std::optional<int32_t> TokenToId(std::string_view token) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(vocab_.size()); }
  std::string type() const override { return "BPE"; }

 private:
  Bpe() = default;
  /// Tokenize without the cache.
  void TokenizeUncached(std::string_view word, std::vector<int32_t>* ids) const;
  using Merge = PairTable::Value;
  const Merge* FindMerge(int32_t a, int32_t b) const { return merges_.Find(a, b); }
  /// The id of a word's character `cp` at [start, start + len) (with the
  /// prefix and suffix its place gives it), or -1.
  int32_t CharId(std::string_view word, size_t start, size_t len, int32_t cp) const;

  Vocab vocab_;
  TokenTable tokens_;  ///< vocab_, for the lookups of Tokenize
  PairTable merges_;
  const uint64_t cache_owner_ = WordCache::NextOwner();
  std::string prefix_;  ///< continuing_subword_prefix
  std::string suffix_;  ///< end_of_word_suffix
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::array<int32_t, 256> byte_ids_{};  ///< <0xXX>'s ids; -1 where one is missing
  /// The ids of the one-character tokens below U+0800 (every byte-level
  /// character), -1 where absent; empty when a prefix or suffix applies.
  std::vector<int32_t> char_ids_;
};

}  // namespace icefloe::transform::hf
